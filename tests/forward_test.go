package tests

// The forward bridge: modern (2026-07-28) clients in front of legacy
// servers, through input_required rounds and sealed requestState.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestForwardTSClient: the TypeScript SDK v2 client in auto mode, unmodified,
// negotiates 2026-07-28 with the gateway in front of unmodified legacy
// servers and answers their in-line questions through input_required.
func TestForwardTSClient(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("needs node")
	}
	everything := startGateway(t, "\t\tupstream "+startServerEverything(t))
	demo := startGateway(t, "\t\tupstream "+startDemoServer(t))
	for _, c := range []struct {
		name, url, tool, args   string
		elicitations, samplings int
		want                    string
	}{
		{"server-everything elicitation", everything.URL, "trigger-elicitation-request", "{}", 1, 0, "Test User"},
		{"server-everything sampling", everything.URL, "trigger-sampling-request", `{"prompt":"Say hi"}`, 0, 1, "sampled by modern-client"},
		{"url elicitation", everything.URL, "trigger-url-elicitation", `{"url":"https://example.com/authorize"}`, 1, 0, "User completed the URL elicitation flow"},
		// -32042 becomes an input_required with a URL-mode elicitation; the
		// retry runs the tool again, which then asks in-line.
		{"url elicitation required error", everything.URL, "trigger-url-elicitation", `{"url":"https://example.com/authorize","errorPath":true}`, 2, 0, "User completed the URL elicitation flow"},
		{"two rounds", demo.URL, "plan_trip", "{}", 2, 0, "Trip to Lisbon"},
		{"demo sampling", demo.URL, "summarize", `{"text":"long"}`, 0, 1, "Summary (test-model): sampled by modern-client"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := runClient(t, "modern-client.mjs", c.url, c.tool, c.args)
			if strOrNil(got.ProtocolVersion) != modernVersion || got.SessionID != nil {
				t.Fatalf("negotiated %s with session %s, want %s and no session", strOrNil(got.ProtocolVersion), strOrNil(got.SessionID), modernVersion)
			}
			if got.Elicitations != c.elicitations || got.Samplings != c.samplings {
				t.Fatalf("%d elicitations and %d samplings, want %d and %d", got.Elicitations, got.Samplings, c.elicitations, c.samplings)
			}
			if text := got.Result.text(); got.Result.IsError || !strings.Contains(text, c.want) {
				t.Fatalf("result %q (isError %t), want it to contain %q", text, got.Result.IsError, c.want)
			}
		})
	}
}

// TestForwardGoClient: the go-sdk v1.8.0 client, modern by default, through
// the gateway in front of the legacy demo server.
func TestForwardGoClient(t *testing.T) {
	t.Parallel()
	g := startGateway(t, "\t\tupstream "+startDemoServer(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var elicitations, samplings atomic.Int32
	cs := connectGo(t, g.URL, "", &mcp.ClientOptions{
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			elicitations.Add(1)
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{
				"destination": "Kyoto", "startDate": "2027-04-01", "endDate": "2027-04-10",
			}}, nil
		},
		CreateMessageHandler: func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			samplings.Add(1)
			return &mcp.CreateMessageResult{Role: "assistant", Model: "go-model", Content: &mcp.TextContent{Text: "brief"}}, nil
		},
	})
	if cs.ID() != "" {
		t.Fatalf("a modern client got session id %q", cs.ID())
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "plan_trip", Arguments: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	if got := toolText(res); got != "Trip to Kyoto from 2027-04-01 to 2027-04-10." || elicitations.Load() != 2 {
		t.Fatalf("plan_trip: %q after %d elicitations", got, elicitations.Load())
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "summarize", Arguments: map[string]any{"text": "long"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := toolText(res); got != "Summary (go-model): brief" || samplings.Load() != 1 {
		t.Fatalf("summarize: %q after %d samplings", got, samplings.Load())
	}
}

// recordingServer is a legacy go-sdk server in the test process whose tool
// `ask` elicits once and reports what came back; it counts the HTTP
// requests it receives, so that a test can prove a rejected retry reached
// nothing upstream.
type recordingServer struct {
	url      string
	requests atomic.Int32
	gets     atomic.Int32 // GET requests (standalone streams)
	conns    atomic.Int32 // open connections
	answers  chan string  // the action of each elicitation answer the upstream was sent
	ended    chan string  // "done" or "cancelled" per tool call
}

func newRecordingServer(t *testing.T) *recordingServer {
	t.Helper()
	rs := &recordingServer{answers: make(chan string, 16), ended: make(chan string, 16)}
	server := mcp.NewServer(&mcp.Implementation{Name: "recording", Version: "1"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "ask", Description: "Asks once."},
		func(ctx context.Context, req *mcp.CallToolRequest, in struct {
			Topic string `json:"topic"`
		}) (*mcp.CallToolResult, any, error) {
			res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{
				Message:         "About " + in.Topic + "?",
				RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"answer": map[string]any{"type": "string"}}},
			})
			if err != nil || res.Action != "accept" {
				// An abandoned call is answered, then cancelled: wait for
				// the cancellation (bounded).
				if rs.cancelledWithin(ctx, 3*time.Second) {
					return nil, nil, ctx.Err()
				}
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "no answer"}}}, nil, nil
			}
			rs.ended <- "done"
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprint("answer: ", res.Content["answer"])}}}, nil, nil
		})
	mcp.AddTool(server, &mcp.Tool{Name: "slow", Description: "Works for 3s unless cancelled."},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			if rs.cancelledWithin(ctx, 3*time.Second) {
				return nil, nil, ctx.Err()
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "slept"}}}, nil, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rs.requests.Add(1)
		if r.Method == http.MethodGet {
			rs.gets.Add(1)
		}
		if r.Method == http.MethodPost {
			rs.recordAnswer(r)
		}
		h.ServeHTTP(w, r)
	}), ConnState: func(_ net.Conn, st http.ConnState) {
		switch st {
		case http.StateNew:
			rs.conns.Add(1)
		case http.StateClosed, http.StateHijacked:
			rs.conns.Add(-1)
		}
	}}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	rs.url = "http://" + ln.Addr().String() + "/mcp"
	return rs
}

// recordAnswer puts on rs.answers the action of an elicitation answer r
// carries. It reads what the gateway sent, not what the tool saw: an
// abandoned call is answered and then cancelled, and the go-sdk's Elicit
// returns either, whichever its select picks once both have arrived.
func (rs *recordingServer) recordAnswer(r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Result *struct {
			Action string `json:"action"`
		} `json:"result"`
	}
	if json.Unmarshal(body, &msg) == nil && msg.ID != nil && msg.Result != nil && msg.Result.Action != "" {
		select {
		case rs.answers <- msg.Result.Action:
		default: // nobody reads them: never hold the upstream up
		}
	}
}

// drained waits, up to notHang, until no connection to rs is open. Once the
// only client (a gateway) has exited, that proves every request it sent
// has been counted: a connection closes after its last request is read.
func (rs *recordingServer) drained(t *testing.T) {
	t.Helper()
	waitForWithin(t, notHang, "every connection to the upstream to close", func() bool { return rs.conns.Load() == 0 })
}

// cancelledWithin waits up to d for ctx to be cancelled and reports on
// rs.ended how the tool call ended ("cancelled" or "done").
func (rs *recordingServer) cancelledWithin(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		rs.ended <- "cancelled"
		return true
	case <-time.After(d):
		rs.ended <- "done"
		return false
	}
}

// inputRequired is an input_required result as the tests read it.
type inputRequired struct {
	ResultType    string                     `json:"resultType"`
	InputRequests map[string]json.RawMessage `json:"inputRequests"`
	RequestState  string                     `json:"requestState"`
}

// askCall POSTs tools/call ask (with extra params merged) and returns the exchange.
func askCall(t *testing.T, url string, id int, topic string, extra map[string]any, hdr map[string]string) rpcExchange {
	t.Helper()
	return elicitingCall(t, url, id, "ask", map[string]any{"topic": topic}, extra, hdr)
}

// elicitingCall posts a modern tools/call of tool with args, from a client
// declaring elicitation, with extra params (a retry's requestState and
// inputResponses) and extra headers (hdr).
func elicitingCall(t *testing.T, url string, id int, tool string, args, extra map[string]any, hdr map[string]string) rpcExchange {
	t.Helper()
	m := meta(modernVersion)
	m["io.modelcontextprotocol/clientCapabilities"] = map[string]any{"elicitation": map[string]any{}}
	params := map[string]any{"name": tool, "arguments": args, "_meta": m}
	for k, v := range extra {
		params[k] = v
	}
	h := modernHeaders(modernVersion, "tools/call", tool)
	for k, v := range hdr {
		h[k] = v
	}
	return postRPC(t, url, h, rpcBody(t, id, "tools/call", params), id)
}

func parseInputRequired(t *testing.T, x rpcExchange) inputRequired {
	t.Helper()
	if x.Resp == nil || x.Resp.Error != nil {
		t.Fatalf("want input_required, got %s", x)
	}
	var ir inputRequired
	if err := json.Unmarshal(x.Resp.Result, &ir); err != nil || ir.ResultType != "input_required" {
		t.Fatalf("want input_required, got %s", x.Resp.Result)
	}
	return ir
}

var acceptAnswer = map[string]any{"action": "accept", "content": map[string]any{"answer": "yes"}}

// TestForwardRejections: a requestState that is tampered with, presented by
// another principal, for another request, replayed, or expired is refused
// with a JSON-RPC error, and nothing of it reaches the upstream; malformed
// inputResponses are asked for again.
func TestForwardRejections(t *testing.T) {
	t.Parallel()
	rs := newRecordingServer(t)
	g := startGateway(t, "\t\tupstream "+rs.url+" {\n\t\t\tera legacy\n\t\t}\n\t\tpark_ttl 2s\n\t\tmax_request_body 64KiB")
	alice := map[string]string{"Authorization": "Bearer alice"}

	ir := parseInputRequired(t, askCall(t, g.URL, 1, "tea", nil, alice))
	if len(ir.InputRequests) != 1 || ir.RequestState == "" {
		t.Fatalf("input_required %+v: want one input request and a requestState", ir)
	}
	var key string
	for k := range ir.InputRequests {
		key = k
	}
	good := map[string]any{"inputResponses": map[string]any{key: acceptAnswer}, "requestState": ir.RequestState}

	// Every refusal says the same (TestHardeningStateOracleHeld); the
	// case is named for the test's messages.
	refused := func(t *testing.T, x rpcExchange, id int, what string) {
		t.Helper()
		before := rs.requests.Load()
		if r := checkRPCError(t, x, http.StatusBadRequest, -32602, id); r != nil && r.Error.Message != stateRefused {
			t.Errorf("%s: message %q, want %q", what, r.Error.Message, stateRefused)
		}
		if after := rs.requests.Load(); after != before {
			t.Errorf("the upstream received %d requests for a refused retry", after-before)
		}
	}
	t.Run("tampered", func(t *testing.T) {
		b := []byte(ir.RequestState)
		b[len(b)/2] ^= 0x01
		refusedBefore := rs.requests.Load()
		x := askCall(t, g.URL, 2, "tea", map[string]any{"inputResponses": good["inputResponses"], "requestState": string(b)}, alice)
		refused(t, x, 2, "invalid")
		_ = refusedBefore
		x = askCall(t, g.URL, 3, "tea", map[string]any{"inputResponses": good["inputResponses"], "requestState": ir.RequestState + "-TAMPERED"}, alice)
		refused(t, x, 3, "invalid")
	})
	t.Run("other principal", func(t *testing.T) {
		refused(t, askCall(t, g.URL, 4, "tea", good, map[string]string{"Authorization": "Bearer mallory"}), 4, "another principal")
		refused(t, askCall(t, g.URL, 5, "tea", good, nil), 5, "another principal")
	})
	t.Run("other request", func(t *testing.T) {
		refused(t, askCall(t, g.URL, 6, "coffee", good, alice), 6, "another request")
	})
	t.Run("malformed responses are asked again", func(t *testing.T) {
		bad := map[string]any{"inputResponses": map[string]any{key: map[string]any{"action": "maybe"}}, "requestState": ir.RequestState}
		again := parseInputRequired(t, askCall(t, g.URL, 7, "tea", bad, alice))
		if _, ok := again.InputRequests[key]; !ok || again.RequestState == ir.RequestState {
			t.Fatalf("re-asked %+v, want the same key and a new requestState", again)
		}
		// The old state was used up: replaying it fails.
		refused(t, askCall(t, g.URL, 8, "tea", good, alice), 8, "already used")
		good["requestState"] = again.RequestState
	})
	t.Run("completes", func(t *testing.T) {
		if text := checkToolResult(t, askCall(t, g.URL, 9, "tea", good, alice), 9); text != "answer: yes" {
			t.Fatalf("result %q", text)
		}
		if got := wait(t, rs.answers, 5*time.Second, "answer upstream"); got != "accept" {
			t.Fatalf("upstream got %q", got)
		}
	})
	t.Run("replayed", func(t *testing.T) {
		refused(t, askCall(t, g.URL, 10, "tea", good, alice), 10, "already used")
	})
	t.Run("expired", func(t *testing.T) {
		ir := parseInputRequired(t, askCall(t, g.URL, 11, "late", nil, alice))
		time.Sleep(2500 * time.Millisecond)
		refused(t, askCall(t, g.URL, 12, "late", map[string]any{"inputResponses": map[string]any{key: acceptAnswer}, "requestState": ir.RequestState}, alice), 12, "expired")
	})
	t.Run("oversized", func(t *testing.T) {
		big := strings.Repeat("x", 70<<10)
		x := askCall(t, g.URL, 13, "tea", map[string]any{"inputResponses": map[string]any{key: map[string]any{"action": "accept", "content": map[string]any{"answer": big}}}}, alice)
		if x.Status != http.StatusRequestEntityTooLarge {
			t.Fatalf("status %d, want 413", x.Status)
		}
	})
}

// TestForwardFreshInputResponses: a first request that already carries the
// answer (under the key the gateway derives) completes without a round
// trip; a wrong key or an invalid answer gets input_required.
func TestForwardFreshInputResponses(t *testing.T) {
	t.Parallel()
	rs := newRecordingServer(t)
	g := startGateway(t, "\t\tupstream "+rs.url+" {\n\t\t\tera legacy\n\t\t}")
	x := askCall(t, g.URL, 1, "x", map[string]any{"inputResponses": map[string]any{"elicitation-1": acceptAnswer, "unrelated": 1}}, nil)
	if text := checkToolResult(t, x, 1); text != "answer: yes" {
		t.Fatalf("result %q", text)
	}
	for i, bad := range []any{map[string]any{"wrong_key": acceptAnswer}, map[string]any{"elicitation-1": 12345}, nil} {
		ir := parseInputRequired(t, askCall(t, g.URL, 2+i, "x", map[string]any{"inputResponses": bad}, nil))
		if _, ok := ir.InputRequests["elicitation-1"]; !ok {
			t.Fatalf("input_required %+v: want key elicitation-1", ir)
		}
	}
}

// TestForwardAbandonment: a parked call that expires, or whose client
// leaves, has its upstream question answered with a cancellation and the
// upstream call cancelled; a full max_parked refuses the new call, not
// the parked one.
func TestForwardAbandonment(t *testing.T) {
	t.Parallel()
	t.Run("expiry", func(t *testing.T) {
		rs := newRecordingServer(t)
		g := startGateway(t, "\t\tupstream "+rs.url+" {\n\t\t\tera legacy\n\t\t}\n\t\tpark_ttl 500ms")
		parseInputRequired(t, askCall(t, g.URL, 1, "x", nil, nil))
		if got := wait(t, rs.answers, 5*time.Second, "answer after expiry"); got != "cancel" {
			t.Fatalf("upstream got %q, want cancel", got)
		}
		if got := wait(t, rs.ended, 5*time.Second, "end of the tool call"); got != "cancelled" {
			t.Fatalf("tool call %s, want cancelled", got)
		}
	})
	t.Run("refusal", func(t *testing.T) {
		// max_parked full: the new call is refused (before it is sent,
		// `ask` being known to ask), the parked one goes on.
		rs := newRecordingServer(t)
		g := startGateway(t, "\t\tupstream "+rs.url+" {\n\t\t\tera legacy\n\t\t}\n\t\tmax_parked 1")
		first := parseInputRequired(t, askCall(t, g.URL, 1, "first", nil, nil))
		checkRPCError(t, askCall(t, g.URL, 2, "second", nil, nil), http.StatusServiceUnavailable, -32603, 2)
		x := askCall(t, g.URL, 3, "first", map[string]any{"inputResponses": map[string]any{"elicitation-1": acceptAnswer}, "requestState": first.RequestState}, nil)
		checkToolResult(t, x, 3)
		if got := wait(t, rs.answers, 5*time.Second, "answer to the parked call"); got != "accept" {
			t.Fatalf("upstream got %q, want accept", got)
		}
	})
	t.Run("client disconnects mid-call", func(t *testing.T) {
		rs := newRecordingServer(t)
		g := startGateway(t, "\t\tupstream "+rs.url+" {\n\t\t\tera legacy\n\t\t}")
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		body := rpcBody(t, 1, "tools/call", map[string]any{"name": "slow", "arguments": map[string]any{}, "_meta": meta(modernVersion)})
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, g.URL, strings.NewReader(body))
		for k, v := range modernHeaders(modernVersion, "tools/call", "slow") {
			req.Header.Set(k, v)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			t.Fatalf("the slow call answered %d within 300ms", resp.StatusCode)
		}
		if got := wait(t, rs.ended, 5*time.Second, "end of the tool call"); got != "cancelled" {
			t.Fatalf("tool call %s, want cancelled when the client left", got)
		}
	})
	t.Run("shutdown", func(t *testing.T) {
		rs := newRecordingServer(t)
		g := startGateway(t, "\t\tupstream "+rs.url+" {\n\t\t\tera legacy\n\t\t}")
		parseInputRequired(t, askCall(t, g.URL, 1, "x", nil, nil))
		g.stop(t)
		if got := wait(t, rs.answers, 5*time.Second, "answer at shutdown"); got != "cancel" {
			t.Fatalf("upstream got %q, want cancel", got)
		}
	})
	t.Run("reload keeps parked calls", func(t *testing.T) {
		rs := newRecordingServer(t)
		block := "\t\tupstream " + rs.url + " {\n\t\t\tera legacy\n\t\t}"
		g := startGateway(t, block)
		ir := parseInputRequired(t, askCall(t, g.URL, 1, "x", nil, nil))
		g.reload(t, block+"\n\t\tgather_window 30ms")
		x := askCall(t, g.URL, 2, "x", map[string]any{"inputResponses": map[string]any{"elicitation-1": acceptAnswer}, "requestState": ir.RequestState}, nil)
		if text := checkToolResult(t, x, 2); text != "answer: yes" {
			t.Fatalf("after reload: %q", text)
		}
	})
}

// TestForwardGoClientServerEverything: the go-sdk client, modern, completes
// server-everything's in-line elicitation and sampling through the gateway.
func TestForwardGoClientServerEverything(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("needs node")
	}
	g := startGateway(t, "\t\tupstream "+startServerEverything(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs := connectGo(t, g.URL, "", &mcp.ClientOptions{
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Gopher"}}, nil
		},
		CreateMessageHandler: func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			return &mcp.CreateMessageResult{Role: "assistant", Model: "go-model", Content: &mcp.TextContent{Text: "hi from go"}}, nil
		},
	})
	for _, c := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{"trigger-elicitation-request", map[string]any{}, "Name: Gopher"},
		{"trigger-sampling-request", map[string]any{"prompt": "hello"}, "hi from go"},
	} {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: c.tool, Arguments: c.args})
		if err != nil {
			t.Fatalf("%s: %v", c.tool, err)
		}
		if got := toolText(res); res.IsError || !strings.Contains(got, c.want) {
			t.Fatalf("%s: %q, want it to contain %q", c.tool, got, c.want)
		}
	}
}

// TestForwardPrincipalPlaceholder: with `principal` set to an identity
// header, a requestState opens only for that identity, whatever the
// Authorization.
func TestForwardPrincipalPlaceholder(t *testing.T) {
	t.Parallel()
	rs := newRecordingServer(t)
	g := startGateway(t, "\t\tupstream "+rs.url+" {\n\t\t\tera legacy\n\t\t}\n\t\tprincipal {http.request.header.X-User}")
	ir := parseInputRequired(t, askCall(t, g.URL, 1, "tea", nil, map[string]string{"X-User": "alice", "Authorization": "Bearer one"}))
	retry := map[string]any{"inputResponses": map[string]any{"elicitation-1": acceptAnswer}, "requestState": ir.RequestState}
	checkRPCError(t, askCall(t, g.URL, 2, "tea", retry, map[string]string{"X-User": "bob", "Authorization": "Bearer one"}), http.StatusBadRequest, -32602, 2)
	if text := checkToolResult(t, askCall(t, g.URL, 3, "tea", retry, map[string]string{"X-User": "alice", "Authorization": "Bearer two"}), 3); text != "answer: yes" {
		t.Fatalf("alice's retry with a refreshed token: %q", text)
	}
}

// TestForwardGetStream: the standalone GET streams the gateway's upstream
// sessions open for modern clients' calls, two principals calling the same
// tool (a session each), in front of the go-sdk server, which asks on the
// call's own stream: with `get_stream on` each session opens one; with
// `off` none does; with the default (`learn`) the first call's session
// does (the tool has not asked yet) and the second's does not. Every call
// completes its round.
func TestForwardGetStream(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		opt  string
		gets func(int32) bool
	}{
		{"on", func(n int32) bool { return n >= 2 }},
		{"off", func(n int32) bool { return n == 0 }},
		{"", func(n int32) bool { return n == 1 }},
	} {
		t.Run("get_stream "+tc.opt, func(t *testing.T) {
			rs := newRecordingServer(t)
			opt := ""
			if tc.opt != "" {
				opt = "\t\t\tget_stream " + tc.opt + "\n"
			}
			g := startGateway(t, "\t\tupstream "+rs.url+" {\n\t\t\tera legacy\n"+opt+"\t\t}\n\t\tprincipal {http.request.header.X-User}")
			for i, user := range []string{"alice", "bob"} {
				h := map[string]string{"X-User": user}
				ir := parseInputRequired(t, askCall(t, g.URL, 1+2*i, "x", nil, h))
				x := askCall(t, g.URL, 2+2*i, "x", map[string]any{"inputResponses": map[string]any{"elicitation-1": acceptAnswer}, "requestState": ir.RequestState}, h)
				if text := checkToolResult(t, x, 2+2*i); text != "answer: yes" {
					t.Fatalf("%s's result %q", user, text)
				}
			}
			// Nothing more can reach the upstream once the gateway has
			// exited and its connections are closed: then count.
			g.stop(t)
			rs.drained(t)
			if n := rs.gets.Load(); !tc.gets(n) {
				t.Fatalf("%d GET requests upstream with get_stream %q", n, tc.opt)
			}
		})
	}
}
