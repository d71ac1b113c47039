package translate

import "sync"

// principalCount counts what principals hold of something bounded (GET
// streams, bytes of subscriptions), per principal and in all. It is safe
// for concurrent use.
type principalCount struct {
	mu    sync.Mutex
	total int64
	of    map[[16]byte]int64
}

func newPrincipalCount() *principalCount {
	return &principalCount{of: make(map[[16]byte]int64)}
}

// Which bound principalCount.take found in the way.
const (
	takenOK = iota
	refusedInAll
	refusedForPrincipal
)

// take counts n more for principal, unless that would pass max in all
// (refusedInAll, looked at first) or maxPer of the principal's
// (refusedForPrincipal).
func (c *principalCount) take(principal [16]byte, n, max, maxPer int64) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.total+n > max:
		return refusedInAll
	case c.of[principal]+n > maxPer:
		return refusedForPrincipal
	}
	c.total += n
	c.of[principal] += n
	return takenOK
}

// give counts n less for principal.
func (c *principalCount) give(principal [16]byte, n int64) {
	if n == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.total -= n
	if c.of[principal] -= n; c.of[principal] <= 0 {
		delete(c.of, principal)
	}
}

// held returns what is counted, in all and for principal.
func (c *principalCount) held(principal [16]byte) (total, of int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total, c.of[principal]
}
