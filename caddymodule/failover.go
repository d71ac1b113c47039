package caddymodule

import (
	"net/http"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/forward"
	"go.uber.org/zap"
)

// The bridges' side of upstream failures: a new forward-bridge session
// that could not be opened moves to another upstream, as the pass-through
// cells' new sessions and requests do (forward's reselect); and what went
// wrong, which the client reads only in general terms, is logged here.

// aim points breq at up, with up's per-upstream options.
func aim(breq *forward.Request, up *Upstream) {
	breq.Upstream, breq.GatherAlways = up.URL, up.Gather == gatherAlways
	breq.NoGetStream = up.GetStream == "off"
	breq.Resume = up.Resume != "off"
}

// bridgeFailover returns breq's Failover: the upstream *up that could not
// open a session (nothing of the request reached it) is marked down, and
// breq moves to another legacy upstream the selection policy picks, never
// one it already tried. *up follows the moves.
func (h *Handler) bridgeFailover(w http.ResponseWriter, r *http.Request, up **Upstream) func(*forward.Request, error) bool {
	var tried []*Upstream
	return func(breq *forward.Request, cause error) bool {
		h.countFailure(*up, "connection", cause)
		h.logger.Warn("upstream could not open a session; trying another", zap.String("upstream", (*up).URL), zap.Error(cause))
		tried = append(tried, *up)
		next := h.selectUpstream(r, w, speaksLegacy, tried...)
		if next == nil {
			return false
		}
		*up = next
		aim(breq, next)
		routeOf(r).up = next
		return true
	}
}

// logUpstreamCause logs, at warn level, the upstream failure behind an
// error a bridge answered (translate.Served.Cause, jsonrpc.RPCError.Cause):
// the client was told in general terms; the address and the transport's
// words are the operator's.
func (h *Handler) logUpstreamCause(upstream string, cause error) {
	if cause != nil {
		h.logger.Warn("upstream failed", zap.String("upstream", upstream), zap.Error(cause))
	}
}
