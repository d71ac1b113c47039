package tests

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
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
