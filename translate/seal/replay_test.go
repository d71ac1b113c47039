package seal

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestReplayFilter: single use, the bound, the floor, expiry.
func TestReplayFilter(t *testing.T) {
	c := NewReplayFilter(2)
	n := func(b byte) [16]byte { return [16]byte{b} }
	exp := testNow.Add(forwardTTL)
	if c.Use(n(1), exp, testNow) != nil || c.Use(n(2), exp, testNow) != nil {
		t.Fatal("the first two ids refused")
	}
	if err := c.Use(n(1), exp, testNow); !errors.Is(err, ErrReplayed) {
		t.Fatalf("a seen id: %v", err)
	}
	// Full: an id expiring no later than every remembered id is
	// refused (it could be one forgotten), a fresher one evicts the oldest.
	if err := c.Use(n(3), exp, testNow); !errors.Is(err, ErrReplayFloor) {
		t.Fatalf("a full cache, an id as old as the rest: %v, want ErrReplayFloor", err)
	}
	if err := c.Use(n(3), exp.Add(time.Millisecond), testNow); err != nil {
		t.Fatalf("a full cache, a fresher id: %v", err)
	}
	for _, b := range []byte{1, 2} {
		// Forgotten or not, an id of expiry exp is refused now.
		if err := c.Use(n(b), exp, testNow); err == nil {
			t.Fatalf("id %d accepted again after eviction", b)
		}
	}
	if err := c.Use(n(3), exp.Add(time.Millisecond), testNow); !errors.Is(err, ErrReplayed) {
		t.Fatalf("the fresher id again: %v, want ErrReplayed", err)
	}
	if err := c.Use(n(4), exp.Add(forwardTTL), exp.Add(time.Second)); err != nil {
		t.Fatalf("after the others expired: %v", err)
	}
	if len(c.seen) != 1 || c.byExp.Len() != 1 {
		t.Fatalf("expired ids kept: %d, %d", len(c.seen), c.byExp.Len())
	}
}

// TestReplayFilterForget: a forgotten id may be used again, the others
// stay used, and the heap stays in order.
func TestReplayFilterForget(t *testing.T) {
	c := NewReplayFilter(8)
	exp := testNow.Add(forwardTTL)
	for b := range byte(5) {
		if err := c.Use([16]byte{b}, exp.Add(time.Duration(5-b)*time.Second), testNow); err != nil {
			t.Fatal(err)
		}
	}
	c.Forget([16]byte{2})
	c.Forget([16]byte{42}) // never used: nothing to forget
	if c.Len() != 4 || c.byExp.Len() != 4 {
		t.Fatalf("after Forget: %d live, heap %d", c.Len(), c.byExp.Len())
	}
	if err := c.Use([16]byte{2}, exp.Add(3*time.Second), testNow); err != nil {
		t.Fatalf("a forgotten id: %v", err)
	}
	for b := range byte(5) {
		if err := c.Use([16]byte{b}, exp.Add(time.Duration(5-b)*time.Second), testNow); !errors.Is(err, ErrReplayed) {
			t.Fatalf("id %d: %v, want ErrReplayed", b, err)
		}
	}
	for i := 1; i < c.byExp.Len(); i++ {
		if c.byExp.Less(i, (i-1)/2) {
			t.Fatalf("heap out of order at %d", i)
		}
	}
}

// TestReplayFilterConcurrent: of many concurrent uses of one id, exactly
// one wins (run with -race); ids that expired are forgotten as time passes,
// so a steady stream of ids keeps the filter at what is live.
func TestReplayFilterConcurrent(t *testing.T) {
	c := NewReplayFilter(1000)
	var wg sync.WaitGroup
	var wins atomic.Int32
	for range 16 {
		wg.Go(func() {
			if c.Use([16]byte{9}, testNow.Add(time.Minute), testNow) == nil {
				wins.Add(1)
			}
		})
	}
	wg.Wait()
	if wins.Load() != 1 {
		t.Fatalf("%d uses won", wins.Load())
	}
	for i := range 10_000 {
		at := testNow.Add(time.Duration(i) * time.Second)
		if err := c.Use([16]byte{byte(i), byte(i >> 8), 1}, at.Add(time.Minute), at); err != nil {
			t.Fatalf("id %d: %v", i, err)
		}
	}
	if c.Len() > 61 || c.byExp.Len() > 61 {
		t.Fatalf("not swept: %d live, heap %d", c.Len(), c.byExp.Len())
	}
}
