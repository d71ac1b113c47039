package tests

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// authServer is tests/node/oauth-as.mjs: the npm oauth2-mock-server, a
// real authorization server (OpenID discovery, JWKS, token endpoint), with
// routes of its own to count requests and mint tokens with given claims.
type authServer struct {
	issuer string
}

func startAuthServer(t *testing.T) *authServer {
	t.Helper()
	return &authServer{issuer: startNodeAS(t, "oauth-as")}
}

// startNodeAS runs the authorization server tests/node/<name>.mjs on a
// free port and returns its issuer URL once it answers.
func startNodeAS(t *testing.T, name string) string {
	t.Helper()
	port := freePort(t)
	cmd := exec.Command(nodeBin(t), filepath.Join(testsDir(t), "node", name+".mjs"), fmt.Sprint(port))
	cmd.Dir = testsDir(t)
	issuer := fmt.Sprintf("http://127.0.0.1:%d", port)
	startPeer(t, name, cmd).waitUp(t, issuer)
	return issuer
}

// mint asks the server for a token signed with its key, claims and header
// fields set over its defaults (a nil value deletes a claim).
func (a *authServer) mint(t *testing.T, claims, header map[string]any, expiresIn int) string {
	t.Helper()
	c, _ := json.Marshal(claims)
	h, _ := json.Marshal(header)
	q := url.Values{"claims": {string(c)}, "header": {string(h)}, "expires_in": {fmt.Sprint(expiresIn)}}
	return string(a.get(t, "/test/mint?"+q.Encode()))
}

// counts is how many JWKS and token requests the server has had.
func (a *authServer) counts(t *testing.T) (jwks, token int) {
	t.Helper()
	var c struct{ JWKS, Token int }
	if err := json.Unmarshal(a.get(t, "/test/counts"), &c); err != nil {
		t.Fatal(err)
	}
	return c.JWKS, c.Token
}

func (a *authServer) get(t *testing.T, path string) []byte {
	t.Helper()
	resp, err := http.Get(a.issuer + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s %v", path, resp.StatusCode, b, err)
	}
	return b
}

// startAuthGateway runs a gateway at /mcp with `auth` for a's issuer (its
// audience the gateway's own URL) and the lines of block, its matcher
// letting the metadata and a REST face at /api reach it, and a response
// header showing the `{http.auth.user.sub}` placeholder.
func startAuthGateway(t *testing.T, a *authServer, block string) *gateway {
	t.Helper()
	return launchAuthGateway(t, a.issuer, block, "")
}

// launchAuthGateway is startAuthGateway for issuer, with the lines of
// authLines in its auth block and env in its environment.
func launchAuthGateway(t *testing.T, issuer, block, authLines string, env ...string) *gateway {
	t.Helper()
	port := freePort(t)
	caddyfile := fmt.Sprintf(`{
	admin 127.0.0.1:%d
	grace_period 10s
	persist_config off
	storage file_system %s
	log {
		level DEBUG
	}
}

:%d {
	bind 127.0.0.1
	header >X-Auth-Subject {http.auth.user.sub}
	@mcp path /mcp /api /api/* /.well-known/oauth-protected-resource/mcp
	mcp_gateway @mcp {
%s
		auth {
			issuer %s
			audience http://127.0.0.1:%d/mcp
			require_scope mcp
%s
		}
	}
}
`, freePort(t), t.TempDir(), port, block, issuer, port, authLines)
	return launchCaddyfile(t, port, "", caddyfile, env...)
}

// TestAuthSDKClientFlow: the TypeScript SDK's own client auth, against a
// real authorization server: the gateway's 401 names its Protected
// Resource Metadata, from which the client finds the authorization server,
// gets a token for the gateway's URL (RFC 8707) and calls a tool that asks
// a question, through a gateway in front of a legacy server (the question
// in-line on SSE), of a modern one (the reverse bridge's round), and of
// both as one federated block.
func TestAuthSDKClientFlow(t *testing.T) {
	t.Parallel()
	a := startAuthServer(t)
	legacy, modern := startGoEverything(t, false), startModernFixture(t) // its test_elicitation asks with input_required
	for _, c := range []struct{ name, block, tool string }{
		{"legacy", "\t\tupstream " + legacy, "test_elicitation"},
		{"modern", "\t\tupstream " + modern, "test_elicitation"},
		// The block's reverse bridge reaches its merged endpoint in-process,
		// as the authenticated subject.
		{"federated", "\t\tserver old {\n\t\t\tupstream " + legacy + "\n\t\t}\n\t\tserver new {\n\t\t\tupstream " + modern + "\n\t\t}", "old__test_elicitation"},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := startAuthGateway(t, a, c.block)
			_, tokensBefore := a.counts(t)
			out, err := runNodeScript(t, "oauth-client.mjs", g.URL, c.tool, `{"message":"who?"}`, "client=agent-7", "issuer="+a.issuer, "scope=mcp")
			if err != nil {
				t.Fatal(err)
			}
			var got struct {
				TokenAudience any    `json:"tokenAudience"`
				TokenSubject  string `json:"tokenSubject"`
				Elicitations  int    `json:"elicitations"`
				Result        struct {
					Content []struct{ Text string } `json:"content"`
					IsError bool                    `json:"isError"`
				} `json:"result"`
			}
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatalf("%s: %v", out, err)
			}
			t.Logf("oauth-client: %s", out)
			if got.TokenAudience != g.URL || got.TokenSubject != "agent-7" || got.Elicitations != 1 || got.Result.IsError || len(got.Result.Content) == 0 {
				t.Fatalf("want a token for %s of agent-7 and a result after one elicitation, got %s", g.URL, out)
			}
			if _, tokens := a.counts(t); tokens != tokensBefore+1 {
				t.Errorf("the client asked the token endpoint %d times, want once", tokens-tokensBefore)
			}
		})
	}
}

// TestAuthAttacks: each token the resource server must refuse is refused
// with its status and challenge before anything reaches the upstream; a
// valid one passes with its subject in the placeholders; a flood of
// unknown key ids costs the authorization server no JWKS fetch within the
// floor; and the principal (the token's issuer and subject) keeps parked
// calls and REST records to their owner.
func TestAuthAttacks(t *testing.T) {
	t.Parallel()
	a := startAuthServer(t)
	rs := newRecordingServer(t)
	g := startAuthGateway(t, a, "\t\tupstream "+rs.url+" {\n\t\t\tera legacy\n\t\t}\n\t\trest /api\n\t\tstate_key "+testKey(9))
	metadataURL := fmt.Sprintf("http://127.0.0.1:%d/.well-known/oauth-protected-resource/mcp", g.Port)
	valid := func(sub string) map[string]any {
		return map[string]any{"sub": sub, "aud": g.URL, "scope": "mcp"}
	}
	bearer := func(tok string) map[string]string { return map[string]string{"Authorization": "Bearer " + tok} }
	alice, mallory := bearer(a.mint(t, valid("alice"), nil, 600)), bearer(a.mint(t, valid("mallory"), nil, 600))

	// The metadata (RFC 9728).
	md := send(t, "GET", metadataURL, nil, "")
	var doc map[string]any
	if err := json.NewDecoder(md.Body).Decode(&doc); err != nil || md.StatusCode != 200 {
		t.Fatalf("metadata: %d %v", md.StatusCode, err)
	}
	md.Body.Close()
	if doc["resource"] != g.URL || fmt.Sprint(doc["authorization_servers"]) != "["+a.issuer+"]" ||
		fmt.Sprint(doc["scopes_supported"]) != "[mcp]" || fmt.Sprint(doc["bearer_methods_supported"]) != "[header]" {
		t.Fatalf("metadata: %v", doc)
	}

	// A valid token passes, its subject in {http.auth.user.sub}.
	x := askCall(t, g.URL, 1, "tea", nil, alice)
	ir := parseInputRequired(t, x)
	if x.Header.Get("X-Auth-Subject") != "alice" {
		t.Fatalf("X-Auth-Subject = %q, want alice", x.Header.Get("X-Auth-Subject"))
	}

	// The HS256 token keyed with the issuer's RSA public key (PEM), as a
	// library that takes the algorithm from the token would check it.
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(a.get(t, "/jwks"), &set); err != nil || len(set.Keys) == 0 {
		t.Fatalf("jwks: %v", err)
	}
	der, _ := x509.MarshalPKIXPublicKey(set.Keys[0].Key)
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	claims := valid("mallory")
	claims["iss"], claims["exp"] = a.issuer, time.Now().Add(time.Hour).Unix()
	forged := func(alg string, sign func(string) []byte) string {
		enc := func(v any) string { b, _ := json.Marshal(v); return base64.RawURLEncoding.EncodeToString(b) }
		in := enc(map[string]any{"alg": alg, "kid": set.Keys[0].KeyID, "typ": "JWT"}) + "." + enc(claims)
		return in + "." + base64.RawURLEncoding.EncodeToString(sign(in))
	}
	now := time.Now().Unix()
	before := rs.requests.Load()
	for _, c := range []struct {
		name   string
		hdr    map[string]string
		status int
		want   string // in WWW-Authenticate
	}{
		{"no token", nil, 401, `Bearer resource_metadata="` + metadataURL + `"`},
		{"not bearer", map[string]string{"Authorization": "Basic YWxpY2U6eA=="}, 401, `resource_metadata=`},
		{"expired", bearer(a.mint(t, valid("mallory"), nil, -120)), 401, `error="invalid_token"`},
		{"not yet valid", bearer(a.mint(t, map[string]any{"sub": "mallory", "aud": g.URL, "scope": "mcp", "nbf": now + 120}, nil, 600)), 401, `error="invalid_token"`},
		{"wrong audience", bearer(a.mint(t, map[string]any{"sub": "mallory", "aud": "http://127.0.0.1:1/mcp", "scope": "mcp"}, nil, 600)), 401, `error="invalid_token"`},
		{"wrong issuer", bearer(a.mint(t, map[string]any{"sub": "mallory", "aud": g.URL, "scope": "mcp", "iss": "http://127.0.0.1:1"}, nil, 600)), 401, `error="invalid_token"`},
		{"alg none", bearer(forged("none", func(string) []byte { return nil })), 401, `error="invalid_token"`},
		{"HS256 keyed with the public key", bearer(forged("HS256", func(in string) []byte {
			m := hmac.New(sha256.New, pubPEM)
			m.Write([]byte(in))
			return m.Sum(nil)
		})), 401, `error="invalid_token"`},
		{"unknown kid", bearer(a.mint(t, valid("mallory"), map[string]any{"kid": "made-up"}, 600)), 401, `error="invalid_token"`},
		{"no scope", bearer(a.mint(t, map[string]any{"sub": "mallory", "aud": g.URL, "scope": "read"}, nil, 600)), 403, `error="insufficient_scope", scope="mcp"`},
	} {
		x := askCall(t, g.URL, 2, "tea", nil, c.hdr)
		if x.Status != c.status || !strings.Contains(x.Header.Get("WWW-Authenticate"), c.want) || !strings.Contains(x.Raw, `"error"`) {
			t.Errorf("%s: %d %q %s, want %d with %s", c.name, x.Status, x.Header.Get("WWW-Authenticate"), x.Raw, c.status, c.want)
		}
	}
	if n := rs.requests.Load(); n != before {
		t.Errorf("the upstream got %d requests of refused tokens", n-before)
	}

	// Unknown key ids: within the floor, no JWKS fetch at all (the
	// gateway's first validation fetched it once, and this test once, for
	// the forgery). Past the floor one fetch each: translate/auth's
	// TestUnknownKidRefetchFloor, on a clock of its own.
	jwks, _ := a.counts(t)
	for i := range 10 {
		askCall(t, g.URL, 3, "tea", nil, bearer(a.mint(t, valid("mallory"), map[string]any{"kid": fmt.Sprint("made-up-", i)}, 600)))
	}
	if after, _ := a.counts(t); after != jwks || jwks != 2 {
		t.Errorf("JWKS fetched %d times before the flood and %d after, want 2 and 2", jwks, after)
	}

	// Mallory cannot resume alice's parked call; alice can.
	var key string
	for k := range ir.InputRequests {
		key = k
	}
	good := map[string]any{"inputResponses": map[string]any{key: acceptAnswer}, "requestState": ir.RequestState}
	if r := checkRPCError(t, askCall(t, g.URL, 4, "tea", good, mallory), http.StatusBadRequest, -32602, 4); r != nil && r.Error.Message != stateRefused {
		t.Errorf("mallory resuming: %q", r.Error.Message)
	}
	if x := askCall(t, g.URL, 5, "tea", good, alice); x.Status != 200 || !strings.Contains(x.Raw, `"result"`) || strings.Contains(x.Raw, "input_required") {
		t.Errorf("alice resuming: %d %s", x.Status, x.Raw)
	}

	// Mallory cannot read alice's REST record.
	base := fmt.Sprintf("http://127.0.0.1:%d/api/tools/ask/calls/r1", g.Port)
	wantCall(t, restDo(t, "PUT", base, withHeaders(alice, "Idempotency-Key", "k"), `{"arguments":{"topic":"tea"}}`), http.StatusCreated, "awaitingElicitationResult")
	wantCall(t, restDo(t, "GET", base, alice, ""), http.StatusOK, "awaitingElicitationResult")
	wantProblem(t, restDo(t, "GET", base, mallory, ""), http.StatusNotFound)
	if r := restDo(t, "GET", base, nil, ""); r.Status != http.StatusUnauthorized {
		t.Errorf("REST without a token: %d", r.Status)
	}
	// The refusals are logged (at debug, with their reason), the tokens never.
	if !strings.Contains(g.Log(), `"access token refused"`) || !strings.Contains(g.Log(), "token is expired") {
		t.Errorf("the refusals' reasons are not in the debug log")
	}
	for _, tok := range []map[string]string{alice, mallory} {
		if secret := strings.TrimPrefix(tok["Authorization"], "Bearer "); strings.Contains(g.Log(), secret[len(secret)-20:]) {
			t.Errorf("a token is in the gateway's log")
		}
	}
}

// TestAuthTasksBound: a task belongs to the token's subject, not to the
// token: another subject's valid token sees no such task, to get or to
// cancel it, and the same subject's next token (refreshed) sees it.
func TestAuthTasksBound(t *testing.T) {
	t.Parallel()
	a := startAuthServer(t)
	up, calls, _ := newTaskServer(t)
	g := startAuthGateway(t, a, "\t\tupstream "+up+" {\n\t\t\tera legacy\n\t\t}\n\t\ttask ask_later optional 0")
	token := func(sub, jti string) string {
		return "Bearer " + a.mint(t, map[string]any{"sub": sub, "aud": g.URL, "scope": "mcp", "jti": jti}, nil, 600)
	}
	alice, mallory := &taskClient{t: t, auth: token("alice", "1")}, &taskClient{t: t, auth: token("mallory", "2")}
	created := parseTask(t, alice.call(g.URL, "ask_later"))
	if created.ResultType != "task" {
		t.Fatalf("CreateTaskResult %+v", created)
	}
	wait(t, calls, 5*time.Second, "the call upstream")
	alice.until(g.URL, created.TaskID, func(v taskView) bool { return v.Status == "input_required" }, "input_required")
	wantRPCError(t, mallory.task(g.URL, "tasks/get", created.TaskID, nil), -32602, "another subject's tasks/get")
	wantRPCError(t, mallory.task(g.URL, "tasks/cancel", created.TaskID, nil), -32602, "another subject's tasks/cancel")
	refreshed := &taskClient{t: t, auth: token("alice", "3")}
	if v := refreshed.until(g.URL, created.TaskID, func(v taskView) bool { return true }, "any"); v.Status != "input_required" {
		t.Fatalf("alice's refreshed token, after mallory's cancel: %+v", v)
	}
}
