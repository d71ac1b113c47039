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

	"github.com/tidwall/gjson"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/legacy"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/tests/support"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/seal"
)

// limitedBridge is a bridge with the given options (and keyring and
// instance of its own) over a fresh pool.
func limitedBridge(t *testing.T, opts Options) *Bridge {
	t.Helper()
	kr, err := seal.NewKeyring(seal.NewRandomKey())
	if err != nil {
		t.Fatal(err)
	}
	p := legacy.NewPool(legacy.PoolOptions{MaxSessions: 100, IdleTimeout: time.Minute, Client: http.DefaultClient})
	opts.Keyring, opts.Instance = kr, "test"
	b := New(p, opts)
	t.Cleanup(func() { b.Close(); p.Close() })
	return b
}

// waitNoSessions fails unless server holds no session within 5s.
func waitNoSessions(t *testing.T, server *mcp.Server) {
	t.Helper()
	waitSessions(t, server, 0)
}

// waitSessions fails unless server holds n sessions within 5s.
func waitSessions(t *testing.T, server *mcp.Server, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for sessionsOf(server) != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d upstream sessions left, want %d", sessionsOf(server), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestBridgeMaxRounds: a call asking more rounds than MaxRounds ends with
// an error and its upstream session is closed.
func TestBridgeMaxRounds(t *testing.T) {
	upstream, server := legacyUpstream(t)
	b := limitedBridge(t, bridgeOptions(func(o *Options) { o.ParkTTL, o.MaxRounds = time.Minute, 2 }))
	a := serve(b, askRequest(t, upstream, 1, 3, ""))
	for round := 1; round <= 2; round++ {
		res := gjson.GetBytes(a.final, "result")
		if res.Get("resultType").String() != "input_required" {
			t.Fatalf("round %d: %s", round, a.final)
		}
		extra := fmt.Sprintf(`,"inputResponses":{"elicitation-%d":{"action":"accept","content":{"a":"x"}}},"requestState":%q`, round, res.Get("requestState").String())
		a = serve(b, askRequest(t, upstream, 1+round, 3, extra))
	}
	if msg := gjson.GetBytes(a.final, "error.message").String(); a.status != http.StatusBadGateway || !strings.Contains(msg, "max_rounds") {
		t.Fatalf("third round: HTTP %d %s, want 502 naming max_rounds", a.status, a.final)
	}
	if b.Parked() != 0 {
		t.Fatalf("%d calls parked", b.Parked())
	}
	waitNoSessions(t, server)
}

// manyUpstream is a legacy server whose tool `many` asks n questions at
// once (support.AddMany), whose tool `parkchatty` asks once and sends n
// progress notifications while parked (support.AddChatter), and whose tool
// `chatty` sends n progress notifications before its result.
func manyUpstream(t *testing.T) (string, *mcp.Server) {
	t.Helper()
	server := mcp.NewServer(&mcp.Implementation{Name: "many", Version: "1"}, nil)
	support.AddMany(server, nil)
	support.AddChatter(server, "parkchatty", nil)
	mcp.AddTool(server, &mcp.Tool{Name: "chatty", Description: "Sends n progress notifications."},
		func(ctx context.Context, req *mcp.CallToolRequest, in struct {
			N int `json:"n"`
		}) (*mcp.CallToolResult, any, error) {
			for i := range in.N {
				if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
					ProgressToken: req.Params.GetProgressToken(), Progress: float64(i), Message: "working",
				}); err != nil {
					return nil, nil, err
				}
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil, nil
		})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil))
	t.Cleanup(ts.Close)
	return ts.URL, server
}

func toolRequest(t *testing.T, upstream, tool string, id, n int) Request {
	t.Helper()
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":{"n":%d},`+
		`"_meta":{"progressToken":"p","io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}}}`, id, tool, n)
	h := http.Header{"Mcp-Protocol-Version": {translate.ModernVersion}, "Mcp-Method": {"tools/call"}, "Mcp-Name": {tool}}
	req, rerr := translate.ValidateModern(http.MethodPost, h, []byte(body), nil)
	if rerr != nil {
		t.Fatalf("invalid test request: %v", rerr)
	}
	return Request{Target: translate.Target{Upstream: upstream}, Principal: translate.PrincipalHash("p"), ModernRequest: req}
}

// TestBridgeMaxInputsPerRound: a round asking more than MaxInputsPerRound
// questions ends the call with an error; within the limit it parks.
func TestBridgeMaxInputsPerRound(t *testing.T) {
	upstream, server := manyUpstream(t)
	b := limitedBridge(t, bridgeOptions(func(o *Options) {
		o.ParkTTL, o.MaxInputsPerRound, o.GatherWindow = time.Minute, 2, 200*time.Millisecond
	}))
	always := func(r Request) Request { r.GatherAlways = true; return r } // every round waits for the siblings
	a := serve(b, always(toolRequest(t, upstream, "many", 1, 2)))
	if n := len(gjson.GetBytes(a.final, "result.inputRequests").Map()); n != 2 {
		t.Fatalf("two questions: %s", a.final)
	}
	a = serve(b, always(toolRequest(t, upstream, "many", 2, 3)))
	if msg := gjson.GetBytes(a.final, "error.message").String(); a.status != http.StatusBadGateway || !strings.Contains(msg, "max_inputs_per_round") {
		t.Fatalf("three questions: HTTP %d %s, want 502 naming max_inputs_per_round", a.status, a.final)
	}
	b.Close()
	waitNoSessions(t, server)
}

// blockedSink is a client that stops reading: its writes fail.
type blockedSink struct{ recordedAnswer }

func (s *blockedSink) Notify([]byte) error { return fmt.Errorf("write timeout") }

// TestBridgeClientStopsReading: a notification the client cannot take
// abandons the call (the upstream session is closed).
func TestBridgeClientStopsReading(t *testing.T) {
	upstream, server := manyUpstream(t)
	b := limitedBridge(t, DefaultOptions())
	b.Serve(context.Background(), toolRequest(t, upstream, "chatty", 1, 3), &blockedSink{})
	waitNoSessions(t, server)
}

// slowSink holds the first notification for a while, as a client slow to
// read would, while the upstream sends more than the call buffer holds.
type slowSink struct {
	recordedAnswer
	once sync.Once
}

func (s *slowSink) Notify(msg []byte) error {
	s.once.Do(func() { time.Sleep(300 * time.Millisecond) })
	return s.recordedAnswer.Notify(msg)
}

// TestBridgeBurstWhileStreaming: while the client reads (slowly), a burst
// of notifications larger than the call buffer waits for room: every one
// is relayed and the call completes.
func TestBridgeBurstWhileStreaming(t *testing.T) {
	upstream, _ := manyUpstream(t)
	b := limitedBridge(t, bridgeOptions(func(o *Options) { o.Lease = legacy.LeaseLimits{CallBuffer: 4} }))
	a := &slowSink{}
	b.Serve(context.Background(), toolRequest(t, upstream, "chatty", 1, 50), a)
	if gjson.GetBytes(a.final, "result.content.0.text").String() != "done" || len(a.notifications) != 50 {
		t.Fatalf("50 notifications through a buffer of 4: %d relayed, final %s", len(a.notifications), a.final)
	}
}

// TestBridgeParkedOverflow: a parked call whose upstream sends more than
// the call buffer holds is abandoned at once (not at its retry or expiry):
// it leaves the table, its upstream session is ended, and the retry is
// refused.
func TestBridgeParkedOverflow(t *testing.T) {
	upstream, server := manyUpstream(t)
	b := limitedBridge(t, bridgeOptions(func(o *Options) { o.ParkTTL, o.Lease = time.Minute, legacy.LeaseLimits{CallBuffer: 4} }))
	a := serve(b, toolRequest(t, upstream, "parkchatty", 1, 20))
	state := gjson.GetBytes(a.final, "result.requestState").String()
	if state == "" || b.Parked() != 1 {
		t.Fatalf("not parked: %s", a.final)
	}
	deadline := time.Now().Add(5 * time.Second)
	for b.Parked() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the overflowing call is still parked after 5s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	waitNoSessions(t, server)
	r := toolRequest(t, upstream, "parkchatty", 2, 20)
	body := strings.Replace(string(r.Raw), `"arguments"`, fmt.Sprintf(`"inputResponses":{"elicitation-1":{"action":"decline"}},"requestState":%q,"arguments"`, state), 1)
	h := http.Header{"Mcp-Protocol-Version": {translate.ModernVersion}, "Mcp-Method": {"tools/call"}, "Mcp-Name": {"parkchatty"}}
	req, rerr := translate.ValidateModern(http.MethodPost, h, []byte(body), nil)
	if rerr != nil {
		t.Fatal(rerr)
	}
	retry := serve(b, Request{Target: translate.Target{Upstream: upstream}, Principal: translate.PrincipalHash("p"), ModernRequest: req})
	if code := gjson.GetBytes(retry.final, "error.code").Int(); code != jsonrpc.InvalidParams || retry.status != http.StatusBadRequest {
		t.Fatalf("retry: HTTP %d %s, want 400 -32602", retry.status, retry.final)
	}
}
