package reverse

import (
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
	"github.com/tidwall/gjson"
)

// This file is what a gateway-held session's resources/subscribe and
// resources/unsubscribe keep on this instance, for its GET stream
// (listen.go), and the bounds of it. A gateway-held session costs
// a client nothing to open (the gateway answers initialize itself), so
// what it keeps is bounded by bytes: per URI, per session, per principal
// and in all.

// Bounds of the subscriptions of gateway-held sessions (per process).
const (
	maxReverseSubscriptions = 256 // URIs per session

	// maxSubscribeURI is the longest URI a session may subscribe to, in
	// bytes; a longer one is refused with -32602.
	maxSubscribeURI = 8 << 10

	// A subscribed URI costs its length and subscriptionOverhead; a
	// session holds at most maxSubscriptionBytes (-32602), a principal
	// maxSubscriptionBytesPerPrincipal across its sessions (429) and the
	// process maxSubscriptionBytesTotal (503).
	subscriptionOverhead             = 64
	maxSubscriptionBytes             = 64 << 10
	maxSubscriptionBytesPerPrincipal = 4 << 20
	maxSubscriptionBytesTotal        = 64 << 20
)

// subscriptionBudget counts the bytes the sessions' subscriptions hold,
// per principal and in all.
type subscriptionBudget struct{ c *translate.PrincipalCount }

func newSubscriptionBudget() *subscriptionBudget {
	return &subscriptionBudget{translate.NewPrincipalCount()}
}

// take reserves n bytes for principal, or refuses.
func (b *subscriptionBudget) take(principal [16]byte, n int64) *jsonrpc.RPCError {
	switch b.c.Take(principal, n, maxSubscriptionBytesTotal, maxSubscriptionBytesPerPrincipal) {
	case translate.RefusedInAll:
		return &jsonrpc.RPCError{HTTPStatus: http.StatusServiceUnavailable, Code: jsonrpc.InternalError,
			Message: "the gateway holds too many resource subscriptions; retry later"}
	case translate.RefusedForPrincipal:
		return &jsonrpc.RPCError{HTTPStatus: http.StatusTooManyRequests, Code: jsonrpc.InternalError,
			Message: "too many resource subscriptions for this principal; unsubscribe, or delete sessions no longer used"}
	}
	return nil
}

// give returns n bytes of principal's.
func (b *subscriptionBudget) give(principal [16]byte, n int64) { b.c.Give(principal, n) }

// reverseSubscriptions is what this instance knows of a session's
// resources/subscribe calls, and its live GET stream.
type reverseSubscriptions struct {
	budget    *subscriptionBudget
	principal [16]byte
	wake      chan struct{} // a URI added, for the live stream (buffered, 1)
	ended     chan struct{} // closed when the session ends here (DELETE, expiry)

	mu        sync.Mutex
	listening bool // a GET stream is live
	uris      map[string]struct{}
	bytes     int64     // held against the budget
	heard     int64     // bytes of the client's subscribes and unsubscribes
	sent      int64     // bytes of the subscriptions/listen sent upstream (estimated: listenEnvelope and the URIs)
	lastOpen  time.Time // of the last upstream subscription with a new filter
	released  bool      // given back: the session ended, or they held nothing (tidy)
}

// subscriptionsOf returns the subscriptions of s, creating them, or the
// refusal of a full table. Its caller must check, under their lock, that
// they were not released meanwhile (then take them again).
func (rv *Bridge) subscriptionsOf(s *Session) (*reverseSubscriptions, *jsonrpc.RPCError) {
	now := time.Now()
	var st *reverseSubscriptions
	rerr := rv.facts.update(s.ID, s.Principal, rv.expiry(s), now, true, func(f *sessionFacts) {
		if f.subs == nil && !f.deleted {
			f.subs = &reverseSubscriptions{budget: rv.subBytes, principal: s.Principal,
				wake: make(chan struct{}, 1), ended: make(chan struct{}), uris: make(map[string]struct{})}
		}
		st = f.subs
	})
	if rerr == nil && st == nil {
		rerr = errSessionEnded
	}
	return st, rerr
}

// errSessionEnded refuses a request of a session that ended on this
// instance while it was served.
var errSessionEnded = &jsonrpc.RPCError{HTTPStatus: http.StatusNotFound, Code: -32001, Message: "Session not found"}

// subscribe records resources/subscribe (add) or unsubscribe of uri for s,
// a request of size bytes.
// Only a new URI wakes the GET stream: an unsubscribed URI leaves the
// upstream filter at its next change, and its notifications are dropped
// here meanwhile (subscribed).
func (rv *Bridge) subscribe(s *Session, uri string, add bool, size int) *jsonrpc.RPCError {
	if len(uri) > maxSubscribeURI {
		return jsonrpc.Errorf(http.StatusBadRequest, jsonrpc.InvalidParams, "Invalid params: uri longer than %d bytes", maxSubscribeURI)
	}
	var st *reverseSubscriptions
	for {
		var rerr *jsonrpc.RPCError
		if st, rerr = rv.subscriptionsOf(s); rerr != nil {
			return rerr
		}
		st.mu.Lock()
		if !st.released {
			break
		}
		st.mu.Unlock() // tidied away, or the session ended meanwhile: look again
	}
	defer rv.facts.tidy(s.ID) // after the unlock: an entry left empty goes
	defer st.mu.Unlock()
	cost := int64(len(uri) + subscriptionOverhead)
	_, has := st.uris[uri]
	switch {
	case add && !has && len(st.uris) >= maxReverseSubscriptions:
		return jsonrpc.Errorf(http.StatusBadRequest, jsonrpc.InvalidParams, "Invalid params: at most %d subscriptions per session", maxReverseSubscriptions)
	case add && !has && st.bytes+cost > maxSubscriptionBytes:
		return jsonrpc.Errorf(http.StatusBadRequest, jsonrpc.InvalidParams, "Invalid params: a session's subscribed URIs take at most %d bytes", maxSubscriptionBytes)
	case add && !has:
		if rerr := st.budget.take(st.principal, cost); rerr != nil {
			return rerr
		}
		st.uris[uri] = struct{}{}
		st.bytes += cost
		select {
		case st.wake <- struct{}{}:
		default:
		}
	case !add && has:
		delete(st.uris, uri)
		st.bytes -= cost
		st.budget.give(st.principal, cost)
	}
	st.heard += int64(size)
	return nil
}

// subscribed reports whether a notification of the listen stream is for
// the session: a notifications/resources/updated only for a URI it is
// subscribed to.
func (st *reverseSubscriptions) subscribed(msg []byte) bool {
	if gjson.GetBytes(msg, "method").Str != "notifications/resources/updated" {
		return true
	}
	uri := gjson.GetBytes(msg, "params.uri")
	st.mu.Lock()
	defer st.mu.Unlock()
	_, ok := st.uris[uri.Str]
	return ok
}

// listenEnvelope is about what a subscriptions/listen weighs besides its
// URIs (its _meta, the filter's flags, each URI's quotes).
const listenEnvelope = 512

// filterURIs returns the subscribed URIs, sorted, and the bytes of a
// subscriptions/listen carrying them (about).
func (st *reverseSubscriptions) filterURIs() ([]string, int64) {
	st.mu.Lock()
	defer st.mu.Unlock()
	uris := make([]string, 0, len(st.uris))
	n := int64(listenEnvelope)
	for u := range st.uris {
		uris = append(uris, u)
		n += int64(len(u) + 3)
	}
	slices.Sort(uris)
	return uris, n
}

// claim marks the live GET stream, unless there is one (false), or the
// subscriptions were released meanwhile (retry: take them
// again).
func (st *reverseSubscriptions) claim() (ok, retry bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	switch {
	case st.released:
		return false, true
	case st.listening:
		return false, false
	}
	st.listening = true
	return true, false
}

// unclaim marks the end of the live GET stream.
func (st *reverseSubscriptions) unclaim() {
	st.mu.Lock()
	st.listening = false
	st.mu.Unlock()
}

// retire marks subscriptions that hold nothing (no URI, no live stream)
// as no longer the session's, and reports whether it did.
func (st *reverseSubscriptions) retire() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.listening || len(st.uris) > 0 || st.released {
		return false
	}
	st.released = true
	return true
}

// release gives the subscriptions' bytes back and ends the live stream:
// the session ended on this instance (DELETE) or expired.
func (st *reverseSubscriptions) release() {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.released {
		return
	}
	st.released = true
	st.budget.give(st.principal, st.bytes)
	st.bytes, st.uris = 0, nil
	close(st.ended)
}
