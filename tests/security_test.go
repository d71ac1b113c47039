package tests

// The security model (docs/security.md): each claim that no other
// test covers. Every refusal is checked to reach nothing upstream.

import (
	"crypto/rand"
	"encoding/base64"
	"io"
	"net/http"
	"strings"
	"testing"
)

// untouched fails the test if the upstream received a request while fn ran.
func (f *failingLegacy) untouched(t *testing.T, what string, fn func()) {
	t.Helper()
	before := f.requests.Load()
	fn()
	if after := f.requests.Load(); after != before {
		t.Errorf("%s: the upstream received %d requests", what, after-before)
	}
}

// initAs initializes a pinned legacy session with the given headers.
func initAs(t *testing.T, url string, hdr map[string]string) string {
	t.Helper()
	resp := post(t, url, hdr, legacyInit)
	_, _ = io.Copy(io.Discard, resp.Body)
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || sid == "" {
		t.Fatalf("initialize: HTTP %d, session %q", resp.StatusCode, sid)
	}
	return sid
}

// TestSecuritySessionIDs: a pinned session id serves only the principal
// that opened it; another principal's, a guessed one or a random one of
// the right shape is an unknown session (404, -32001) and reaches nothing
// upstream.
func TestSecuritySessionIDs(t *testing.T) {
	t.Parallel()
	up := newFailingLegacy(t)
	g := startGateway(t, up.block())
	alice := map[string]string{"Authorization": "Bearer alice"}
	sid := initAs(t, g.URL, alice)
	list := `{"jsonrpc":"2.0","id":7,"method":"tools/list"}`
	as := func(sid string, auth map[string]string) map[string]string {
		h := legacyHeaders(sid)
		for k, v := range auth {
			h[k] = v
		}
		return h
	}
	if r := post(t, g.URL, as(sid, alice), list); r.StatusCode != http.StatusOK {
		t.Fatalf("alice's own session: HTTP %d", r.StatusCode)
	}
	notFound := func(t *testing.T, r *http.Response) {
		t.Helper()
		if code, _ := rpcErrorOf(t, r); r.StatusCode != http.StatusNotFound || code != -32001 {
			t.Fatalf("HTTP %d code %d, want 404 and -32001", r.StatusCode, code)
		}
	}
	random := func(n int) string {
		b := make([]byte, n)
		_, _ = rand.Read(b)
		return base64.RawURLEncoding.EncodeToString(b)
	}
	for name, c := range map[string]struct {
		sid  string
		auth map[string]string
	}{
		"another principal":    {sid, map[string]string{"Authorization": "Bearer mallory"}},
		"no principal":         {sid, nil},
		"random, token-shaped": {random(len(sid) * 3 / 4), alice},
		"random, short":        {random(16), alice},
		"alice's id, altered":  {sid[:len(sid)-2] + "AA", alice},
	} {
		t.Run(name, func(t *testing.T) {
			up.untouched(t, name, func() {
				notFound(t, post(t, g.URL, as(c.sid, c.auth), list))
				notFound(t, send(t, http.MethodGet, g.URL, as(c.sid, c.auth), ""))
				notFound(t, send(t, http.MethodDelete, g.URL, as(c.sid, c.auth), ""))
			})
		})
	}
}

// TestSecurityRequestStatePrincipal: a requestState minted for an
// anonymous caller does not open for an authenticated one (and the other
// way round, see TestForwardRejections); a requestState for another tool
// of the same principal is refused.
func TestSecurityRequestStatePrincipal(t *testing.T) {
	t.Parallel()
	up := newFailingLegacy(t)
	g := startGateway(t, up.block())
	ir := parseInputRequired(t, readRPC(t, modernCall(t, g.URL, 1, "ask", map[string]any{}, nil), 1))
	retry := map[string]any{"inputResponses": map[string]any{"elicitation-1": acceptAnswer}, "requestState": ir.RequestState}
	up.untouched(t, "a retry of another principal", func() {
		hdr := modernHeaders(modernVersion, "tools/call", "ask")
		hdr["Authorization"] = "Bearer someone"
		m := meta(modernVersion)
		m["io.modelcontextprotocol/clientCapabilities"] = map[string]any{"elicitation": map[string]any{}}
		body := rpcBody(t, 2, "tools/call", map[string]any{"name": "ask", "arguments": map[string]any{}, "_meta": m,
			"inputResponses": retry["inputResponses"], "requestState": ir.RequestState})
		checkRPCError(t, postRPC(t, g.URL, hdr, body, 2), http.StatusBadRequest, -32602, 2)
	})
	up.untouched(t, "the state presented for another tool", func() {
		checkRPCError(t, readRPC(t, modernCall(t, g.URL, 3, "hold", map[string]any{}, retry), 3), http.StatusBadRequest, -32602, 3)
	})
	if text := checkToolResult(t, readRPC(t, modernCall(t, g.URL, 4, "ask", map[string]any{}, retry), 4), 4); text != "answer: yes" {
		t.Fatalf("the rightful retry: %q", text)
	}
}

// TestSecurityHeaderBodyMismatch: in front of a legacy server, a modern
// request whose Mcp-Method or Mcp-Name does not mirror its body is refused
// (400, -32020) before anything reaches the upstream, so a router that
// trusts the headers cannot be steered to another tool than the one run.
func TestSecurityHeaderBodyMismatch(t *testing.T) {
	t.Parallel()
	up := newFailingLegacy(t)
	g := startGateway(t, up.block())
	m := meta(modernVersion)
	body := rpcBody(t, 1, "tools/call", map[string]any{"name": "ask", "arguments": map[string]any{}, "_meta": m})
	for name, hdr := range map[string]map[string]string{
		"Mcp-Name names another tool":     modernHeaders(modernVersion, "tools/call", "hold"),
		"Mcp-Method names another method": modernHeaders(modernVersion, "tools/list", "ask"),
		"Mcp-Name differs in case":        modernHeaders(modernVersion, "tools/call", "ASK"),
	} {
		t.Run(name, func(t *testing.T) {
			up.untouched(t, name, func() {
				checkRPCError(t, postRPC(t, g.URL, hdr, body, 1), http.StatusBadRequest, -32020, 1)
			})
		})
	}
}

// TestSecurityBodyLimit: max_request_body holds on every path that takes a
// body: modern requests (pass-through and bridge), legacy initialize,
// requests and answers of pinned and gateway-held sessions.
func TestSecurityBodyLimit(t *testing.T) {
	t.Parallel()
	big := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ask","arguments":{"pad":"` + strings.Repeat("x", 2048) + `"}}}`
	bigAnswer := `{"jsonrpc":"2.0","id":"gw:0000000000000000:1","result":{"action":"accept","content":{"pad":"` + strings.Repeat("x", 2048) + `"}}}`
	tooLarge := func(t *testing.T, r *http.Response) {
		t.Helper()
		if code, _ := rpcErrorOf(t, r); r.StatusCode != http.StatusRequestEntityTooLarge || code != -32600 {
			t.Fatalf("HTTP %d code %d, want 413 and -32600", r.StatusCode, code)
		}
	}
	t.Run("legacy upstream", func(t *testing.T) {
		up := newFailingLegacy(t)
		g := startGateway(t, up.block()+"\n\t\tmax_request_body 1KiB")
		sid := openLegacySession(t, g.URL)
		up.untouched(t, "oversized bodies", func() {
			tooLarge(t, post(t, g.URL, modernHeaders(modernVersion, "tools/call", "ask"), big))
			tooLarge(t, post(t, g.URL, nil, strings.Replace(legacyInit, `"clientInfo"`, `"pad":"`+strings.Repeat("x", 2048)+`","clientInfo"`, 1)))
			tooLarge(t, post(t, g.URL, legacyHeaders(sid), big))
			tooLarge(t, post(t, g.URL, legacyHeaders(sid), bigAnswer))
		})
	})
	t.Run("modern upstream", func(t *testing.T) {
		up := newModernUpstream(t)
		g := startGateway(t, up.block()+"\n\t\tmax_request_body 1KiB")
		sid, _ := initReverse(t, g.URL, "2025-11-25", `{"elicitation":{}}`, nil)
		tooLarge(t, post(t, g.URL, modernHeaders(modernVersion, "tools/call", "ask"), big))
		tooLarge(t, post(t, g.URL, legacyHeaders(sid), big))
		tooLarge(t, post(t, g.URL, legacyHeaders(sid), bigAnswer))
	})
}

// TestSecurityLogs: at debug level, through rounds, refusals, sessions of
// both kinds and an upstream failure, the gateway's log never carries the
// credential, a requestState, a session id or a request's arguments.
func TestSecurityLogs(t *testing.T) {
	t.Parallel()
	up := newFailingLegacy(t)
	modern := newModernUpstream(t)
	g := startGatewayWith(t, "\tdebug", "", up.block())
	gm := startGatewayWith(t, "\tdebug", "", modern.block())
	const token, secretArg = "Bearer tok-3f9a1c", "arg-77c2e0"
	auth := map[string]string{"Authorization": token}
	var secrets []string

	// A forward round with a secret argument, a refused tampered retry, the
	// completed retry.
	hdr := modernHeaders(modernVersion, "tools/call", "ask")
	hdr["Authorization"] = token
	m := meta(modernVersion)
	m["io.modelcontextprotocol/clientCapabilities"] = map[string]any{"elicitation": map[string]any{}}
	call := func(id int, extra map[string]any) rpcExchange {
		params := map[string]any{"name": "ask", "arguments": map[string]any{}, "_meta": m, "secret": secretArg}
		for k, v := range extra {
			params[k] = v
		}
		return postRPC(t, g.URL, hdr, rpcBody(t, id, "tools/call", params), id)
	}
	ir := parseInputRequired(t, call(1, nil))
	secrets = append(secrets, ir.RequestState)
	call(2, map[string]any{"requestState": ir.RequestState + "x", "inputResponses": map[string]any{"elicitation-1": acceptAnswer}})
	checkToolResult(t, call(3, map[string]any{"requestState": ir.RequestState, "inputResponses": map[string]any{"elicitation-1": acceptAnswer}}), 3)

	// A pinned session, and a request with a forged id.
	sid := initAs(t, g.URL, auth)
	secrets = append(secrets, sid)
	h := legacyHeaders(sid)
	h["Authorization"] = token
	post(t, g.URL, h, `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"ask","arguments":{"secret":"`+secretArg+`"}}}`).Body.Close()
	post(t, g.URL, legacyHeaders(sid+"x"), `{"jsonrpc":"2.0","id":5,"method":"tools/list"}`)

	// A gateway-held session and a round on it.
	rsid, _ := initReverse(t, gm.URL, "2025-11-25", `{"elicitation":{}}`, auth)
	secrets = append(secrets, rsid)
	rh := legacyHeaders(rsid)
	rh["Authorization"] = token
	resp := post(t, gm.URL, rh, `{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"confirm","arguments":{}}}`)
	q := readInline(t, readSSE(resp.Body))
	post(t, gm.URL, rh, `{"jsonrpc":"2.0","id":"`+q.ID+`","result":{"action":"accept","content":{"answer":"`+secretArg+`"}}}`)

	// Upstream failures, which are logged.
	up.kill()
	modern.kill()
	call(7, nil)
	post(t, gm.URL, rh, `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"confirm","arguments":{"secret":"`+secretArg+`"}}}`).Body.Close()

	logs := g.Log() + gm.Log()
	if !strings.Contains(logs, `"level":"debug"`) {
		t.Fatal("no debug output: is the debug option on?")
	}
	for _, s := range append(secrets, strings.TrimPrefix(token, "Bearer "), secretArg) {
		if strings.Contains(logs, s) {
			t.Errorf("the log carries %q", s)
		}
	}
}

// TestSecurityKeyRotation: putting a new state_key first (reload) keeps
// the sessions and parked calls sealed under the old one; dropping the old
// key ends its sessions (404).
func TestSecurityKeyRotation(t *testing.T) {
	t.Parallel()
	up := newFailingLegacy(t)
	g := startGateway(t, up.block()+"\n\t\tstate_key "+testKey(1))
	sid := openLegacySession(t, g.URL)
	ir := parseInputRequired(t, readRPC(t, modernCall(t, g.URL, 1, "ask", map[string]any{}, nil), 1))
	list := `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`

	g.reload(t, up.block()+"\n\t\tstate_key "+testKey(2)+" "+testKey(1))
	if r := post(t, g.URL, legacyHeaders(sid), list); r.StatusCode != http.StatusOK {
		t.Fatalf("a session sealed under the old key, after rotation: HTTP %d", r.StatusCode)
	}
	retry := map[string]any{"inputResponses": map[string]any{"elicitation-1": acceptAnswer}, "requestState": ir.RequestState}
	if text := checkToolResult(t, readRPC(t, modernCall(t, g.URL, 3, "ask", map[string]any{}, retry), 3), 3); text != "answer: yes" {
		t.Fatalf("a call parked under the old key, after rotation: %q", text)
	}
	fresh := openLegacySession(t, g.URL) // sealed under the new key

	g.reload(t, up.block()+"\n\t\tstate_key "+testKey(2))
	up.untouched(t, "a session sealed under a dropped key", func() {
		if r := post(t, g.URL, legacyHeaders(sid), list); r.StatusCode != http.StatusNotFound {
			t.Fatalf("a session sealed under a dropped key: HTTP %d, want 404", r.StatusCode)
		}
	})
	if r := post(t, g.URL, legacyHeaders(fresh), list); r.StatusCode != http.StatusOK {
		t.Fatalf("a session sealed under the new key: HTTP %d", r.StatusCode)
	}
}

// TestSecurityRebindingEveryMethod: the Host and Origin checks come first
// on GET and DELETE of a session too, before anything reaches the upstream.
func TestSecurityRebindingEveryMethod(t *testing.T) {
	t.Parallel()
	up := newFailingLegacy(t)
	g := startGateway(t, up.block())
	sid := openLegacySession(t, g.URL)
	for _, method := range []string{http.MethodGet, http.MethodDelete, http.MethodPost} {
		for name, hdr := range map[string]map[string]string{
			"Host":   {"Host": "evil.example.com"},
			"Origin": {"Origin": "http://evil.example.com"},
		} {
			t.Run(method+" "+name, func(t *testing.T) {
				h := legacyHeaders(sid)
				for k, v := range hdr {
					h[k] = v
				}
				body := ""
				if method == http.MethodPost {
					body = `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
				}
				up.untouched(t, method, func() {
					r := send(t, method, g.URL, h, body)
					if code, _ := rpcErrorOf(t, r); r.StatusCode != http.StatusForbidden || code != -32600 {
						t.Fatalf("HTTP %d code %d, want 403 and -32600", r.StatusCode, code)
					}
				})
			})
		}
	}
}
