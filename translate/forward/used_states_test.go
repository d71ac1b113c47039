package forward

import (
	"strconv"
	"sync"
	"testing"
	"time"
)

func TestUsedStatesOnce(t *testing.T) {
	u := newUsedStates(10)
	now := time.Unix(1_800_000_000, 0)
	if !u.use("a", now.Add(time.Minute), now) {
		t.Fatal("first use refused")
	}
	if u.use("a", now.Add(time.Minute), now.Add(30*time.Second)) {
		t.Fatal("second use within expiry accepted")
	}
	if !u.use("b", now.Add(time.Minute), now) {
		t.Fatal("another state refused")
	}
	// Expired: forgotten (the state no longer opens anyway).
	if !u.use("a", now.Add(3*time.Minute), now.Add(2*time.Minute)) || u.len() != 1 {
		t.Fatalf("expired entry kept: %d", u.len())
	}
}

// TestUsedStatesSpelling: another base64 spelling of a used token (the
// unused low bits of its last character changed) is the same token.
func TestUsedStatesSpelling(t *testing.T) {
	u := newUsedStates(10)
	now := time.Unix(1_800_000_000, 0)
	token := "AAAB" + "AQ" // 4+2 chars: the last one has 4 unused bits
	if !u.use(token, now.Add(time.Minute), now) {
		t.Fatal("first use refused")
	}
	if u.use("AAAB"+"AR", now.Add(time.Minute), now) {
		t.Fatal("another spelling of a used token accepted")
	}
}

// TestUsedStatesBound: full, it forgets the state that expires first and
// keeps the others.
func TestUsedStatesBound(t *testing.T) {
	u := newUsedStates(3)
	now := time.Unix(1_800_000_000, 0)
	u.use("late", now.Add(time.Hour), now)
	u.use("soon", now.Add(time.Minute), now)
	u.use("mid", now.Add(10*time.Minute), now)
	u.use("new", now.Add(5*time.Minute), now)
	if u.len() != 3 {
		t.Fatalf("len %d", u.len())
	}
	for _, tok := range []string{"late", "mid", "new"} {
		if u.use(tok, now.Add(time.Hour), now) {
			t.Errorf("%s was forgotten", tok)
		}
	}
	if !u.use("soon", now.Add(time.Hour), now.Add(time.Second)) {
		t.Error("the soonest was kept")
	}
}

// TestUsedStatesConcurrent: of many concurrent uses of one state, exactly
// one wins (run with -race); the queue stays bounded as states expire.
func TestUsedStatesConcurrent(t *testing.T) {
	u := newUsedStates(1000)
	now := time.Unix(1_800_000_000, 0)
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins := 0
	for range 16 {
		wg.Go(func() {
			if u.use("x", now.Add(time.Minute), now) {
				mu.Lock()
				wins++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if wins != 1 {
		t.Fatalf("%d uses won", wins)
	}
	for i := range 10_000 {
		at := now.Add(time.Duration(i) * time.Second)
		u.use(strconv.Itoa(i), at.Add(time.Minute), at)
	}
	if u.len() > 61 || len(u.order)-u.head > 61 || len(u.order) > 4096 {
		t.Fatalf("not swept: %d live, queue %d from %d", u.len(), len(u.order), u.head)
	}
}
