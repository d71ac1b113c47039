package forward

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
	"github.com/tidwall/gjson"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// recordedAnswer is what the bridge wrote for one request.
type recordedAnswer struct {
	mu            sync.Mutex
	status        int
	final         []byte
	notifications [][]byte
}

func (a *recordedAnswer) Notify(msg []byte) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.notifications = append(a.notifications, msg)
	return nil
}

func (a *recordedAnswer) Respond(status int, msg []byte) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.status, a.final = status, msg
	return nil
}

// legacyUpstream is a real legacy server (go-sdk, sessionful) whose tool
// `ask` elicits once per round for `rounds` rounds.
func legacyUpstream(t *testing.T) (string, *mcp.Server) {
	t.Helper()
	server := askServer()
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil))
	t.Cleanup(ts.Close)
	return ts.URL, server
}

// askServer is the go-sdk server of legacyUpstream.
func askServer() *mcp.Server {
	server := mcp.NewServer(&mcp.Implementation{Name: "bridge-test", Version: "1"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "ask", Description: "Asks n times."},
		func(ctx context.Context, req *mcp.CallToolRequest, in struct {
			Rounds int `json:"rounds"`
		}) (*mcp.CallToolResult, any, error) {
			var answers []string
			for i := range in.Rounds {
				res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{
					Message:         fmt.Sprintf("question %d", i+1),
					RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"a": map[string]any{"type": "string"}}},
				})
				if err != nil {
					return nil, nil, err
				}
				answers = append(answers, res.Action+":"+fmt.Sprint(res.Content["a"]))
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Join(answers, ",")}}}, nil, nil
		})
	return server
}

func newTestBridge(t *testing.T, ttl time.Duration) *Bridge {
	t.Helper()
	return limitedBridge(t, bridgeOptions(func(o *Options) { o.ParkTTL = ttl }))
}

// askRequest builds a validated tools/call ask request.
func askRequest(t *testing.T, upstream string, id, rounds int, extra string) Request {
	t.Helper()
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"ask","arguments":{"rounds":%d}%s,`+
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}}}`, id, rounds, extra)
	h := http.Header{"Mcp-Protocol-Version": {translate.ModernVersion}, "Mcp-Method": {"tools/call"}, "Mcp-Name": {"ask"}}
	req, rerr := translate.ValidateModern(http.MethodPost, h, []byte(body), nil)
	if rerr != nil {
		t.Fatalf("invalid test request: %v", rerr)
	}
	return Request{Target: translate.Target{Upstream: upstream}, Principal: translate.PrincipalHash("p"), ModernRequest: req}
}

func serve(b *Bridge, r Request) *recordedAnswer {
	a := &recordedAnswer{}
	b.Serve(context.Background(), r, a)
	return a
}

// TestBridgeRounds drives several concurrent calls of three rounds each
// through the bridge (run it with -race).
func TestBridgeRounds(t *testing.T) {
	upstream, _ := legacyUpstream(t)
	b := newTestBridge(t, time.Minute)
	var wg sync.WaitGroup
	for n := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := n * 100
			a := serve(b, askRequest(t, upstream, id, 3, ""))
			for round := 1; ; round++ {
				res := gjson.GetBytes(a.final, "result")
				if res.Get("resultType").String() != "input_required" {
					if got := res.Get("content.0.text").String(); got != "accept:x1,accept:x2,accept:x3" || res.Get("resultType").String() != "complete" {
						t.Errorf("call %d: final %s", n, a.final)
					}
					if round != 4 {
						t.Errorf("call %d: completed after %d rounds, want 3", n, round-1)
					}
					return
				}
				if round > 3 {
					t.Errorf("call %d: a round too many: %s", n, a.final)
					return
				}
				key := ""
				res.Get("inputRequests").ForEach(func(k, _ gjson.Result) bool { key = k.String(); return false })
				extra := fmt.Sprintf(`,"inputResponses":{%q:{"action":"accept","content":{"a":"x%d"}}},"requestState":%q`, key, round, res.Get("requestState").String())
				a = serve(b, askRequest(t, upstream, id+round, 3, extra))
			}
		}()
	}
	wg.Wait()
	if p := b.Parked(); p != 0 {
		t.Fatalf("%d calls still parked", p)
	}
}

// TestBridgeExpiry: a parked call that nobody retries is cancelled upstream.
func TestBridgeExpiry(t *testing.T) {
	upstream, server := legacyUpstream(t)
	b := newTestBridge(t, 100*time.Millisecond)
	a := serve(b, askRequest(t, upstream, 1, 1, ""))
	state := gjson.GetBytes(a.final, "result.requestState").String()
	if state == "" || b.Parked() != 1 {
		t.Fatalf("not parked: %s", a.final)
	}
	deadline := time.Now().Add(5 * time.Second)
	for b.Parked() != 0 || sessionsOf(server) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("after the TTL: %d parked, %d upstream sessions", b.Parked(), sessionsOf(server))
		}
		time.Sleep(10 * time.Millisecond)
	}
	retry := serve(b, askRequest(t, upstream, 2, 1, fmt.Sprintf(`,"inputResponses":{"elicitation-1":{"action":"accept"}},"requestState":%q`, state)))
	if code := gjson.GetBytes(retry.final, "error.code").Int(); code != jsonrpc.InvalidParams || retry.status != http.StatusBadRequest {
		t.Fatalf("retry after expiry: %d %s", retry.status, retry.final)
	}
}

func sessionsOf(s *mcp.Server) int {
	n := 0
	for range s.Sessions() {
		n++
	}
	return n
}

// TestBridgeCloseAbandons: closing the bridge cancels parked calls.
func TestBridgeCloseAbandons(t *testing.T) {
	upstream, server := legacyUpstream(t)
	b := newTestBridge(t, time.Minute)
	for i := range 3 {
		serve(b, askRequest(t, upstream, i, 1, ""))
	}
	if b.Parked() != 3 {
		t.Fatalf("%d parked, want 3", b.Parked())
	}
	b.Close()
	if b.Parked() != 0 {
		t.Fatalf("%d parked after Close", b.Parked())
	}
	waitNoSessions(t, server)
}
