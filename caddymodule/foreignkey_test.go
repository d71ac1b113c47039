package caddymodule

import (
	"testing"
	"time"
)

// TestEveryLimiter: one event per period is allowed, and the next allowed
// one says how many were not.
func TestEveryLimiter(t *testing.T) {
	l := &everyLimiter{every: 10 * time.Second}
	t0 := time.Unix(1000, 0)
	for _, c := range []struct {
		at      time.Duration
		ok      bool
		skipped int64
	}{
		{0, true, 0},
		{time.Second, false, 0},
		{9 * time.Second, false, 0},
		{10 * time.Second, true, 2},
		{15 * time.Second, false, 0},
		{21 * time.Second, true, 1},
	} {
		ok, skipped := l.allow(t0.Add(c.at))
		if ok != c.ok || skipped != c.skipped {
			t.Errorf("at %v: %v, %d; want %v, %d", c.at, ok, skipped, c.ok, c.skipped)
		}
	}
}
