package tests

// Hardening: parked calls of the forward bridge. A
// full table refuses the new call and never ends another principal's;
// max_parked_per_principal bounds one principal; without authentication
// every anonymous client is one principal.

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/tests/support"
)

// parkingServer is a legacy go-sdk server in the test process, written for
// these tests: its tools `ask` and `other` elicit once each. It counts the
// tool calls that reached it (started), reports the elicitation's answer
// (answers: the action, or "error: …") and how each call ended (ended:
// "done", or "cancelled" when the gateway cancelled it), so that a test
// sees what a refused call left upstream.
type parkingServer struct {
	url     string
	server  *mcp.Server
	started atomic.Int32
	answers chan string
	ended   chan string
}

func newParkingServer(t *testing.T) *parkingServer {
	t.Helper()
	ps := &parkingServer{answers: make(chan string, 2048), ended: make(chan string, 2048)}
	ps.server = mcp.NewServer(&mcp.Implementation{Name: "parking", Version: "1"}, nil)
	tool := func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		ps.started.Add(1)
		res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{
			Message:         "Go on?",
			RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"answer": map[string]any{"type": "string"}}},
		})
		switch {
		case err != nil:
			ps.answers <- "error: " + err.Error()
		default:
			ps.answers <- res.Action
		}
		if err == nil && res.Action == "accept" {
			ps.ended <- "done"
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprint("answer: ", res.Content["answer"])}}}, nil, nil
		}
		// An abandoned call is answered, then cancelled.
		select {
		case <-ctx.Done():
			ps.ended <- "cancelled"
			return nil, nil, ctx.Err()
		case <-time.After(notHang):
			ps.ended <- "done"
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "no answer"}}}, nil, nil
		}
	}
	mcp.AddTool(ps.server, &mcp.Tool{Name: "ask", Description: "Asks once."}, tool)
	mcp.AddTool(ps.server, &mcp.Tool{Name: "other", Description: "Asks once too."}, tool)
	ps.url = support.ServeMCP(t, ps.server, nil)
	return ps
}

func (ps *parkingServer) block() string {
	return "\t\tupstream " + ps.url + " {\n\t\t\tera legacy\n\t\t}"
}

// sessionsAre waits until the server holds n sessions.
func (ps *parkingServer) sessionsAre(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(notHang)
	for countSessions(ps.server) != n {
		if time.Now().After(deadline) {
			t.Fatalf("the upstream holds %d sessions, want %d", countSessions(ps.server), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// toolCall POSTs a modern tools/call of tool (no arguments), with
// `Authorization: Bearer <who>` unless who is "" (anonymous), and extra
// params merged.
func toolCall(t *testing.T, url string, id int, tool, who string, extra map[string]any) rpcExchange {
	t.Helper()
	m := meta(modernVersion)
	m["io.modelcontextprotocol/clientCapabilities"] = map[string]any{"elicitation": map[string]any{}}
	params := map[string]any{"name": tool, "arguments": map[string]any{}, "_meta": m}
	for k, v := range extra {
		params[k] = v
	}
	h := modernHeaders(modernVersion, "tools/call", tool)
	if who != "" {
		h["Authorization"] = "Bearer " + who
	}
	return postRPC(t, url, h, rpcBody(t, id, "tools/call", params), id)
}

// answerCall retries a parked call of tool with an accepting answer.
func answerCall(t *testing.T, url string, id int, tool, who string, ir inputRequired) rpcExchange {
	t.Helper()
	return toolCall(t, url, id, tool, who, map[string]any{
		"inputResponses": map[string]any{"elicitation-1": acceptAnswer}, "requestState": ir.RequestState,
	})
}

// checkRefused asserts the documented refusal of a call that wanted to
// park: status, -32603, a message naming the limit and saying whether the
// call reached the upstream ("was cancelled") or not ("was not sent").
func checkRefused(t *testing.T, x rpcExchange, status int, limit, what string, id int) {
	t.Helper()
	r := checkRPCError(t, x, status, -32603, id)
	if r == nil || !strings.Contains(r.Error.Message, "("+limit+")") || !strings.Contains(r.Error.Message, what) ||
		!strings.Contains(r.Error.Message, "waiting for input") {
		t.Errorf("refusal %s, want a message naming %s, saying the call %s", x, limit, what)
	}
}

func parkedList(t *testing.T, g *gateway) []map[string]any {
	t.Helper()
	var parked []map[string]any
	adminGET(t, g, "/mcp_gateway/parked", &parked)
	return parked
}

// TestHardeningParkingFullTableRefusesNewCall: with max_parked 3 filled by
// alice, mallory — minting a new principal (bearer token) for each call —
// cannot evict alice's calls. A call to a tool not yet known to ask runs,
// asks, and is refused with 503 -32603 when it would park: its question is
// answered with a cancellation, the upstream call cancelled and its session
// ended. Calls to a tool known to ask are refused before they are sent (the
// upstream sees nothing). All three of alice's calls then complete on
// retry; the refusals are counted (parked_calls_ended_total{reason=
// "refused"}, outcome "refused"), and nothing is left parked or leased.
func TestHardeningParkingFullTableRefusesNewCall(t *testing.T) {
	t.Parallel()
	ps := newParkingServer(t)
	g := startGateway(t, ps.block()+"\n\t\tmax_parked 3")
	base := g.goroutines(t)

	var alice []inputRequired
	for i := range 3 {
		alice = append(alice, parseInputRequired(t, toolCall(t, g.URL, 1+i, "ask", "alice", nil)))
	}

	// `other` is not known to ask: it reaches the upstream, asks, and is
	// refused when it would park.
	checkRefused(t, toolCall(t, g.URL, 10, "other", "mallory-0", nil), http.StatusServiceUnavailable, "max_parked", "was cancelled", 10)
	if got := wait(t, ps.answers, notHang, "answer to the refused call's question"); !cancelled(": " + got) {
		t.Fatalf("the refused call's question was answered %q, want cancel (or its context cancelled: the go-sdk may see notifications/cancelled first)", got)
	}
	if got := wait(t, ps.ended, notHang, "end of the refused call"); got != "cancelled" {
		t.Fatalf("the refused call %s upstream, want cancelled", got)
	}
	ps.sessionsAre(t, 3) // alice's; the refused call's session was ended

	// `ask` is known to ask: refused before it is sent.
	started := ps.started.Load()
	for i := 1; i <= 4; i++ {
		checkRefused(t, toolCall(t, g.URL, 10+i, "ask", fmt.Sprintf("mallory-%d", i), nil), http.StatusServiceUnavailable, "max_parked", "was not sent", 10+i)
	}
	if n := ps.started.Load(); n != started {
		t.Errorf("%d refused calls reached the upstream, want none", n-started)
	}
	if parked := parkedList(t, g); len(parked) != 3 {
		t.Errorf("parked = %v, want alice's 3 calls", parked)
	}

	// Every one of alice's calls is still there.
	for i, ir := range alice {
		if got := checkToolResult(t, answerCall(t, g.URL, 20+i, "ask", "alice", ir), 20+i); got != "answer: yes" {
			t.Errorf("alice's call %d: %q, want it to complete", i, got)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	for i := range alice {
		if got := wait(t, ps.ended, notHang, "end of alice's call"); got != "done" {
			t.Fatalf("alice's call %d %s upstream", i, got)
		}
	}
	if parked := parkedList(t, g); len(parked) != 0 {
		t.Fatalf("parked after alice's retries = %v", parked)
	}
	waitMetrics(t, g, map[string]float64{
		`caddy_mcp_gateway_parked_calls_ended_total{reason="refused"}`:                                      5,
		`caddy_mcp_gateway_parked_calls_ended_total{reason="answered"}`:                                     3,
		`caddy_mcp_gateway_bridged_calls_total{cell="modern-legacy",method="tools/call",outcome="refused"}`: 5,
		`caddy_mcp_gateway_requests_total{cell="modern-legacy",method="tools/call",outcome="refused"}`:      5,
		`caddy_mcp_gateway_parked_calls`:                                                                    0,
	})
	g.settled(t, base)
	// The table has room again, for anyone.
	parseInputRequired(t, toolCall(t, g.URL, 30, "ask", "mallory-5", nil))
}

// TestHardeningParkingPerPrincipal: max_parked_per_principal (default
// 100) bounds one principal's parked calls. Clients without credentials
// are one principal: 100 anonymous calls park, the 101st is refused with
// 429 -32603 before it is sent, and one to a tool not known to ask is
// refused when it would park (its question cancelled upstream). A client
// with a credential still parks; none of the anonymous calls was ended,
// and once one of them completes another anonymous call parks.
func TestHardeningParkingPerPrincipal(t *testing.T) {
	t.Parallel()
	ps := newParkingServer(t)
	g := startGateway(t, ps.block())
	const limit = 100

	irs := make([]inputRequired, limit)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failures []string
	for w := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < limit; i += 10 {
				x := toolCall(t, g.URL, 1+i, "ask", "", nil)
				if x.Resp == nil || x.Resp.Error != nil || !strings.Contains(string(x.Resp.Result), `"input_required"`) {
					mu.Lock()
					failures = append(failures, x.String())
					mu.Unlock()
					continue
				}
				irs[i] = parseInputRequired(t, x)
			}
		}()
	}
	wg.Wait()
	if len(failures) > 0 {
		t.Fatalf("%d of %d anonymous calls did not park; first: %s", len(failures), limit, failures[0])
	}

	started := ps.started.Load()
	checkRefused(t, toolCall(t, g.URL, 1000, "ask", "", nil), http.StatusTooManyRequests, "max_parked_per_principal", "was not sent", 1000)
	if n := ps.started.Load(); n != started {
		t.Fatalf("the refused call reached the upstream")
	}
	checkRefused(t, toolCall(t, g.URL, 1001, "other", "", nil), http.StatusTooManyRequests, "max_parked_per_principal", "was cancelled", 1001)
	if got := wait(t, ps.answers, notHang, "answer to the refused call's question"); !cancelled(": " + got) {
		t.Fatalf("the refused call's question was answered %q, want cancel (or its context cancelled: the go-sdk may see notifications/cancelled first)", got)
	}
	if got := wait(t, ps.ended, notHang, "end of the refused call"); got != "cancelled" {
		t.Fatalf("the refused call %s upstream, want cancelled", got)
	}

	// Another principal is not affected.
	bob := parseInputRequired(t, toolCall(t, g.URL, 1002, "ask", "bob", nil))
	if parked := parkedList(t, g); len(parked) != limit+1 {
		t.Fatalf("%d parked, want the %d anonymous calls and bob's", len(parked), limit)
	}
	waitMetrics(t, g, map[string]float64{`caddy_mcp_gateway_parked_calls_ended_total{reason="refused"}`: 2})

	// An anonymous call that completes makes room for another.
	if got := checkToolResult(t, answerCall(t, g.URL, 1003, "ask", "", irs[0]), 1003); got != "answer: yes" {
		t.Fatalf("the first anonymous call: %q", got)
	}
	parseInputRequired(t, toolCall(t, g.URL, 1004, "ask", "", nil))
	if got := checkToolResult(t, answerCall(t, g.URL, 1005, "ask", "bob", bob), 1005); got != "answer: yes" {
		t.Fatalf("bob's call: %q", got)
	}
	// None of the parked anonymous calls was ended by the refusals.
	for i := 1; i < limit; i += 33 {
		if got := checkToolResult(t, answerCall(t, g.URL, 2000+i, "ask", "", irs[i]), 2000+i); got != "answer: yes" {
			t.Fatalf("anonymous call %d: %q", i, got)
		}
	}
}

// TestHardeningParkingAnonymousSessions measures max_sessions_per_principal
// (default 1000) without authentication: every anonymous client is one
// principal, so with max_parked_per_principal raised out of the way, 1000
// anonymous calls park and the 1001st is refused with 429 naming
// max_sessions_per_principal, before it reaches the upstream; a client with
// a credential still parks. docs/configuration.md documents this limit as global for
// a gateway without authentication.
func TestHardeningParkingAnonymousSessions(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("parks 1000 calls")
	}
	const n = 1000
	// Each parked call holds two upstream connections on both sides.
	lim := syscall.Rlimit{Cur: uint64(8*n + 4096), Max: uint64(8*n + 4096)}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Logf("raising the open file limit: %v", err)
	}
	ps := newParkingServer(t)
	g := startGateway(t, ps.block()+"\n\t\tmax_parked_per_principal 5000")
	start := time.Now()
	if failed, first := parkMany(g.URL, n); failed > 0 {
		t.Fatalf("%d of %d anonymous calls did not park; first: %v", failed, n, first)
	}
	t.Logf("%d anonymous calls parked in %v", n, time.Since(start).Round(time.Millisecond))
	started := ps.started.Load()
	x := toolCall(t, g.URL, n+1, "ask", "", nil)
	if r := checkRPCError(t, x, http.StatusTooManyRequests, -32603, n+1); r == nil || !strings.Contains(r.Error.Message, "max_sessions_per_principal") {
		t.Fatalf("the %dth anonymous call: %s, want 429 naming max_sessions_per_principal", n+1, x)
	}
	if ps.started.Load() != started {
		t.Fatal("the refused call reached the upstream")
	}
	parseInputRequired(t, toolCall(t, g.URL, n+2, "ask", "carol", nil))
}
