package forward

import (
	"crypto/sha256"
	"encoding/base64"
	"sync"
	"time"
)

// usedStates remembers, on one instance, the resumable requestStates a
// retry already used, until they expire: such a state names no table
// entry that its first use could take, so this is what makes it single
// use on the instance. Another instance sharing the key does not know of
// it (docs/security.md: what a replay elsewhere can and cannot do).
// It holds at most max states; when full, it forgets the one that
// expires first, after those already expired. Safe for concurrent use.
type usedStates struct {
	mu    sync.Mutex
	max   int
	seen  map[[16]byte]int64 // state hash → expiry, Unix ns
	order []usedEntry        // in the order of use, from head
	head  int
}

type usedEntry struct {
	key     [16]byte
	expires int64
}

// defaultUsedStates bounds the filter: 24 bytes of key and expiry and
// about as much of map and queue per entry, some 5 MiB when full.
const defaultUsedStates = 100_000

func newUsedStates(max int) *usedStates {
	return &usedStates{max: max, seen: make(map[[16]byte]int64)}
}

// use records token as used until expires, and reports whether it was
// unused.
//
// The token's bytes are hashed, not its text: base64 has several texts for
// one token (the unused bits of its last character), and each would open.
func (u *usedStates) use(token string, expires, now time.Time) bool {
	raw, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		raw = []byte(token)
	}
	sum := sha256.Sum256(raw)
	var key [16]byte
	copy(key[:], sum[:])
	u.mu.Lock()
	defer u.mu.Unlock()
	u.sweepLocked(now.UnixNano())
	if exp, ok := u.seen[key]; ok && exp > now.UnixNano() {
		return false
	}
	for len(u.seen) >= u.max {
		u.dropLocked(u.soonestLocked())
	}
	u.seen[key] = expires.UnixNano()
	u.order = append(u.order, usedEntry{key, expires.UnixNano()})
	return true
}

// sweepLocked forgets the expired states at the head of the queue (states
// are used in about the order they expire: one park_ttl after their
// park), and compacts the queue when its head is mostly spent.
func (u *usedStates) sweepLocked(now int64) {
	for u.head < len(u.order) && u.order[u.head].expires <= now {
		e := u.order[u.head]
		if u.seen[e.key] == e.expires {
			delete(u.seen, e.key)
		}
		u.head++
	}
	if u.head > 1024 && u.head*2 > len(u.order) {
		u.order = append(u.order[:0], u.order[u.head:]...)
		u.head = 0
	}
}

// soonestLocked is the index in order of the live entry that expires
// first.
func (u *usedStates) soonestLocked() int {
	best := -1
	for i := u.head; i < len(u.order); i++ {
		e := u.order[i]
		if u.seen[e.key] != e.expires {
			continue
		}
		if best < 0 || e.expires < u.order[best].expires {
			best = i
		}
	}
	return best
}

func (u *usedStates) dropLocked(i int) {
	if i < 0 { // cannot happen: seen is not empty
		clear(u.seen)
		u.order, u.head = u.order[:0], 0
		return
	}
	delete(u.seen, u.order[i].key)
	u.order[i].expires = -1 // a tombstone: never matches seen again
}

// len is how many states it remembers.
func (u *usedStates) len() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.seen)
}
