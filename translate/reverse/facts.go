package reverse

import (
	"container/heap"
	"net/http"
	"sync"
	"time"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
)

// This file is what one instance knows of a gateway-held session beyond
// its sealed id: its log level (logging/setLevel), its end (DELETE), its
// resource subscriptions and GET stream. One entry per session, kept until
// the session expires.
//
// The table is bounded, in all and per principal, and when full it refuses
// (503, 429) rather than forgets: a forgotten entry would be a wrong answer
// (a DELETEd session alive again, another session's log level reset, a live
// GET stream no longer told of its session's subscribes). Entries expire
// with their session (session_lifetime after initialize) and are swept
// in order of expiry.

// Bounds of the session facts of one instance (per process).
const (
	maxSessionFacts             = 100000
	maxSessionFactsPerPrincipal = 10000
)

// sessionFacts is one session's entry. Its fields are guarded by the
// table's lock, except subs, which guards itself.
type sessionFacts struct {
	id, principal [16]byte
	expires       time.Time
	index         int // in the table's heap

	level   string // logging/setLevel; "" when never set
	deleted bool   // DELETEd on this instance
	subs    *reverseSubscriptions
}

// factTable holds the sessionFacts of the sessions this instance has
// served. It is safe for concurrent use.
type factTable struct {
	mu              sync.Mutex
	max, perPrinMax int
	items           map[[16]byte]*sessionFacts
	byExpiry        factHeap
	perPrincipal    map[[16]byte]int
}

func newFactTable(max, perPrincipal int) *factTable {
	return &factTable{max: max, perPrinMax: perPrincipal,
		items: make(map[[16]byte]*sessionFacts), perPrincipal: make(map[[16]byte]int)}
}

// errFactsFull and errFactsPrincipalFull refuse a session's first fact
// when the table, or the principal's share of it, is full.
var (
	errFactsFull = &jsonrpc.RPCError{HTTPStatus: http.StatusServiceUnavailable, Code: jsonrpc.InternalError,
		Message: "the gateway holds the state of too many sessions; retry later, or initialize again later"}
	errFactsPrincipalFull = &jsonrpc.RPCError{HTTPStatus: http.StatusTooManyRequests, Code: jsonrpc.InternalError,
		Message: "too many sessions with state on this gateway for this principal; delete sessions no longer used, or wait for them to expire"}
)

// update runs fn on the entry of s (created when missing unless create is
// false: then fn runs only on an existing entry) under the table's lock.
// It refuses to create an entry when the table or the principal's share of
// it is full. Subscriptions of expired entries are released after.
func (t *factTable) update(id, principal [16]byte, expires, now time.Time, create bool, fn func(*sessionFacts)) *jsonrpc.RPCError {
	t.mu.Lock()
	dropped := t.sweep(now)
	f := t.items[id]
	var rerr *jsonrpc.RPCError
	switch {
	case f != nil:
		fn(f)
	case !create:
	case len(t.items) >= t.max:
		rerr = errFactsFull
	case t.perPrincipal[principal] >= t.perPrinMax:
		rerr = errFactsPrincipalFull
	default:
		f = &sessionFacts{id: id, principal: principal, expires: expires}
		t.items[id] = f
		t.perPrincipal[principal]++
		heap.Push(&t.byExpiry, f)
		fn(f)
	}
	t.mu.Unlock()
	releaseAll(dropped)
	return rerr
}

// view runs fn on the entry of id, if any, under the table's lock.
func (t *factTable) view(id [16]byte, now time.Time, fn func(*sessionFacts)) {
	t.mu.Lock()
	dropped := t.sweep(now)
	if f := t.items[id]; f != nil {
		fn(f)
	}
	t.mu.Unlock()
	releaseAll(dropped)
}

// tidy removes the entry of id when it holds nothing worth keeping: no
// level, no DELETE, no subscribed URI and no live GET stream (its
// subscriptions are then released, so that a request holding them takes
// the table's again). Only facts count toward the bounds, not sessions
// that merely opened a GET stream once.
func (t *factTable) tidy(id [16]byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	f := t.items[id]
	if f == nil || f.deleted || f.level != "" || f.subs != nil && !f.subs.retire() {
		return
	}
	heap.Remove(&t.byExpiry, f.index)
	t.forget(f)
}

// forget removes f from the map and its principal's count. t.mu is held.
func (t *factTable) forget(f *sessionFacts) {
	delete(t.items, f.id)
	if t.perPrincipal[f.principal]--; t.perPrincipal[f.principal] <= 0 {
		delete(t.perPrincipal, f.principal)
	}
}

// sweep removes the expired entries and returns their subscriptions, to
// release once the lock is let go. t.mu is held.
func (t *factTable) sweep(now time.Time) []*reverseSubscriptions {
	var dropped []*reverseSubscriptions
	for len(t.byExpiry) > 0 && !now.Before(t.byExpiry[0].expires) {
		f := heap.Pop(&t.byExpiry).(*sessionFacts)
		t.forget(f)
		if f.subs != nil {
			dropped = append(dropped, f.subs)
		}
	}
	return dropped
}

// len returns the number of entries.
func (t *factTable) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.items)
}

func releaseAll(subs []*reverseSubscriptions) {
	for _, st := range subs {
		st.release()
	}
}

// factHeap orders entries by expiry (container/heap).
type factHeap []*sessionFacts

func (h factHeap) Len() int           { return len(h) }
func (h factHeap) Less(i, j int) bool { return h[i].expires.Before(h[j].expires) }
func (h factHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}

func (h *factHeap) Push(x any) {
	f := x.(*sessionFacts)
	f.index = len(*h)
	*h = append(*h, f)
}

func (h *factHeap) Pop() any {
	old := *h
	f := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return f
}
