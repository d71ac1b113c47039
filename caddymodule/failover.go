package caddymodule

import (
	"net/http"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/forward"
	"go.uber.org/zap"
)

// Failover among upstreams: a request whose upstream could not take it
// (nothing of it reached the upstream, or an idempotent one got no answer)
// moves to another upstream of the era it needs, the same way wherever that
// happens: pass-through (forward's exchange.failover), a forward-bridge
// session being opened (bridgeFailover), a reverse-bridge initialize
// (initializeReverse). What went wrong, which the client reads only in
// general terms, is logged here.

// failover is one request's moves among upstreams.
type failover struct {
	h    *Handler
	w    http.ResponseWriter
	r    *http.Request
	want eraSet
	// what the upstream could not do, for the log ("take the request",
	// "open a session").
	what string
	// follow: the request's route names the upstream from the start (the
	// bridges), so it follows the moves; pass-through's names the one that
	// answered (forward sets it).
	follow bool
	tried  []*Upstream
}

// newFailover starts the failover of r, which needs an upstream speaking
// want.
func (h *Handler) newFailover(w http.ResponseWriter, r *http.Request, want eraSet, what string, follow bool) *failover {
	return &failover{h: h, w: w, r: r, want: want, what: what, follow: follow}
}

// next is called when up could not take the request (cause): it counts a
// passive failure of up (which marks it down at max_fails), logs it, and
// returns another upstream the selection policy picks among those of the
// era the request needs, never one it already tried; nil when none is left.
func (f *failover) next(up *Upstream, cause error) *Upstream {
	f.h.countFailure(up, "connection", cause)
	f.h.logger.Warn("upstream could not "+f.what+"; trying another", zap.String("upstream", up.URL), zap.Error(cause))
	f.tried = append(f.tried, up)
	next := f.h.selectUpstream(f.r, f.w, f.want, f.tried...)
	if next != nil && f.follow {
		routeOf(f.r).up = next
	}
	return next
}

// bridgeFailover returns breq's Failover: the upstream *up that could not
// open a session (nothing of the request reached it) is given up for
// another legacy upstream (failover.next), whose Target breq then
// carries. *up follows the moves.
func (h *Handler) bridgeFailover(w http.ResponseWriter, r *http.Request, up **Upstream) func(*forward.Request, error) bool {
	f := h.newFailover(w, r, speaksLegacy, "open a session", true)
	return func(breq *forward.Request, cause error) bool {
		next := f.next(*up, cause)
		if next == nil {
			return false
		}
		*up = next
		breq.Target = next.target
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
