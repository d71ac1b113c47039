package tests

// What a legacy upstream's tools/list says of a tool's
// execution.taskSupport is learned for the principal it was listed for
// only. An upstream may list its tools differently to each caller; one
// tenant's listing must not make another tenant's tool required.

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// perCallerTools is a legacy (2025-11-25) MCP server whose one tool,
// report, is listed to "Bearer alice" as a task tool (execution.taskSupport
// required) and to everyone else as a plain tool. It answers every POST
// with JSON, has no GET stream (405), and counts the tools/call it ran.
type perCallerTools struct {
	url   string
	calls atomic.Int32
}

func newPerCallerTools(t *testing.T) *perCallerTools {
	t.Helper()
	p := &perCallerTools{}
	ts := httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(ts.Close)
	p.url = ts.URL + "/mcp"
	return p
}

func (p *perCallerTools) serve(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodDelete:
		return
	case http.MethodPost:
	default:
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	if err := json.NewDecoder(r.Body).Decode(&msg); err != nil {
		http.Error(w, "bad JSON", http.StatusBadRequest)
		return
	}
	if msg.ID == nil {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	var result any
	switch msg.Method {
	case "initialize":
		w.Header().Set("Mcp-Session-Id", "s-"+strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
		result = map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{"tools": map[string]any{}},
			"serverInfo": map[string]any{"name": "per-caller", "version": "1"}}
	case "tools/list":
		tool := map[string]any{"name": "report", "inputSchema": map[string]any{"type": "object"}}
		if r.Header.Get("Authorization") == "Bearer alice" {
			tool["execution"] = map[string]any{"taskSupport": "required"}
		}
		result = map[string]any{"tools": []any{tool}}
	case "tools/call":
		p.calls.Add(1)
		result = map[string]any{"content": []any{map[string]any{"type": "text", "text": "report for " + r.Header.Get("Authorization")}}}
	default:
		result = nil
	}
	w.Header().Set("Content-Type", "application/json")
	out := map[string]any{"jsonrpc": "2.0", "id": msg.ID, "result": result}
	if result == nil {
		out = map[string]any{"jsonrpc": "2.0", "id": msg.ID, "error": map[string]any{"code": -32601, "message": "Method not found"}}
	}
	_ = json.NewEncoder(w).Encode(out)
}

// TestHardeningLearnedTaskSupportPerPrincipal: alice lists the tools and
// learns report is required; bob, to whom the upstream lists report as a
// plain tool, then calls it without the Tasks extension and gets its
// result, not -32021 (before the fix, alice's listing applied to everyone
// on the upstream). Alice's own call without the extension is still
// refused, before it reaches the upstream.
func TestHardeningLearnedTaskSupportPerPrincipal(t *testing.T) {
	t.Parallel()
	up := newPerCallerTools(t)
	g := startGateway(t, "\t\tupstream "+up.url+" {\n\t\t\tera legacy\n\t\t\tget_stream off\n\t\t}")
	alice := &taskClient{t: t, auth: "Bearer alice"}
	bob := &taskClient{t: t, auth: "Bearer bob"}
	noTasks := map[string]any{"elicitation": map[string]any{}}

	if x := alice.send(g.URL, "tools/list", "", map[string]any{}, noTasks); x.Resp == nil || x.Resp.Error != nil ||
		!strings.Contains(string(x.Resp.Result), `"report"`) {
		t.Fatalf("alice's tools/list: %s", x)
	}
	x := bob.send(g.URL, "tools/call", "report", map[string]any{"name": "report", "arguments": map[string]any{}}, noTasks)
	if got := checkToolResult(t, x, bob.id); got != "report for Bearer bob" {
		t.Fatalf("bob's call of report (a plain tool to him) after alice listed it as required: %s", x)
	}
	before := up.calls.Load()
	x = alice.send(g.URL, "tools/call", "report", map[string]any{"name": "report", "arguments": map[string]any{}}, noTasks)
	wantRPCError(t, x, -32021, "alice's call of her required tool without the Tasks extension")
	if up.calls.Load() != before {
		t.Fatal("alice's refused call reached the upstream")
	}
}
