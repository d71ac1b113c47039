package tests

import (
	"encoding/json"
	"net/http"
	"testing"
)

// TestFederationResourceNotFound reads a URI that no server of a block
// lists nor matches: the block answers as a 2026-07-28 server does
// (SEP-2164), -32602 in-band with the URI in error.data.uri, an object (the
// conformance suite's sep-2164-data-uri check).
func TestFederationResourceNotFound(t *testing.T) {
	t.Parallel()
	g := startGateway(t, "\t\tserver go {\n\t\t\tupstream "+startGoEverything(t, true)+" {\n\t\t\t\tera modern\n\t\t\t}\n\t\t}")
	const uri = "test://nonexistent-resource"
	x := postRPC(t, g.URL, modernHeaders(modernVersion, "resources/read", uri),
		rpcBody(t, 1, "resources/read", map[string]any{"uri": uri, "_meta": meta(modernVersion)}), 1)
	if x.Status != http.StatusOK || x.Resp == nil || x.Resp.Error == nil || x.Resp.Error.Code != -32602 {
		t.Fatalf("want -32602 in-band, got %v", x)
	}
	var data struct {
		URI string `json:"uri"`
	}
	if err := json.Unmarshal(x.Resp.Error.Data, &data); err != nil || data.URI != uri {
		t.Errorf("error.data = %s (%v), want {\"uri\":%q}", x.Resp.Error.Data, err, uri)
	}
}
