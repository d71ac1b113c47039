package tests

// Failure behaviour through a real Caddy: an upstream that dies mid-call, an
// upstream stream that drops and is resumed, a reload in the middle of a
// round, a client that stops reading, a restart with calls parked. Each
// case must end with a clear error or a completed call within a generous
// bound (never a hang), and leave no parked call, leased upstream session
// or goroutine behind.

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestFailureUpstreamDies: an upstream killed mid-call gives the client a
// clear error soon, in every cell that holds a call open, and the gateway
// keeps nothing of the call.
func TestFailureUpstreamDies(t *testing.T) {
	t.Parallel()
	t.Run("forward bridge, call parked", func(t *testing.T) {
		up := newFailingLegacy(t)
		g := startGateway(t, up.block())
		base := g.goroutines(t)
		resp := modernCall(t, g.URL, 1, "ask", map[string]any{}, nil)
		ir := parseInputRequired(t, readRPC(t, resp, 1))
		up.kill()
		// The gateway notices without waiting for the retry or park_ttl.
		g.settled(t, base)
		retry := map[string]any{"inputResponses": map[string]any{"elicitation-1": acceptAnswer}, "requestState": ir.RequestState}
		x := readRPC(t, modernCall(t, g.URL, 2, "ask", map[string]any{}, retry), 2)
		// The one refusal of a requestState that cannot be used (issue
		// 25: a refusal tells nothing of why), which says what to do.
		if r := checkRPCError(t, x, http.StatusBadRequest, -32602, 2); r != nil && !strings.Contains(r.Error.Message, "send the request again without it") {
			t.Fatalf("retry: %q, want the requestState refusal saying to send the request again", r.Error.Message)
		}
	})
	t.Run("forward bridge, result streaming", func(t *testing.T) {
		up := newFailingLegacy(t)
		g := startGateway(t, up.block())
		base := g.goroutines(t)
		resp := modernCall(t, g.URL, 1, "hold", map[string]any{}, nil)
		events := readSSE(resp.Body)
		if first := nextData(t, events); !strings.Contains(first.data, "notifications/progress") {
			t.Fatalf("first event %s, want progress", first.data)
		}
		up.kill()
		final := awaitResponse(t, events, 1)
		if !strings.Contains(final, `"code":-32603`) || !strings.Contains(final, "upstream") {
			t.Fatalf("the stream ended with %q, want a -32603 error about the upstream", final)
		}
		g.settled(t, base)
	})
	t.Run("pinned pass-through", func(t *testing.T) {
		up := newFailingLegacy(t)
		g := startGateway(t, up.block())
		base := g.goroutines(t)
		sid := openLegacySession(t, g.URL)
		resp := post(t, g.URL, legacyHeaders(sid), `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"hold","arguments":{},"_meta":{"progressToken":"p"}}}`)
		events := readSSE(resp.Body)
		first := nextData(t, events)
		if !strings.Contains(first.data, "notifications/progress") || first.id == "" {
			t.Fatalf("first event %+v, want progress with an event id", first)
		}
		up.kill()
		// The stream breaks (the client may resume it); resuming gets 502.
		if final := awaitResponse(t, events, 3); final != "" {
			t.Fatalf("the stream carried %s, want it to end", final)
		}
		resumed := send(t, http.MethodGet, g.URL, map[string]string{"Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25", "Last-Event-ID": first.id}, "")
		if code, _ := rpcErrorOf(t, resumed); resumed.StatusCode != http.StatusBadGateway || code != -32603 {
			t.Fatalf("resuming: HTTP %d code %d, want 502 and -32603", resumed.StatusCode, code)
		}
		g.settled(t, base)
	})
	t.Run("modern pass-through", func(t *testing.T) {
		up := newModernUpstream(t)
		g := startGateway(t, up.block())
		base := g.goroutines(t)
		resp := modernCall(t, g.URL, 5, "hold", map[string]any{}, nil)
		events := readSSE(resp.Body)
		if first := nextData(t, events); !strings.Contains(first.data, "notifications/progress") {
			t.Fatalf("first event %s, want progress", first.data)
		}
		up.kill()
		// A 2026-07-28 stream cannot be resumed: the client gets an error.
		if final := awaitResponse(t, events, 5); !strings.Contains(final, `"code":-32603`) {
			t.Fatalf("the stream ended with %q, want a -32603 error", final)
		}
		g.settled(t, base)
	})
	t.Run("reverse bridge, round open", func(t *testing.T) {
		up := newModernUpstream(t)
		g := startGateway(t, up.block())
		base := g.goroutines(t)
		sid, _ := initReverse(t, g.URL, "2025-11-25", `{"elicitation":{}}`, nil)
		_, events := startCall(t, g.URL, sid, 4, "confirm")
		q := readInline(t, events)
		up.kill()
		if r := answerInline(t, g.URL, sid, q.ID, `{"action":"accept","content":{"answer":"yes"}}`); r.StatusCode != http.StatusAccepted {
			t.Fatalf("answer: HTTP %d", r.StatusCode)
		}
		final := awaitResponse(t, events, 4)
		if !strings.Contains(final, `"code":-32603`) || !strings.Contains(final, "upstream") {
			t.Fatalf("the stream ended with %q, want a -32603 error about the upstream", final)
		}
		g.settled(t, base)
	})
}

// TestFailureStreamResumed: an upstream that drops a call's stream (the
// go-sdk's server-initiated disconnect, with an event store) is resumed by
// the forward bridge with Last-Event-ID, and the call completes with every
// notification.
func TestFailureStreamResumed(t *testing.T) {
	t.Parallel()
	up := newFailingLegacy(t)
	g := startGateway(t, up.block())
	base := g.goroutines(t)
	resp := modernCall(t, g.URL, 1, "drop", map[string]any{}, nil)
	raw, res, err := readSSEResponse(resp.Body, 1)
	if err != nil || res == nil || res.Error != nil || !strings.Contains(string(res.Result), "survived") {
		t.Fatalf("the call ended with %v %s", err, raw)
	}
	if !strings.Contains(raw, "before the drop") || !strings.Contains(raw, "after the drop") {
		t.Fatalf("a notification was lost across the resumption:\n%s", raw)
	}
	if up.resumes.Load() == 0 {
		t.Fatal("the upstream saw no GET with Last-Event-ID: was the stream dropped?")
	}
	g.settled(t, base)
}

// TestFailureReloadMidRound: `caddy reload` while a call is in progress in
// either bridge does not end it: the round completes on the stream it
// started on.
func TestFailureReloadMidRound(t *testing.T) {
	t.Parallel()
	t.Run("forward bridge", func(t *testing.T) {
		up := newFailingLegacy(t)
		g := startGateway(t, up.block())
		resp := modernCall(t, g.URL, 1, "hold", map[string]any{}, nil)
		events := readSSE(resp.Body)
		nextData(t, events) // the upstream is working
		g.reload(t, up.block()+"\n\t\tgather_window 30ms")
		up.release <- struct{}{}
		if final := awaitResponse(t, events, 1); !strings.Contains(final, "held") {
			t.Fatalf("after the reload the call ended with %q", final)
		}
	})
	t.Run("modern pass-through", func(t *testing.T) {
		up := newModernUpstream(t)
		g := startGateway(t, up.block())
		resp := modernCall(t, g.URL, 3, "hold", map[string]any{}, nil)
		events := readSSE(resp.Body)
		nextData(t, events) // the upstream is working
		g.reload(t, up.block()+"\n\t\tgather_window 30ms")
		up.release <- struct{}{}
		if final := awaitResponse(t, events, 3); !strings.Contains(final, "held") {
			t.Fatalf("after the reload the call ended with %q", final)
		}
	})
	t.Run("reverse bridge", func(t *testing.T) {
		up := newModernUpstream(t)
		g := startGateway(t, up.block())
		sid, _ := initReverse(t, g.URL, "2025-11-25", `{"elicitation":{}}`, nil)
		_, events := startCall(t, g.URL, sid, 2, "confirm")
		q := readInline(t, events)
		g.reload(t, up.block()+"\n\t\tkeepalive_interval 20s")
		if r := answerInline(t, g.URL, sid, q.ID, `{"action":"accept","content":{"answer":"yes"}}`); r.StatusCode != http.StatusAccepted {
			t.Fatalf("answer after the reload: HTTP %d", r.StatusCode)
		}
		if final := awaitResponse(t, events, 2); !strings.Contains(final, "confirmed: yes") {
			t.Fatalf("after the reload the call ended with %q", final)
		}
	})
}

// TestFailureSlowClient: a client that stops reading its stream while the
// upstream floods it loses the stream after write_timeout, and nothing is
// left: in the forward bridge the upstream call is cancelled (its session
// ended); in pinned pass-through the upstream request is let go.
func TestFailureSlowClient(t *testing.T) {
	t.Parallel()
	// stall sends a request on a raw connection that is never read.
	stall := func(t *testing.T, g *gateway, hdr map[string]string, body string) {
		t.Helper()
		conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", g.Port))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		if tc, ok := conn.(*net.TCPConn); ok {
			_ = tc.SetReadBuffer(4 << 10) // read nothing, and buffer little
		}
		req, _ := http.NewRequest(http.MethodPost, g.URL, strings.NewReader(body))
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		w := bufio.NewWriter(conn)
		if err := req.Write(w); err != nil || w.Flush() != nil {
			t.Fatalf("writing the request: %v", err)
		}
	}
	t.Run("forward bridge", func(t *testing.T) {
		up := newFailingLegacy(t)
		g := startGateway(t, up.block()+"\n\t\twrite_timeout 1s")
		base := g.goroutines(t)
		m := meta(modernVersion)
		m["progressToken"] = "flood"
		stall(t, g, modernHeaders(modernVersion, "tools/call", "flood"),
			rpcBody(t, 1, "tools/call", map[string]any{"name": "flood", "arguments": map[string]any{"n": 1000}, "_meta": m}))
		wait(t, up.ended, notHang, "end of the flooding tool")
		// The gateway abandoned the call: it ended the upstream session (a
		// completed call would have left it idle in the pool).
		up.await(t, "upstream sessions", func() int { return countSessions(up.server) })
		g.settled(t, base)
	})
	t.Run("pinned pass-through", func(t *testing.T) {
		up := newFailingLegacy(t)
		g := startGateway(t, up.block()+"\n\t\twrite_timeout 1s")
		base := g.goroutines(t)
		sid := openLegacySession(t, g.URL)
		stall(t, g, legacyHeaders(sid), `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"flood","arguments":{"n":1000},"_meta":{"progressToken":"p"}}}`)
		wait(t, up.ended, notHang, "end of the flooding tool")
		// The relay gave up: the upstream's answer is no longer being sent.
		up.await(t, "POSTs in flight upstream", func() int { return int(up.inflight.Load()) })
		g.settled(t, base)
	})
	t.Run("reverse bridge", func(t *testing.T) {
		up := newModernUpstream(t)
		g := startGateway(t, up.block()+"\n\t\twrite_timeout 1s")
		base := g.goroutines(t)
		sid, _ := initReverse(t, g.URL, "2025-11-25", `{}`, nil)
		stall(t, g, legacyHeaders(sid), `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"flood","arguments":{"n":1000},"_meta":{"progressToken":"p"}}}`)
		// The gateway gave up the upstream request, which stops the tool.
		if got := wait(t, up.ended, notHang, "end of the flooding tool"); !strings.HasPrefix(got, "flood: stopped") {
			t.Fatalf("the tool %s, want it stopped when the gateway let its request go", got)
		}
		g.settled(t, base)
	})
}

// TestFailureStopMidCall: `caddy stop` with a call streaming, of a modern
// client in front of either era, ends the client's stream with an error
// (in front of a legacy server, the call is cancelled upstream) and does
// not hold up the exit.
func TestFailureStopMidCall(t *testing.T) {
	t.Parallel()
	stop := func(t *testing.T, g *gateway, ended <-chan string) {
		t.Helper()
		resp := modernCall(t, g.URL, 1, "hold", map[string]any{}, nil)
		events := readSSE(resp.Body)
		nextData(t, events) // the upstream is working
		if took := g.stop(t); took > 5*time.Second {
			t.Fatalf("caddy stop took %v with a call open", took)
		}
		if final := awaitResponse(t, events, 1); !strings.Contains(final, `"code":-32603`) || !strings.Contains(final, "abandoned") {
			t.Fatalf("the stream ended with %q, want a -32603 error", final)
		}
		if ended == nil {
			return
		}
		if got := wait(t, ended, notHang, "end of the tool call"); got != "hold: cancelled" {
			t.Fatalf("the tool %s, want it cancelled", got)
		}
	}
	t.Run("forward bridge", func(t *testing.T) {
		up := newFailingLegacy(t)
		stop(t, startGateway(t, up.block()), up.ended)
	})
	t.Run("modern pass-through", func(t *testing.T) {
		// The upstream request is ended by closing its connection (the only
		// cancellation 2026-07-28 has over HTTP); the go-sdk's stateless
		// server does not cancel a tool for it, so only the client's side
		// is checked.
		up := newModernUpstream(t)
		stop(t, startGateway(t, up.block()), nil)
	})
}

// TestFailureRestartWithParkedCalls: calls parked when Caddy stops are
// cancelled upstream; their retries on a fresh process (same state_key) get
// a clear error, and nothing of them reaches the upstream.
func TestFailureRestartWithParkedCalls(t *testing.T) {
	t.Parallel()
	rs := newRecordingServer(t)
	block := "\t\tupstream " + rs.url + " {\n\t\t\tera legacy\n\t\t}\n\t\tstate_key " + testKey(7)
	g := startGateway(t, block)
	ir := parseInputRequired(t, askCall(t, g.URL, 1, "restart", nil, nil))
	g.stop(t)
	if got := wait(t, rs.answers, notHang, "answer at shutdown"); got != "cancel" {
		t.Fatalf("upstream got %q, want cancel", got)
	}
	if got := wait(t, rs.ended, notHang, "end of the tool call"); got != "cancelled" {
		t.Fatalf("tool call %s, want cancelled", got)
	}
	fresh := startGateway(t, block)
	before := rs.requests.Load()
	x := askCall(t, fresh.URL, 2, "restart", map[string]any{"inputResponses": map[string]any{"elicitation-1": acceptAnswer}, "requestState": ir.RequestState}, nil)
	if x.Status == http.StatusOK || x.Resp == nil || x.Resp.Error == nil {
		t.Fatalf("retry on a fresh process: %s, want a JSON-RPC error", x)
	}
	if after := rs.requests.Load(); after != before {
		t.Fatalf("the upstream received %d requests for the retry", after-before)
	}
}
