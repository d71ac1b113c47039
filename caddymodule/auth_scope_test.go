package caddymodule

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/auth"
)

// TestAuthScopeCaddyfile: tool_scope and prompt_scope parse into their
// rules, and a malformed one is refused with the Caddyfile's line.
func TestAuthScopeCaddyfile(t *testing.T) {
	h := &Handler{}
	in := `mcp_gateway {
		upstream http://127.0.0.1:3001/mcp
		auth {
			issuer https://auth.example.com
			audience https://mcp.example.com/mcp
			require_scope mcp
			tool_scope deploy_* ops:deploy
			tool_scope *_admin admin
			prompt_scope secret* ops:read
			resource_scope file:///srv/keys/* keys
		}
	}`
	if err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser(in)); err != nil {
		t.Fatal(err)
	}
	a := h.Auth
	if len(a.ToolScope) != 2 || a.ToolScope[1] != (ScopeRule{Pattern: "*_admin", Scope: "admin"}) || len(a.PromptScope) != 1 ||
		len(a.ResourceScope) != 1 || a.ResourceScope[0] != (ScopeRule{Pattern: "file:///srv/keys/*", Scope: "keys"}) {
		t.Fatalf("auth = %+v", a)
	}
	if got := strings.Join(a.scopesSupported(), " "); got != "mcp ops:deploy admin ops:read keys" {
		t.Errorf("scopes_supported = %q", got)
	}
	for _, c := range []struct{ name, line, want string }{
		{"one argument", "tool_scope deploy_*", "tool_scope needs a pattern and a scope"},
		{"three", "prompt_scope a b c", "prompt_scope needs a pattern and a scope"},
		{"bad glob", "tool_scope [ ops", "syntax error in pattern"},
		{"bad scope", "tool_scope x `a b`", "no spaces, quotes or backslashes"},
		{"resource: one argument", "resource_scope file:///*", "resource_scope needs a pattern and a scope"},
		{"resource: a template's braces", "resource_scope users://{id} ops", "no '{' or '}'"},
		{"resource: bad glob", "resource_scope file:///[ ops", "syntax error in pattern"},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := "mcp_gateway {\n\tupstream http://127.0.0.1:3001/mcp\n\tauth {\nissuer https://a\naudience https://b\n" + c.line + "\n\t}\n}"
			err := (&Handler{}).UnmarshalCaddyfile(caddyfile.NewTestDispenser(in))
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "Testfile:") {
				t.Fatalf("err = %v, want %q with its line", err, c.want)
			}
		})
	}
}

// TestListFilter: a list answer loses what the token may not see, in a
// JSON answer (held whole, with its status) and in an SSE stream cut
// anywhere; a data line that is no whole message is dropped.
func TestListFilter(t *testing.T) {
	rules := auth.ScopeRules{{Kind: auth.Tools, Pattern: "deploy_*", Scope: "ops:deploy"}}
	const list = `{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"echo"},{"name":"deploy_web"}],"resultType":"complete","ttlMs":5000,"cacheScope":"public"}}`
	const want = `{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"echo"}],"resultType":"complete","ttlMs":5000,"cacheScope":"private"}}`
	newFilter := func() (*listFilter, *httptest.ResponseRecorder) {
		rec := httptest.NewRecorder()
		return &listFilter{ResponseWriter: rec, rules: rules, kinds: []auth.Kind{auth.Tools}, granted: []string{"mcp"}}, rec
	}

	w, rec := newFilter()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", "999")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte(list[:30]))
	_, _ = w.Write([]byte(list[30:] + "\n"))
	if rec.Body.Len() != 0 {
		t.Fatal("the JSON answer passed before it was whole")
	}
	w.finish()
	if rec.Body.String() != want || rec.Header().Get("Content-Length") != "" || rec.Code != 200 {
		t.Fatalf("JSON: %d %q %s", rec.Code, rec.Header().Get("Content-Length"), rec.Body)
	}

	w, rec = newFilter()
	w.Header().Set("Content-Type", "text/event-stream")
	stream := "id: p\ndata:\n\nevent: message\ndata: " + list + "\r\n\r\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\ndata: \"result\":{}}\n\ndata:   [" + list + "]\n\n"
	for i := 0; i < len(stream); i += 7 {
		_, _ = w.Write([]byte(stream[i:min(i+7, len(stream))]))
	}
	w.finish()
	if got := rec.Body.String(); got != "id: p\ndata:\n\nevent: message\ndata: "+want+"\r\n\r\n\ndata: ["+want+"]\n\n" {
		t.Fatalf("SSE: %q", got)
	}

	// Nothing written: the caller answers.
	w, rec = newFilter()
	w.finish()
	if rec.Body.Len() != 0 || rec.Code != 200 || rec.Result().Header.Get("Content-Type") != "" {
		t.Fatalf("nothing written: %d %s", rec.Code, rec.Body)
	}
}

// TestListFilterUpdates: with resource rules, an SSE stream (a GET
// stream, a subscription's) loses the updates of resources the token may
// not see, a batch only those entries; a JSON answer that is no list
// passes as written, its Content-Length kept.
func TestListFilterUpdates(t *testing.T) {
	rules := auth.ScopeRules{{Kind: auth.Resources, Pattern: "test://static-*", Scope: "ops"}}
	rec := httptest.NewRecorder()
	w := &listFilter{ResponseWriter: rec, rules: rules, updates: true, granted: []string{"mcp"}}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	const hidden = `{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"test://static-text"}}`
	const shown = `{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"test://watched-resource"}}`
	_, _ = w.Write([]byte("id: 1\nevent: message\ndata: " + hidden + "\n\nevent: message\ndata: " + shown + "\n\ndata: [" + hidden + "," + shown + "]\n\ndata: [" + hidden + "]\n\n"))
	w.Flush()
	w.finish()
	if got, want := rec.Body.String(), "id: 1\nevent: message\n\nevent: message\ndata: "+shown+"\n\ndata: ["+shown+"]\n\n\n"; got != want {
		t.Errorf("SSE:\n got %q\nwant %q", got, want)
	}

	rec = httptest.NewRecorder()
	w = &listFilter{ResponseWriter: rec, rules: rules, updates: true, granted: []string{"mcp"}}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", "2")
	w.WriteHeader(http.StatusAccepted)
	_, _ = w.Write([]byte("{}"))
	if rec.Code != http.StatusAccepted || rec.Body.String() != "{}" || rec.Header().Get("Content-Length") != "2" {
		t.Errorf("JSON passed: %d %q %s", rec.Code, rec.Header().Get("Content-Length"), rec.Body)
	}
	w.finish()
	if rec.Body.String() != "{}" {
		t.Errorf("JSON written again at finish: %s", rec.Body)
	}
}

// TestRefuseOutOfScope: a call out of scope is answered as an unknown
// tool's, in-band; in a batch, each request is answered and none sent.
func TestRefuseOutOfScope(t *testing.T) {
	h := &Handler{auth: &resourceServer{rules: auth.ScopeRules{{Kind: auth.Tools, Pattern: "deploy_*", Scope: "ops"}}}}
	serve := func(body string, scopes ...string) (bool, *httptest.ResponseRecorder) {
		rec := httptest.NewRecorder()
		r := withGranted(httptest.NewRequest("POST", "/mcp", nil), scopes)
		refused, err := h.refuseOutOfScope(rec, r, []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		return refused, rec
	}
	const call = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"deploy_web"}}`
	if refused, _ := serve(call, "mcp", "ops"); refused {
		t.Error("refused with the scope")
	}
	refused, rec := serve(call, "mcp")
	if !refused || rec.Code != 200 || rec.Body.String() != `{"jsonrpc":"2.0","id":7,"error":{"code":-32602,"message":"Unknown tool: deploy_web"}}` {
		t.Errorf("a call: %v %d %s", refused, rec.Code, rec.Body)
	}
	refused, rec = serve(`[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}},{"jsonrpc":"2.0","method":"notifications/x"},`+
		`{"jsonrpc":"2.0","id":"s1","result":{}},`+call+`]`, "mcp")
	want := `[{"jsonrpc":"2.0","id":1,"error":{"code":-32600,"message":"Invalid Request: this batch names a tool, prompt or resource the server does not have; none of its requests was sent"}},` +
		`{"jsonrpc":"2.0","id":7,"error":{"code":-32602,"message":"Unknown tool: deploy_web"}}]`
	if !refused || rec.Code != 200 || rec.Body.String() != want {
		t.Errorf("a batch: %v %d %s", refused, rec.Code, rec.Body)
	}
	// Not authenticated (no scopes known): refused.
	rec = httptest.NewRecorder()
	if refused, _ := h.refuseOutOfScope(rec, httptest.NewRequest("POST", "/mcp", nil), []byte(call)); !refused {
		t.Error("a request without granted scopes passed")
	}
}

// TestRefuseResourceOutOfScope: a resource out of scope is answered as
// one no server has, each era its code: -32602 to a modern request, -32002
// to a legacy one (a session's), the URI in data.uri, in-band.
func TestRefuseResourceOutOfScope(t *testing.T) {
	h := &Handler{auth: &resourceServer{rules: auth.ScopeRules{{Kind: auth.Resources, Pattern: "test://static-*", Scope: "ops"}}}}
	serve := func(hdr http.Header, body string) (bool, *httptest.ResponseRecorder) {
		rec := httptest.NewRecorder()
		r := httptest.NewRequest("POST", "/mcp", nil)
		r.Header = hdr
		refused, err := h.refuseOutOfScope(rec, withGranted(r, []string{"mcp"}), []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		return refused, rec
	}
	const modernRead = `{"jsonrpc":"2.0","id":3,"method":"resources/read","params":{"uri":"test://static-text","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`
	refused, rec := serve(http.Header{"Mcp-Method": {"resources/read"}, "Mcp-Name": {"test://static-text"}}, modernRead)
	if want := `{"jsonrpc":"2.0","id":3,"error":{"code":-32602,"message":"Resource not found","data":{"uri":"test://static-text"}}}`; !refused || rec.Code != 200 || rec.Body.String() != want {
		t.Errorf("a modern read: %v %d %s", refused, rec.Code, rec.Body)
	}
	legacy := http.Header{"Mcp-Session-Id": {"s"}, "Mcp-Protocol-Version": {"2025-11-25"}}
	refused, rec = serve(legacy, `{"jsonrpc":"2.0","id":4,"method":"resources/subscribe","params":{"uri":"test://static-binary"}}`)
	if want := `{"jsonrpc":"2.0","id":4,"error":{"code":-32002,"message":"Resource not found","data":{"uri":"test://static-binary"}}}`; !refused || rec.Code != 200 || rec.Body.String() != want {
		t.Errorf("a legacy subscribe: %v %d %s", refused, rec.Code, rec.Body)
	}
	if refused, _ := serve(legacy, `{"jsonrpc":"2.0","id":5,"method":"resources/read","params":{"uri":"test://template/1/data"}}`); refused {
		t.Error("a resource no rule names was refused")
	}
}

// BenchmarkListFilterUpdates: what resource rules cost an SSE answer that
// is no list: a 4 KiB tools/call result event read through the filter.
func BenchmarkListFilterUpdates(b *testing.B) {
	rules := auth.ScopeRules{{Kind: auth.Resources, Pattern: "test://static-*", Scope: "ops"}}
	event := []byte("event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"" + strings.Repeat("x", 4096) + "\"}]}}\n\n")
	rec := httptest.NewRecorder()
	b.SetBytes(int64(len(event)))
	b.ReportAllocs()
	for b.Loop() {
		rec.Body.Reset()
		w := &listFilter{ResponseWriter: rec, rules: rules, updates: true, granted: []string{"mcp"}, mode: 1}
		if _, err := w.Write(event); err != nil || rec.Body.Len() != len(event) {
			b.Fatal(err, rec.Body.Len())
		}
	}
}
