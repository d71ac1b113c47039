package forward

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestBridgeClientLeaves: a client that leaves mid-call cancels the
// upstream call.
func TestBridgeClientLeaves(t *testing.T) {
	ended := make(chan string, 1)
	server := mcp.NewServer(&mcp.Implementation{Name: "slow", Version: "1"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "ask", Description: "slow"},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ struct {
			Rounds int `json:"rounds"`
		}) (*mcp.CallToolResult, any, error) {
			select {
			case <-ctx.Done():
				ended <- "cancelled"
				return nil, nil, ctx.Err()
			case <-time.After(3 * time.Second):
				ended <- "done"
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "slept"}}}, nil, nil
			}
		})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil))
	t.Cleanup(ts.Close)
	b := newTestBridge(t, time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	a := &recordedAnswer{}
	start := time.Now()
	b.Serve(ctx, askRequest(t, ts.URL, 1, 0, ""), a)
	if time.Since(start) > 2*time.Second {
		t.Fatalf("Serve returned after %v, long after the client left", time.Since(start))
	}
	select {
	case got := <-ended:
		if got != "cancelled" {
			t.Fatalf("tool %s, want cancelled", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("tool never ended")
	}
}
