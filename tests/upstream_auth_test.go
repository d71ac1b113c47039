package tests

import (
	"fmt"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/tests/support"
)

// authRecorder is a fixture in front of a real MCP server (the go-sdk
// everything-server): it records the path and Authorization of every
// request it passes on, so that a test sees what the gateway sent.
type authRecorder struct {
	url  string
	mu   sync.Mutex
	seen []recordedAuth
}

type recordedAuth struct{ path, authorization string }

func newAuthRecorder(t *testing.T, target string) *authRecorder {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rec := &authRecorder{}
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: u.Scheme, Host: u.Host})
	proxy.FlushInterval = -1
	rec.url = support.Serve(t, fullDuplex(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec.mu.Lock()
		rec.seen = append(rec.seen, recordedAuth{r.URL.Path, r.Header.Get("Authorization")})
		rec.mu.Unlock()
		proxy.ServeHTTP(w, r)
	})))
	return rec
}

// authorizations returns the Authorization of every request to path so far.
func (rec *authRecorder) authorizations(path string) []string {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	var out []string
	for _, s := range rec.seen {
		if s.path == path {
			out = append(out, s.authorization)
		}
	}
	return out
}

// TestUpstreamAuth: what reaches an MCP server as Authorization in every
// cell (legacy and modern pass-through, forward and reverse bridge), with
// upstream_auth none, bearer and exchange (RFC 8693, against a fixture
// token endpoint), and a failing exchange (502 naming the server, nothing
// of the token endpoint's answer).
func TestUpstreamAuth(t *testing.T) {
	t.Parallel()
	recL := newAuthRecorder(t, startGoEverything(t, false)) // legacy
	recM := newAuthRecorder(t, startGoEverything(t, true))  // modern
	ts := support.ServeTokenExchange(t, "gateway", "gateway-secret")
	exchange := func(aud string) string {
		return fmt.Sprintf("upstream_auth exchange {\n\t\t\ttoken_endpoint %s\n\t\t\tclient_id gateway\n\t\t\tclient_secret {env.UPSTREAM_AUTH_SECRET}\n\t\t\taudience %s\n\t\t}", ts.URL, aud)
	}
	block := func(path, url, era, auth string) string {
		return fmt.Sprintf("\tmcp_gateway %s {\n\t\tupstream %s%s {\n\t\t\tera %s\n\t\t}\n\t\t%s\n\t}\n", path, url, path, era, auth)
	}
	site := block("/nl", recL.url, "legacy", "upstream_auth none") + block("/nm", recM.url, "modern", "upstream_auth none") +
		block("/bl", recL.url, "legacy", "upstream_auth bearer {env.UPSTREAM_STATIC}") +
		block("/bm", recM.url, "modern", "upstream_auth bearer {env.UPSTREAM_STATIC}") +
		block("/xl", recL.url, "legacy", exchange("legacy-server")) + block("/xm", recM.url, "modern", exchange("modern-server")) +
		// The pool attack: one principal (X-User) with two tokens.
		block("/pl", recL.url, "legacy", exchange("pooled-server")+"\n\t\tprincipal {http.request.header.X-User}") +
		fmt.Sprintf("\tmcp_gateway /fail {\n\t\tserver billing {\n\t\t\tupstream %s/fail {\n\t\t\t\tera modern\n\t\t\t}\n\t\t\t%s\n\t\t}\n\t}\n",
			recM.url, strings.ReplaceAll(exchange("billing"), "\n\t\t", "\n\t\t\t"))
	g := newGateway(t, freePort(t), fmt.Sprintf("127.0.0.1:%d", freePort(t)))
	g.site = site
	g.writeConfig(t, upstreamBlock(recM.url+"/unused", "modern"))
	g.run(t, "UPSTREAM_STATIC=static-credential", "UPSTREAM_AUTH_SECRET=gateway-secret")
	base := strings.TrimSuffix(g.URL, "/mcp")

	// Each cell, as alice and then bob, twice each.
	cells := []struct{ name, era, path string }{
		{"legacy pass-through", "legacy", "l"}, {"forward bridge", "modern", "l"},
		{"modern pass-through", "modern", "m"}, {"reverse bridge", "legacy", "m"},
	}
	for _, mode := range []string{"n", "b", "x"} {
		for _, c := range cells {
			for _, who := range []string{"alice", "bob", "alice", "bob"} {
				if err := listToolsAs(t, base+"/"+mode+c.path, c.era, map[string]string{"Authorization": "Bearer " + who + "-token"}); err != nil {
					t.Fatalf("%s, %s, %s: %v", mode, c.name, who, err)
				}
			}
		}
	}
	for path, want := range map[string]map[string]bool{
		"/nl": {"": true}, "/nm": {"": true},
		"/bl": {"Bearer static-credential": true}, "/bm": {"Bearer static-credential": true},
		"/xl": {"Bearer exchanged:legacy-server:alice-token": true, "Bearer exchanged:legacy-server:bob-token": true},
		"/xm": {"Bearer exchanged:modern-server:alice-token": true, "Bearer exchanged:modern-server:bob-token": true},
	} {
		rec := recM
		if strings.HasSuffix(path, "l") {
			rec = recL
		}
		got := rec.authorizations("/mcp" + path)
		if len(got) == 0 {
			t.Fatalf("%s: the upstream received nothing", path)
		}
		seen := map[string]bool{}
		for _, a := range got {
			if !want[a] {
				t.Errorf("%s: the upstream received Authorization %q", path, a)
			}
			seen[a] = true
		}
		if len(seen) != len(want) {
			t.Errorf("%s: the upstream received %v, want each of %v", path, seen, want)
		}
	}
	// One exchange per principal and server within the token's life.
	for _, aud := range []string{"legacy-server", "modern-server"} {
		for _, who := range []string{"alice", "bob"} {
			if n := ts.Count(aud, who+"-token"); n != 1 {
				t.Errorf("%d exchanges for %s at %s, want 1", n, who, aud)
			}
		}
	}

	// A pooled upstream session opened with one token's exchange never
	// serves another token of the same principal.
	for i, tok := range []string{"first", "second", "first"} {
		if err := listToolsAs(t, base+"/pl", "modern", map[string]string{"X-User": "carol", "Authorization": "Bearer " + tok}); err != nil {
			t.Fatalf("pooled %d: %v", i, err)
		}
		got := recL.authorizations("/mcp/pl")
		if last := got[len(got)-1]; last != "Bearer exchanged:pooled-server:"+tok {
			t.Fatalf("pooled request %d with token %q reached the upstream with %q", i, tok, last)
		}
	}

	// A failing exchange: 502 naming the server, never the endpoint's
	// answer or URL; nothing reaches the upstream.
	ts.Fail()
	call := post(t, base+"/fail", modernHeaders(modernVersion, "tools/call", "billing__echo"),
		rpcBody(t, 2, "tools/call", map[string]any{"name": "billing__echo", "arguments": map[string]any{}, "_meta": meta(modernVersion)}))
	cx := readRPC(t, call, 2)
	if cx.Status != http.StatusBadGateway || cx.Resp == nil || cx.Resp.Error == nil || !strings.Contains(cx.Resp.Error.Message, `"billing"`) {
		t.Fatalf("a call to a server whose exchange fails: %s", cx)
	}
	for _, leak := range []string{"secret-detail", ts.URL, "Bearer", "token_endpoint"} {
		if strings.Contains(cx.Resp.Error.Message, leak) {
			t.Errorf("the client's error names %q: %q", leak, cx.Resp.Error.Message)
		}
	}
	if got := recM.authorizations("/mcp/fail"); len(got) != 0 {
		t.Errorf("the upstream of a failed exchange received %d requests", len(got))
	}
	for _, secret := range []string{"alice-token", "bob-token", "exchanged:", "static-credential", "gateway-secret"} {
		if strings.Contains(g.Log(), secret) {
			t.Errorf("the gateway's log holds %q", secret)
		}
	}
}

// listToolsAs asks url for tools/list as a client of era would (a legacy
// client initializes first), with hdr.
func listToolsAs(t *testing.T, url, era string, hdr map[string]string) error {
	t.Helper()
	if era == "modern" {
		x := readRPC(t, post(t, url, mergeHeaders(modernHeaders(modernVersion, "tools/list", ""), hdr),
			rpcBody(t, 1, "tools/list", map[string]any{"_meta": meta(modernVersion)})), 1)
		if x.Status != http.StatusOK || x.Resp == nil || x.Resp.Error != nil {
			return fmt.Errorf("tools/list: %s", x)
		}
		return nil
	}
	resp := post(t, url, hdr, legacyInit)
	sid := resp.Header.Get("Mcp-Session-Id")
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || sid == "" {
		return fmt.Errorf("initialize: HTTP %d", resp.StatusCode)
	}
	h := mergeHeaders(legacyHeaders(sid), hdr)
	post(t, url, h, `{"jsonrpc":"2.0","method":"notifications/initialized"}`).Body.Close()
	x := readRPC(t, post(t, url, h, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`), 2)
	if x.Status != http.StatusOK || x.Resp == nil || x.Resp.Error != nil {
		return fmt.Errorf("tools/list: %s", x)
	}
	return nil
}

func mergeHeaders(a, b map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

// TestUpstreamAuthWithAuth: behind the gateway's own `auth` (tokens of a
// real authorization server, oauth2-mock-server), the client's token reaches
// no MCP server by default, in any cell; a server set to `exchange` gets a
// token exchanged for the validated one; one set to `passthrough` gets the
// client's, and the gateway logs once that this is unsafe.
func TestUpstreamAuthWithAuth(t *testing.T) {
	t.Parallel()
	a := startAuthServer(t)
	recL := newAuthRecorder(t, startGoEverything(t, false))
	recM := newAuthRecorder(t, startGoEverything(t, true))
	ts := support.ServeTokenExchange(t, "gateway", "gateway-secret")
	server := func(name, url, era, auth string) string {
		return fmt.Sprintf("\t\tserver %s {\n\t\t\tupstream %s/%s {\n\t\t\t\tera %s\n\t\t\t}\n\t\t\t%s\n\t\t}\n", name, url, name, era, auth)
	}
	g := startAuthGateway(t, a, server("old", recL.url, "legacy", "")+server("new", recM.url, "modern", "")+
		server("ex", recM.url, "modern", "upstream_auth exchange {\n\t\t\t\ttoken_endpoint "+ts.URL+
			"\n\t\t\t\tclient_id gateway\n\t\t\t\tclient_secret gateway-secret\n\t\t\t\taudience ex-server\n\t\t\t}")+
		server("pt", recM.url, "modern", "upstream_auth passthrough"))
	tok := a.mint(t, map[string]any{"sub": "alice", "aud": g.URL, "scope": "mcp"}, nil, 600)
	hdr := map[string]string{"Authorization": "Bearer " + tok}
	for i := range 2 {
		for _, era := range []string{"modern", "legacy"} { // merged listings: every server, every cell
			if err := listToolsAs(t, g.URL, era, hdr); err != nil {
				t.Fatalf("%s listing %d: %v", era, i, err)
			}
		}
	}
	for path, want := range map[string]string{
		"/mcp/old": "", "/mcp/new": "", "/mcp/ex": "Bearer exchanged:ex-server:" + tok, "/mcp/pt": "Bearer " + tok,
	} {
		rec := recM
		if path == "/mcp/old" {
			rec = recL
		}
		got := rec.authorizations(path)
		if len(got) == 0 {
			t.Fatalf("%s received nothing", path)
		}
		for _, v := range got {
			if v != want {
				t.Fatalf("%s received Authorization %q, want %q", path, v, want)
			}
		}
	}
	if n := ts.Count("ex-server", tok); n != 1 {
		t.Errorf("%d exchanges for one principal and server, want 1", n)
	}
	if n := strings.Count(g.Log(), "upstream_auth passthrough with auth"); n != 1 {
		t.Errorf("the unsafe passthrough was logged %d times, want once", n)
	}
	if strings.Contains(g.Log(), tok[len(tok)-20:]) {
		t.Error("the gateway's log holds the client's token")
	}
}
