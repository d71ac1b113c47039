package reverse

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/seal"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/tidwall/gjson"
)

// TestReverseMaxInputsPerRound: a modern server asking more inputs in one
// round than MaxInputsPerRound gets the legacy client an isError result,
// and nothing is asked in-line.
func TestReverseMaxInputsPerRound(t *testing.T) {
	server := mcp.NewServer(&mcp.Implementation{Name: "reverse-test", Version: "1"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "rounds", Description: "Asks three questions at once."},
		func(context.Context, *mcp.CallToolRequest, struct {
			N int `json:"n"`
		}) (*mcp.CallToolResult, any, error) {
			reqs := mcp.InputRequestMap{}
			for i := range 3 {
				reqs[fmt.Sprint("q", i)] = &mcp.ElicitParams{Message: "?", RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{}}}
			}
			return &mcp.CallToolResult{InputRequests: reqs}, nil, nil
		})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server },
		&mcp.StreamableHTTPOptions{Stateless: true}))
	t.Cleanup(srv.Close)
	kr, err := seal.NewKeyring(seal.NewRandomKey())
	if err != nil {
		t.Fatal(err)
	}
	rv := New(http.DefaultClient, reverseOptions(func(o *Options) {
		o.Keyring, o.Instance, o.MaxInputsPerRound = kr, "0123456789abcdef", 2
	}))
	s := openSession(t, rv, srv.URL, "p", `{"elicitation":{}}`)
	sink := newRecordingSink()
	rv.Serve(context.Background(), s, callRequest(t, 1, 0), sink)
	f := wantFinal(t, sink)
	res := gjson.GetBytes(f.msg, "result")
	if !res.Get("isError").Bool() || !strings.Contains(res.Get("content.0.text").String(), "max_inputs_per_round") {
		t.Fatalf("final %s, want an isError result naming max_inputs_per_round", f.msg)
	}
	if len(sink.notes) != 0 || rv.Waiting() != 0 {
		t.Fatalf("%d in-line requests sent, %d waiting", len(sink.notes), rv.Waiting())
	}
}
