package translate

import (
	"net/http"
	"sync"
)

// This file bounds the GET streams of gateway-held sessions: each holds an
// upstream subscriptions/listen (one connection, more while its filter
// changes), and a gateway-held session costs nothing to open, so their
// number is bounded per principal (max_get_streams_per_principal, 429) and
// in all (max_get_streams, 503), per process.

// streamCount counts the open GET streams, per principal and in all. It is
// safe for concurrent use.
type streamCount struct {
	mu           sync.Mutex
	total        int
	perPrincipal map[[16]byte]int
}

func newStreamCount() *streamCount {
	return &streamCount{perPrincipal: make(map[[16]byte]int)}
}

// enter counts a new stream of principal, or refuses it when max streams
// are open in all or maxPer of the principal's; leave uncounts it.
func (c *streamCount) enter(principal [16]byte, max, maxPer int) (leave func(), rerr *RPCError) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.total >= max:
		return nil, &RPCError{HTTPStatus: http.StatusServiceUnavailable, Code: InternalError,
			Message: "the gateway has too many GET streams open (max_get_streams); retry later"}
	case c.perPrincipal[principal] >= maxPer:
		return nil, &RPCError{HTTPStatus: http.StatusTooManyRequests, Code: InternalError,
			Message: "too many GET streams open for this principal (max_get_streams_per_principal); close one"}
	}
	c.total++
	c.perPrincipal[principal]++
	var once sync.Once
	return func() {
		once.Do(func() {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.total--
			if c.perPrincipal[principal]--; c.perPrincipal[principal] <= 0 {
				delete(c.perPrincipal, principal)
			}
		})
	}, nil
}

// open returns the number of open streams, in all and of principal.
func (c *streamCount) open(principal [16]byte) (total, of int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total, c.perPrincipal[principal]
}
