package translate

import "sync"

// PrincipalCount counts what principals hold of something bounded (GET
// streams, bytes of subscriptions), per principal and in all. It is safe
// for concurrent use.
type PrincipalCount struct {
	mu    sync.Mutex
	total int64
	of    map[[16]byte]int64
}

// NewPrincipalCount returns an empty count.
func NewPrincipalCount() *PrincipalCount {
	return &PrincipalCount{of: make(map[[16]byte]int64)}
}

// Which bound PrincipalCount.Take found in the way.
const (
	takenOK = iota
	RefusedInAll
	RefusedForPrincipal
)

// Take counts n more for principal, unless that would pass max in all
// (refusedInAll, looked at first) or maxPer of the principal's
// (refusedForPrincipal).
func (c *PrincipalCount) Take(principal [16]byte, n, max, maxPer int64) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.total+n > max:
		return RefusedInAll
	case c.of[principal]+n > maxPer:
		return RefusedForPrincipal
	}
	c.total += n
	c.of[principal] += n
	return takenOK
}

// Give counts n less for principal.
func (c *PrincipalCount) Give(principal [16]byte, n int64) {
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

// Held returns what is counted, in all and for principal.
func (c *PrincipalCount) Held(principal [16]byte) (total, of int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total, c.of[principal]
}
