package tests

// The limits, through a real Caddy: configured in the Caddyfile, enforced
// with a clear error, and leaving nothing behind.

import (
	"net/http"
	"strings"
	"testing"
)

// cancelled reports whether a tool of failingLegacy ended as an abandoned
// call does: its question answered with a cancellation, or (the go-sdk may
// see notifications/cancelled before that answer) its context cancelled.
func cancelled(ended string) bool {
	return strings.HasSuffix(ended, ": cancel") || strings.HasSuffix(ended, "context canceled")
}

// TestLimits: max_rounds, max_inputs_per_round, max_sessions_per_principal
// and max_buffered_notifications.
func TestLimits(t *testing.T) {
	t.Parallel()
	t.Run("max_rounds", func(t *testing.T) {
		up := newFailingLegacy(t)
		g := startGateway(t, up.block()+"\n\t\tmax_rounds 1")
		base := g.goroutines(t)
		ir := parseInputRequired(t, readRPC(t, modernCall(t, g.URL, 1, "ask", map[string]any{}, nil), 1))
		// An invalid answer would be asked again, in a second round.
		bad := map[string]any{"inputResponses": map[string]any{"elicitation-1": map[string]any{"action": "maybe"}}, "requestState": ir.RequestState}
		x := readRPC(t, modernCall(t, g.URL, 2, "ask", map[string]any{}, bad), 2)
		if r := checkRPCError(t, x, http.StatusBadGateway, -32603, 2); r != nil && !strings.Contains(r.Error.Message, "max_rounds") {
			t.Fatalf("message %q, want it to name max_rounds", r.Error.Message)
		}
		if got := wait(t, up.ended, notHang, "end of the tool call"); !cancelled(got) {
			t.Fatalf("the tool %s, want its question cancelled", got)
		}
		g.settled(t, base)
	})
	t.Run("max_inputs_per_round", func(t *testing.T) {
		up := newFailingLegacy(t)
		// gather always: the three questions are asked in the first round.
		block := strings.Replace(up.block(), "era legacy", "era legacy\n\t\t\tgather always", 1)
		g := startGateway(t, block+"\n\t\tmax_inputs_per_round 2\n\t\tgather_window 300ms")
		base := g.goroutines(t)
		x := readRPC(t, modernCall(t, g.URL, 1, "many", map[string]any{"n": 3}, nil), 1)
		if r := checkRPCError(t, x, http.StatusBadGateway, -32603, 1); r != nil && !strings.Contains(r.Error.Message, "max_inputs_per_round") {
			t.Fatalf("message %q, want it to name max_inputs_per_round", r.Error.Message)
		}
		wait(t, up.ended, notHang, "end of the tool call")
		// The call was abandoned: its upstream session ended.
		up.await(t, "upstream sessions", func() int { return countSessions(up.server) })
		g.settled(t, base)

		modern := newModernUpstream(t)
		gm := startGateway(t, modern.block()+"\n\t\tmax_inputs_per_round 2")
		sid, _ := initReverse(t, gm.URL, "2025-11-25", `{"elicitation":{}}`, nil)
		resp := post(t, gm.URL, legacyHeaders(sid), `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"many","arguments":{"n":3}}}`)
		if x := readRPC(t, resp, 2); !strings.Contains(x.Raw, `"isError":true`) || !strings.Contains(x.Raw, "max_inputs_per_round") {
			t.Fatalf("reverse bridge: %s, want an isError result naming max_inputs_per_round", x)
		}
	})
	t.Run("max_sessions_per_principal", func(t *testing.T) {
		up := newFailingLegacy(t)
		g := startGateway(t, up.block()+"\n\t\tmax_sessions_per_principal 1")
		as := func(id int, who string) rpcExchange {
			hdr := modernHeaders(modernVersion, "tools/call", "ask")
			hdr["Authorization"] = "Bearer " + who
			m := meta(modernVersion)
			m["io.modelcontextprotocol/clientCapabilities"] = map[string]any{"elicitation": map[string]any{}}
			return postRPC(t, g.URL, hdr, rpcBody(t, id, "tools/call", map[string]any{"name": "ask", "arguments": map[string]any{}, "_meta": m}), id)
		}
		parseInputRequired(t, as(1, "alice")) // alice's one session is parked
		if r := checkRPCError(t, as(2, "alice"), http.StatusTooManyRequests, -32603, 2); r != nil && !strings.Contains(r.Error.Message, "max_sessions_per_principal") {
			t.Fatalf("message %q, want it to name max_sessions_per_principal", r.Error.Message)
		}
		parseInputRequired(t, as(3, "bob"))
	})
	t.Run("max_buffered_notifications", func(t *testing.T) {
		up := newFailingLegacy(t)
		g := startGateway(t, up.block()+"\n\t\tmax_buffered_notifications 8")
		base := g.goroutines(t)
		ir := parseInputRequired(t, readRPC(t, modernCall(t, g.URL, 1, "chatter", map[string]any{}, nil), 1))
		// 50 notifications arrive while the call is parked: it is
		// abandoned then and there, its question cancelled.
		up.parked <- struct{}{}
		if got := wait(t, up.ended, notHang, "end of the tool call"); !cancelled(got) {
			t.Fatalf("the tool %s, want its question cancelled", got)
		}
		up.await(t, "upstream sessions", func() int { return countSessions(up.server) })
		g.settled(t, base)
		retry := map[string]any{"inputResponses": map[string]any{"elicitation-1": map[string]any{"action": "accept", "content": map[string]any{}}}, "requestState": ir.RequestState}
		checkRPCError(t, readRPC(t, modernCall(t, g.URL, 2, "chatter", map[string]any{}, retry), 2), http.StatusBadRequest, -32602, 2)
	})
}
