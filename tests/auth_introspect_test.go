package tests

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
)

// oidcServer is tests/node/oidc-as.mjs: the npm oidc-provider, a real
// authorization server issuing opaque access tokens (client_credentials
// with resource indicators) and answering introspection and revocation,
// with routes of its own to count introspections and slow them down.
type oidcServer struct {
	issuer string
}

func startOIDCServer(t *testing.T) *oidcServer {
	t.Helper()
	return &oidcServer{issuer: startNodeAS(t, "oidc-as")}
}

// token gets an opaque access token for resource with scope, by the
// client_credentials grant of the client mcp-client.
func (o *oidcServer) token(t *testing.T, resource, scope string) string {
	t.Helper()
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	o.post(t, "/token", url.Values{"grant_type": {"client_credentials"}, "resource": {resource}, "scope": {scope}}, &tok)
	if tok.AccessToken == "" || strings.Count(tok.AccessToken, ".") == 2 {
		t.Fatalf("want an opaque access token, got %q", tok.AccessToken)
	}
	return tok.AccessToken
}

// revoke revokes token (RFC 7009).
func (o *oidcServer) revoke(t *testing.T, token string) {
	t.Helper()
	o.post(t, "/token/revocation", url.Values{"token": {token}}, nil)
}

func (o *oidcServer) post(t *testing.T, path string, form url.Values, into any) {
	t.Helper()
	req, _ := http.NewRequest("POST", o.issuer+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth("mcp-client", "mcp-client-secret")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST %s: %d", path, resp.StatusCode)
	}
	if into != nil {
		if err := json.NewDecoder(resp.Body).Decode(into); err != nil {
			t.Fatal(err)
		}
	}
}

// oidcCounts are the server's introspection requests, the most it had in
// flight at once, and its token requests.
type oidcCounts struct{ Introspections, MaxInFlight, Tokens int }

func (o *oidcServer) counts(t *testing.T) oidcCounts {
	t.Helper()
	var c oidcCounts
	if err := json.Unmarshal((&authServer{issuer: o.issuer}).get(t, "/test/counts"), &c); err != nil {
		t.Fatal(err)
	}
	return c
}

// startIntrospectGateway runs a gateway at /mcp with `auth` for o's issuer
// (its audience the gateway's own URL), its introspection with the client
// mcp-gateway and the lines of introspection, and the lines of block; the
// `{http.auth.user.sub}` placeholder shows in a response header.
func startIntrospectGateway(t *testing.T, o *oidcServer, block, introspection string) *gateway {
	t.Helper()
	return launchAuthGateway(t, o.issuer, block, `			introspection {
				client_id mcp-gateway
				client_secret {env.TEST_INTROSPECTION_SECRET}
`+introspection+`
			}`, "TEST_INTROSPECTION_SECRET=mcp-gateway-secret")
}

// TestAuthIntrospectSDKClientFlow: the TypeScript SDK's own client auth
// against oidc-provider, which issues opaque tokens, in front of a legacy
// server and a modern one: from the gateway's 401 the client finds the
// authorization server and gets a token for the gateway's URL, by the
// client_credentials grant of a registered client, then by the
// authorization code grant with PKCE as a user, registering itself
// (dynamic client registration; the script plays the user agent through
// the sign-in and consent pages); each calls a tool that asks a question.
// The gateway introspects each token once for the whole session, and no
// server behind it sees one.
func TestAuthIntrospectSDKClientFlow(t *testing.T) {
	t.Parallel()
	o := startOIDCServer(t)
	legacy, modern := newAuthRecorder(t, startGoEverything(t, false)), newAuthRecorder(t, startModernFixture(t))
	for _, c := range []struct {
		name string
		rec  *authRecorder
	}{{"legacy", legacy}, {"modern", modern}} {
		t.Run(c.name, func(t *testing.T) {
			g := startIntrospectGateway(t, o, "\t\tupstream "+c.rec.url, "")
			for _, flow := range []struct {
				script string
				args   []string
			}{
				{"oauth-client.mjs", []string{"client=mcp-client", "secret=mcp-client-secret", "issuer=" + o.issuer, "scope=mcp"}},
				{"oauth-code-client.mjs", []string{"user=alice"}},
			} {
				before := o.counts(t)
				out, err := runNodeScript(t, flow.script, append([]string{g.URL, "test_elicitation", `{"message":"who?"}`}, flow.args...)...)
				if err != nil {
					t.Fatal(err)
				}
				t.Logf("%s: %s", flow.script, out)
				var got struct {
					TokenOpaque         bool              `json:"tokenOpaque"`
					RegisteredClient    *string           `json:"registeredClient"`
					AuthorizationParams map[string]string `json:"authorizationParams"`
					Elicitations        int               `json:"elicitations"`
					Result              struct {
						Content []struct{ Text string } `json:"content"`
						IsError bool                    `json:"isError"`
					} `json:"result"`
				}
				if err := json.Unmarshal(out, &got); err != nil {
					t.Fatalf("%s: %v", out, err)
				}
				if !got.TokenOpaque || got.Elicitations != 1 || got.Result.IsError || len(got.Result.Content) == 0 {
					t.Fatalf("%s: want an opaque token and a result after one elicitation, got %s", flow.script, out)
				}
				if p := got.AuthorizationParams; got.RegisteredClient != nil && (*got.RegisteredClient == "" || p["code_challenge_method"] != "S256" || p["resource"] != g.URL) {
					t.Fatalf("%s: want a registered client and an authorization request with PKCE for %s, got %s", flow.script, g.URL, out)
				}
				after := o.counts(t)
				if after.Tokens != before.Tokens+1 || after.Introspections != before.Introspections+1 {
					t.Errorf("%s: %d token requests and %d introspections, want 1 and 1", flow.script, after.Tokens-before.Tokens, after.Introspections-before.Introspections)
				}
			}
			seen := c.rec.authorizations("/mcp") // the recorder's own path
			if len(seen) == 0 {
				t.Fatal("the server received nothing")
			}
			for _, a := range seen {
				if a != "" {
					t.Fatalf("the server received Authorization %q", a)
				}
			}
		})
	}
}

// TestAuthIntrospectAttacks: opaque tokens the authorization server does
// not vouch for this resource are refused with 401 invalid_token, one
// without the scope with 403, before anything reaches the upstream; a
// valid one costs one introspection however often it is used; a flood of
// junk tokens costs one introspection per distinct token, at most 16 at
// once; an authorization server out of reach is a 503, not a 401.
func TestAuthIntrospectAttacks(t *testing.T) {
	t.Parallel()
	o := startOIDCServer(t)
	rs := newRecordingServer(t)
	upstream := "\t\tupstream " + rs.url + " {\n\t\t\tera legacy\n\t\t}"
	g := startIntrospectGateway(t, o, upstream, "")
	bearer := func(tok string) map[string]string { return map[string]string{"Authorization": "Bearer " + tok} }
	valid := o.token(t, g.URL, "mcp")

	// A valid token passes, its subject in {http.auth.user.sub}; 20 more
	// requests with it cost no introspection.
	before := o.counts(t)
	x := askCall(t, g.URL, 1, "tea", nil, bearer(valid))
	parseInputRequired(t, x)
	if x.Header.Get("X-Auth-Subject") != "mcp-client" {
		t.Fatalf("X-Auth-Subject = %q, want mcp-client", x.Header.Get("X-Auth-Subject"))
	}
	for i := range 20 {
		if x := askCall(t, g.URL, 2+i, "tea", nil, bearer(valid)); x.Status != http.StatusOK {
			t.Fatalf("request %d with the valid token: %s", i, x)
		}
	}
	if n := o.counts(t).Introspections - before.Introspections; n != 1 {
		t.Errorf("21 requests with one token cost %d introspections, want 1", n)
	}

	revoked := o.token(t, g.URL, "mcp")
	o.revoke(t, revoked)
	upstreamBefore := rs.requests.Load()
	for _, c := range []struct {
		name   string
		token  string
		status int
		want   string // in WWW-Authenticate
	}{
		{"revoked", revoked, 401, `error="invalid_token"`},
		{"unknown", "made-up-opaque-token", 401, `error="invalid_token"`},
		{"another resource", o.token(t, "http://127.0.0.1:1/mcp", "mcp"), 401, `error="invalid_token"`},
		{"not a token's characters", "junk,with;punctuation", 401, `error="invalid_token"`},
		{"no scope", o.token(t, g.URL, "read"), 403, `error="insufficient_scope", scope="mcp"`},
	} {
		x := askCall(t, g.URL, 30, "tea", nil, bearer(c.token))
		if x.Status != c.status || !strings.Contains(x.Header.Get("WWW-Authenticate"), c.want) || !strings.Contains(x.Raw, `"error"`) {
			t.Errorf("%s: %d %q %s, want %d with %s", c.name, x.Status, x.Header.Get("WWW-Authenticate"), x.Raw, c.status, c.want)
		}
	}

	// A flood: one junk token 30 times at once, then 40 distinct ones at
	// once while each introspection takes 300 ms.
	flood := func(tokens []string) {
		var wg sync.WaitGroup
		for i, tok := range tokens {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if x := askCall(t, g.URL, 100+i, "tea", nil, bearer(tok)); x.Status != http.StatusUnauthorized {
					t.Errorf("junk token: %d", x.Status)
				}
			}()
		}
		wg.Wait()
	}
	before = o.counts(t)
	same := make([]string, 30)
	for i := range same {
		same[i] = "the-same-junk-token"
	}
	flood(same)
	if n := o.counts(t).Introspections - before.Introspections; n != 1 {
		t.Errorf("30 requests with one junk token cost %d introspections, want 1", n)
	}
	(&authServer{issuer: o.issuer}).get(t, "/test/delay?ms=300")
	distinct := make([]string, 40)
	for i := range distinct {
		distinct[i] = fmt.Sprint("junk-", i)
	}
	before = o.counts(t)
	flood(distinct)
	after := o.counts(t)
	t.Logf("40 distinct junk tokens: %d introspections, %d at most in flight", after.Introspections-before.Introspections, after.MaxInFlight)
	if after.Introspections-before.Introspections != 40 || after.MaxInFlight > 16 {
		t.Errorf("40 distinct junk tokens: %d introspections, %d at most in flight; want 40, at most 16", after.Introspections-before.Introspections, after.MaxInFlight)
	}
	(&authServer{issuer: o.issuer}).get(t, "/test/delay?ms=0")
	if n := rs.requests.Load(); n != upstreamBefore {
		t.Errorf("the upstream got %d requests of refused tokens", n-upstreamBefore)
	}

	// The authorization server out of reach: 503, not 401; nothing
	// upstream; neither its URL nor anything it said shown to the client.
	down := fmt.Sprintf("http://127.0.0.1:%d/token/introspection", freePort(t))
	g2 := startIntrospectGateway(t, o, upstream, "\t\t\t\tendpoint "+down)
	fresh := o.token(t, g2.URL, "mcp")
	upstreamBefore = rs.requests.Load()
	x = askCall(t, g2.URL, 200, "tea", nil, bearer(fresh))
	if x.Status != http.StatusServiceUnavailable || x.Header.Get("WWW-Authenticate") != "" || strings.Contains(x.Raw, "127.0.0.1") || !strings.Contains(x.Raw, `"error"`) {
		t.Errorf("authorization server down: %s (WWW-Authenticate %q), want 503 without a challenge or its URL", x, x.Header.Get("WWW-Authenticate"))
	}
	if n := rs.requests.Load(); n != upstreamBefore {
		t.Errorf("the upstream got %d requests while the token could not be checked", n)
	}
	waitLog(t, g2, "the authorization server is unavailable")

	// The refusals are logged at debug with their reason, the tokens never.
	waitLog(t, g, "invalid token: inactive")
	for _, tok := range []string{valid, revoked, fresh} {
		if strings.Contains(g.Log()+g2.Log(), tok) {
			t.Errorf("a token is in the gateway's log")
		}
	}
}
