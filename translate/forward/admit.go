package forward

import (
	"net/http"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
)

// Admission to the parked table. Each options set (one mcp_gateway
// handler) bounds the calls it parks: MaxParked in all, and
// MaxParkedPerPrincipal for one principal. A call takes a place when it
// first parks and keeps it until it ends, across its rounds (while its
// client's retry runs it again too), so that a call already admitted is
// never turned away mid-way by a table that filled while it ran.
//
// A full table refuses the new call; it never makes room by ending another
// one. The principal is whatever the configuration says (by default the
// Authorization header, which a client chooses freely): evicting the
// oldest call would let anyone end everybody's calls by minting principals.
// A refused call is already running upstream (the legacy server asked its
// question in-line), so it is abandoned like any other: its questions are
// answered with a cancellation, the upstream gets notifications/cancelled
// and the session is ended. To spare the upstream even that, a call to a
// target known to ask for input (gatherPolicy.asked) is refused before it
// is sent when there is no room for it already; other calls go through and
// are refused only if they ask.
//
// At the per-principal bound the principal's own new call is refused too,
// rather than its oldest parked call ended: parked calls are all work in
// progress (a person is answering), unlike the idle sessions
// max_sessions_per_principal closes first, and with no authentication in
// front every anonymous client is one principal, so ending "its own"
// oldest call would again end a stranger's.
//
// Neither refusal carries Retry-After: a place frees when any parked call
// is answered (soon, or never) or expires (up to park_ttl), and no honest
// figure exists; the pool's 429 and 503 carry none either.

// parkSet counts the places held by the calls of one options set.
type parkSet struct {
	held   int
	byPrin map[[16]byte]int
}

// roomLocked returns the refusal of a new call of princ parked with o, or
// nil if it fits. sent says whether the call already runs upstream (it is
// then cancelled), for the message.
func (b *Bridge) roomLocked(o *Options, princ [16]byte, sent bool) *jsonrpc.RPCError {
	set := b.sets[o]
	if set == nil {
		return nil
	}
	what := sentWhat(sent)
	switch {
	case set.byPrin[princ] >= o.MaxParkedPerPrincipal:
		// The principal's own limit: 429, as max_sessions_per_principal.
		return &jsonrpc.RPCError{HTTPStatus: http.StatusTooManyRequests, Code: jsonrpc.InternalError,
			Message: "too many calls of this principal are waiting for input (max_parked_per_principal); " + what +
				": answer a waiting call, or retry when one ends"}
	case set.held >= o.MaxParked:
		return &jsonrpc.RPCError{HTTPStatus: http.StatusServiceUnavailable, Code: jsonrpc.InternalError,
			Message: "the gateway has too many calls waiting for input (max_parked); " + what + ": retry later"}
	}
	return nil
}

// sentWhat says, in a refusal, what became of the call: it was not sent,
// or (sent) it was cancelled.
func sentWhat(sent bool) string {
	if sent {
		return "the call was cancelled"
	}
	return "the call was not sent"
}

// room reports whether a new call of princ could park with o now, for a
// check before the call is sent (the park itself checks again).
func (b *Bridge) room(o *Options, princ [16]byte) *jsonrpc.RPCError {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.makeRoomLocked(o, princ, false)
}

// admitLocked gives c a place in its options' table, or returns the
// refusal (once places of calls that may have ended elsewhere were checked:
// makeRoomLocked, which releases b.mu meanwhile). A call that holds one
// already keeps it.
func (b *Bridge) admitLocked(c *call) *jsonrpc.RPCError {
	if c.placed {
		return nil
	}
	if rerr := b.makeRoomLocked(c.opts, c.princ, true); rerr != nil {
		return rerr
	}
	set := b.sets[c.opts]
	if set == nil {
		set = &parkSet{byPrin: make(map[[16]byte]int)}
		b.sets[c.opts] = set
	}
	set.held++
	set.byPrin[c.princ]++
	c.placed = true
	return nil
}

// release frees c's place, if it holds one: the call ended.
func (b *Bridge) release(c *call) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !c.placed {
		return
	}
	c.placed = false
	b.freeLocked(c.opts, c.princ)
}

// freeLocked frees a place of princ among the calls parked with o.
func (b *Bridge) freeLocked(o *Options, princ [16]byte) {
	set := b.sets[o]
	if set == nil {
		return // Close dropped the tables
	}
	set.held--
	if n := set.byPrin[princ] - 1; n > 0 {
		set.byPrin[princ] = n
	} else {
		delete(set.byPrin, princ)
	}
	if set.held == 0 {
		delete(b.sets, o)
	}
}

// roomBeforeStart refuses a first request whose target is known to ask for
// input when its call could not park: the table of its options is full, or
// its principal is at its bound. Other requests, and retries, go on.
func (b *Bridge) roomBeforeStart(r Request) *jsonrpc.RPCError {
	if !translate.InputCapable[r.Method] || !b.gather.asked(r.Upstream, r.Method, r.Name) {
		return nil
	}
	return b.room(r.Options, r.Principal)
}
