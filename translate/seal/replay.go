package seal

import (
	"container/heap"
	"errors"
	"sync"
	"time"
)

// Errors of ReplayFilter.Use.
var (
	// ErrReplayed: the id was used before and has not expired.
	ErrReplayed = errors.New("already used")
	// ErrReplayFloor: the id expires no later than ids the full filter
	// forgot; it may be one of them, so it is refused. A fresher one passes.
	ErrReplayFloor = errors.New("older than the ids still remembered")
)

// ReplayFilter makes single-use what a gateway instance accepts once: the
// nonces of forwarding headers, the resumable requestStates a retry used.
// It remembers each id until its expiry, and is bounded without opening a
// replay window and without letting a flood deny service to fresh ids:
// when full, it forgets the ids that expire soonest and raises a floor to
// their expiry; an id expiring at or before the floor is refused
// (ErrReplayFloor: it may be one of those forgotten), while fresh ids,
// which expire later than every id remembered, keep passing. An id is
// refused only during a flood, and only when it is older than the filter's
// window (its size over the rate of ids). Safe for concurrent use.
type ReplayFilter struct {
	mu    sync.Mutex
	max   int
	seen  map[[16]byte]struct{}
	byExp replayHeap // soonest expiry first
	floor time.Time  // the latest expiry forgotten while still live
}

type replayEntry struct {
	id      [16]byte
	expires time.Time
}

// replayHeap is a min-heap of ids by expiry (container/heap): ids do not
// arrive in the order they expire (forwarders' clocks differ; a
// requestState is retried any time before its expiry).
type replayHeap []replayEntry

func (h replayHeap) Len() int           { return len(h) }
func (h replayHeap) Less(i, j int) bool { return h[i].expires.Before(h[j].expires) }
func (h replayHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *replayHeap) Push(x any)        { *h = append(*h, x.(replayEntry)) }
func (h *replayHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// NewReplayFilter returns a filter of at most size live ids (at least 1).
func NewReplayFilter(size int) *ReplayFilter {
	return &ReplayFilter{max: max(size, 1), seen: make(map[[16]byte]struct{})}
}

// Use records id as used until expires. It returns nil the first time,
// ErrReplayed while id is remembered, and ErrReplayFloor when id may have
// been forgotten (see ReplayFilter).
func (c *ReplayFilter) Use(id [16]byte, expires, now time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.byExp) > 0 && !now.Before(c.byExp[0].expires) {
		delete(c.seen, heap.Pop(&c.byExp).(replayEntry).id)
	}
	if _, ok := c.seen[id]; ok {
		return ErrReplayed
	}
	if !expires.After(c.floor) {
		return ErrReplayFloor
	}
	if len(c.seen) >= c.max {
		oldest := c.byExp[0]
		if !expires.After(oldest.expires) {
			return ErrReplayFloor
		}
		heap.Pop(&c.byExp)
		delete(c.seen, oldest.id)
		if oldest.expires.After(c.floor) {
			c.floor = oldest.expires
		}
	}
	c.seen[id] = struct{}{}
	heap.Push(&c.byExp, replayEntry{id: id, expires: expires})
	return nil
}

// Forget forgets id, so that it may be used again: for a use whose
// purpose was not carried out after all (its record elsewhere failed).
func (c *ReplayFilter) Forget(id [16]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.seen[id]; !ok {
		return
	}
	delete(c.seen, id)
	for i, e := range c.byExp {
		if e.id == id {
			heap.Remove(&c.byExp, i)
			return
		}
	}
}

// Len is how many ids the filter remembers.
func (c *ReplayFilter) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.seen)
}
