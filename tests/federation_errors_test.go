package tests

import (
	"encoding/json"
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
