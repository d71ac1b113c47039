package tests

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"strings"
	"testing"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/tests/support"
)

// TestTracesLegacyClientFederated: a legacy client (raw HTTP, with a bearer
// token) of a federated block, with Caddy's tracing directive on, calls a
// tool of the block's legacy server that asks in-line (the demo's
// book_table, answered on its own POST) and a tool of its modern server.
// Each call is one trace: the span of the client's request, in the
// reverse bridge's cell; under it the span of the bridge's POST to the
// block's merged endpoint, and under that the span of the in-process
// request it is, naming the server it reached; under that the exchanges
// with that server. No span carries the client's token or
// any payload (the arguments, the elicited answer, the tools' results).
func TestTracesLegacyClientFederated(t *testing.T) {
	t.Parallel()
	rec := support.NewTraceReceiver(t)
	block := `		server go {
			upstream ` + startGoEverything(t, true) + ` {
				era modern
			}
		}
		server demo {
			upstream ` + startDemoServer(t) + `
			prefix ""
		}
`
	g := startTraced(t, freePort(t), block, rec)

	const token = "Bearer traces-secret-token"
	auth := map[string]string{"Authorization": token}
	sid, _ := initReverse(t, g.URL, "2025-11-25", `{"elicitation":{}}`, auth)
	hdr := legacyHeaders(sid)
	maps.Copy(hdr, auth)

	// The legacy server's tool, its question answered on a POST of its own.
	const restaurant, answered = "Chez Payload", "Answered Payload"
	resp := post(t, g.URL, hdr, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"book_table","arguments":{"restaurant":"`+restaurant+`"}}}`)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("tools/call book_table: HTTP %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	events := readSSE(resp.Body)
	for asked := 0; ; asked++ {
		ev := nextData(t, events)
		var q inlineRequest
		if err := json.Unmarshal([]byte(ev.data), &q); err != nil || q.Method == "" {
			if !strings.Contains(ev.data, `"id":7`) || !strings.Contains(ev.data, "Booked") {
				t.Fatalf("book_table's answer: %s", ev.data)
			}
			break
		}
		if q.Method != "elicitation/create" || asked > 3 {
			t.Fatalf("book_table asked %s %s", q.Method, q.Params)
		}
		content := fmt.Sprintf(`{"action":"accept","content":{"partySize":2,"date":%q,"name":%q}}`, fedAnswers["date"], answered)
		if r := post(t, g.URL, hdr, fmt.Sprintf(`{"jsonrpc":"2.0","id":%q,"result":%s}`, q.ID, content)); r.StatusCode != http.StatusAccepted {
			t.Fatalf("answering %s: status %d", q.ID, r.StatusCode)
		}
	}
	// The modern server's tool.
	x := readRPC(t, post(t, g.URL, hdr, `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"go__test_simple_text","arguments":{}}}`), 8)
	if x.Resp == nil || x.Resp.Error != nil {
		t.Fatalf("tools/call go__test_simple_text: %s", x)
	}

	ours := func(s support.Span) bool { return s.Scope == gatewayScope }
	for _, c := range []struct{ tool, server string }{{"book_table", "demo"}, {"go__test_simple_text", "go"}} {
		outer := waitSpan(t, rec, "of the client's call of "+c.tool, func(s support.Span) bool {
			return ours(s) && s.Kind == "SPAN_KIND_SERVER" && s.Name == "tools/call "+c.tool && s.Attrs["mcp_gateway.cell"] == "legacy-modern"
		})
		merged := waitSpan(t, rec, "of the in-process request of "+c.tool, func(s support.Span) bool {
			if !ours(s) || s.Name != "tools/call "+c.tool {
				return false
			}
			bridged, ok := findSpan(rec, func(p support.Span) bool { return p.SpanID == s.ParentSpanID })
			return ok && ours(bridged) && bridged.Kind == "SPAN_KIND_CLIENT" && bridged.Name == "tools/call" && bridged.ParentSpanID == outer.SpanID
		})
		checkAttrs(t, "in-process "+c.tool, merged, map[string]string{"mcp_gateway.server": c.server, "gen_ai.tool.name": c.tool})
		waitSpan(t, rec, "of "+c.server+"'s tools/call upstream", func(s support.Span) bool {
			return ours(s) && s.Kind == "SPAN_KIND_CLIENT" && s.ParentSpanID == merged.SpanID && s.TraceID == outer.TraceID
		})
	}
	noSecrets(t, rec, "traces-secret-token", restaurant, answered, "Booked")
}
