package tests

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// TestFederationResourceNotFound: a resource URI no server of a federated
// block has is answered as a 2026-07-28 server answers it: -32602
// "Resource not found" with the URI in error.data, an object.
func TestFederationResourceNotFound(t *testing.T) {
	t.Parallel()
	rs, mu := newRecordingServer(t), newModernUpstream(t)
	g := startGateway(t, "\t\tserver old {\n\t\t\tupstream "+rs.url+"\n\t\t}\n\t\tserver new {\n"+mu.block()+"\n\t\t}\n")
	const uri = "file:///nowhere"
	x := postRPC(t, g.URL, modernHeaders(modernVersion, "resources/read", uri),
		rpcBody(t, 1, "resources/read", map[string]any{"uri": uri, "_meta": meta(modernVersion)}), 1)
	if x.Resp == nil || x.Resp.Error == nil || x.Resp.Error.Code != -32602 || x.Resp.Error.Message != "Resource not found" {
		t.Fatalf("resources/read of %s = %s, want -32602 Resource not found", uri, x)
	}
	var data struct {
		URI string `json:"uri"`
	}
	if err := json.Unmarshal(x.Resp.Error.Data, &data); err != nil || data.URI != uri {
		t.Fatalf("error.data = %s (%v), want {\"uri\":%q}", x.Resp.Error.Data, err, uri)
	}
}

// TestFederationServerDownNamed: the first call to a server of a federated
// block whose only upstream refuses connections (configured modern, so
// that the call is passed through and fails over, finding no other) is
// answered 503 naming the server, never the upstream's address; the other
// server is still served.
func TestFederationServerDownNamed(t *testing.T) {
	t.Parallel()
	mu := newModernUpstream(t)
	port := freePort(t) // nothing listens there
	down := fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
	g := startGateway(t, "\t\tserver up {\n"+mu.block()+"\n\t\t}\n\t\tserver down {\n\t\t\tupstream "+down+" {\n\t\t\t\tera modern\n\t\t\t}\n\t\t}\n")
	call := func(id int, tool string) rpcExchange {
		return postRPC(t, g.URL, modernHeaders(modernVersion, "tools/call", tool),
			rpcBody(t, id, "tools/call", map[string]any{"name": tool, "arguments": map[string]any{}, "_meta": meta(modernVersion)}), id)
	}
	x := call(1, "down__anything")
	if x.Status != http.StatusServiceUnavailable || x.Resp == nil || x.Resp.Error == nil ||
		!strings.Contains(x.Resp.Error.Message, `MCP server "down" is not available`) || strings.Contains(x.Raw, fmt.Sprint(port)) {
		t.Fatalf("a call to the down server = %s, want 503 naming server down, not its address", x)
	}
	if x = call(2, "up__confirm"); x.Resp == nil || x.Resp.Error != nil || !strings.Contains(x.Raw, `"input_required"`) {
		t.Fatalf("a call to the server that is up = %s, want its input_required", x)
	}
}

// listingServer is a fixture written for these tests (no real peer lets a
// test choose its caching hints or make it fail on demand): a modern MCP
// endpoint answering tools/list with one tool, tool, and ttlMs 60000,
// cacheScope public — or, while failing is set, with a JSON-RPC error.
// Other methods get -32601.
func listingServer(t *testing.T, tool string, failing *atomic.Bool) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.ID == nil {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		switch {
		case req.Method != "tools/list":
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"Method not found"}}`, req.ID)
		case failing.Load():
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32603,"message":"not now"}}`, req.ID)
		default:
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"tools":[{"name":%q,"inputSchema":{"type":"object"}}],"resultType":"complete","ttlMs":60000,"cacheScope":"public"}}`, req.ID, tool)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/mcp"
}

// TestFederationPartialListNotKept: a merged page a server was left out of
// (it answered an error) is not kept for its ttlMs: once the server
// answers again, the next listing has its tools, not the page without
// them for the next minute.
func TestFederationPartialListNotKept(t *testing.T) {
	t.Parallel()
	var never, failing atomic.Bool
	failing.Store(true)
	a, b := listingServer(t, "alpha", &never), listingServer(t, "beta", &failing)
	modern := func(u string) string { return "\t\t\tupstream " + u + " {\n\t\t\t\tera modern\n\t\t\t}\n" }
	g := startGateway(t, "\t\tserver a {\n"+modern(a)+"\t\t}\n\t\tserver b {\n"+modern(b)+"\t\t}\n")
	list := func(id int) rpcExchange {
		return postRPC(t, g.URL, modernHeaders(modernVersion, "tools/list", ""), rpcBody(t, id, "tools/list", map[string]any{"_meta": meta(modernVersion)}), id)
	}
	if x := list(1); !strings.Contains(x.Raw, `"a__alpha"`) || strings.Contains(x.Raw, `"b__beta"`) {
		t.Fatalf("tools/list with server b failing = %s, want a's tool only", x)
	}
	failing.Store(false)
	if x := list(2); !strings.Contains(x.Raw, `"a__alpha"`) || !strings.Contains(x.Raw, `"b__beta"`) || !strings.Contains(x.Raw, `"ttlMs":60000`) {
		t.Fatalf("tools/list with server b back = %s, want both servers' tools (ttlMs 60000)", x)
	}
}
