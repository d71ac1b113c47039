package forward

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/tidwall/gjson"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
)

// getCounting serves server (go-sdk, sessionful) and counts the GET
// requests it gets.
func getCounting(t *testing.T, server *mcp.Server) (string, *atomic.Int32, func()) {
	t.Helper()
	var gets atomic.Int32
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			gets.Add(1)
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close) // after the bridge's cleanup, which ends its sessions
	return ts.URL, &gets, ts.Close
}

// callAsk runs a call of tool (one argument rounds, one elicitation per
// round) through b as principal to its result, answering every round, and
// returns the result's text.
func callAsk(t *testing.T, b *Bridge, upstream, tool, principal string, mode translate.GetStream, rounds int) string {
	t.Helper()
	req := func(id int, extra string) Request {
		r := askRequest(t, upstream, id, rounds, extra)
		r.GetStream, r.Principal, r.Name = mode, translate.PrincipalHash(principal), tool
		r.Raw = []byte(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":{"rounds":%d}%s,`+
			`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}}}`, id, tool, rounds, extra))
		return r
	}
	a := serve(b, req(1, ""))
	for round := 1; round <= rounds; round++ {
		keys := inputKeys(t, a)
		extra := fmt.Sprintf(`,"inputResponses":{%q:{"action":"accept","content":{"a":"x%d"}}},"requestState":%q`,
			keys[0], round, gjson.GetBytes(a.final, "result.requestState").String())
		a = serve(b, req(1+round, extra))
	}
	return gjson.GetBytes(a.final, "result.content.0.text").String()
}

// askOnGetServer is askServer with a second tool, askGet, that asks its
// questions outside its request (a go-sdk context without the request's
// id), so that they go on the session's standalone GET stream, as a
// TypeScript server's server.elicitInput without a related request does.
// A fixture: the servers in the test suite's peers tie their questions to
// the call.
func askOnGetServer() *mcp.Server {
	server := askServer()
	mcp.AddTool(server, &mcp.Tool{Name: "askGet", Description: "Asks n times, on the GET stream."},
		func(ctx context.Context, req *mcp.CallToolRequest, in struct {
			Rounds int `json:"rounds"`
		}) (*mcp.CallToolResult, any, error) {
			// A ping on the call's stream first: the go-sdk server sends
			// a call's response headers with its first message only.
			if err := req.Session.Ping(ctx, nil); err != nil {
				return nil, nil, err
			}
			out := ""
			for i := range in.Rounds {
				unrelated, cancel := context.WithCancel(context.Background())
				stop := context.AfterFunc(ctx, cancel)
				res, err := req.Session.Elicit(unrelated, &mcp.ElicitParams{
					Message:         fmt.Sprintf("question %d", i+1),
					RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"a": map[string]any{"type": "string"}}},
				})
				stop()
				cancel()
				if err != nil {
					return nil, nil, err
				}
				out += res.Action + ":" + fmt.Sprint(res.Content["a"])
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: out}}}, nil, nil
		})
	return server
}

// TestBridgeGetStream: with get_stream on, the sessions the bridge leases
// open their standalone GET stream; with off, none does, and a call that
// asks on its own stream (as the go-sdk server does) still completes its
// rounds; with learn (the default), a call of a target not seen asking
// opens one, one of a target that asked on its own stream does not, and one
// of a target that asked on the GET stream does, for good.
func TestBridgeGetStream(t *testing.T) {
	for _, tc := range []struct {
		name string
		mode translate.GetStream
		tool string
		// gets: GET requests upstream after a first principal's call and
		// then a second principal's (a session each).
		gets int32
	}{
		{"on", translate.GetStreamOn, "ask", 2},
		{"off", translate.GetStreamOff, "ask", 0},
		{"learn, asks on its stream", translate.GetStreamLearn, "ask", 1},
		{"learn, asks on the GET stream", translate.GetStreamLearn, "askGet", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url, gets, stop := getCounting(t, askOnGetServer())
			b := newTestBridge(t, time.Minute)
			for i, principal := range []string{"p1", "p2"} {
				if got, want := callAsk(t, b, url, tc.tool, principal, tc.mode, 2), "accept:x1"; got[:len(want)] != want {
					t.Fatalf("call %d: result %q", i+1, got)
				}
			}
			// A session's GET goes out beside its call, which waits for it
			// only so long: on a busy machine the call can end first. Wait
			// for the GETs expected, then, once the bridge has ended its
			// sessions and the server has answered every request it got,
			// nothing more can come: count.
			deadline := time.Now().Add(10 * time.Second)
			for gets.Load() < tc.gets && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			b.Close()
			b.pool.Close()
			stop()
			if n := gets.Load(); n != tc.gets {
				t.Fatalf("%d GET requests upstream, want %d", n, tc.gets)
			}
		})
	}
}
