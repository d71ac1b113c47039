package reverse

import (
	"container/list"
	"sync"
	"time"
)

// expiringTable is a bounded map whose entries expire: when full, the
// least recently written entry goes. The reverse bridge keeps caches in
// such tables (server/discover results, tools' x-mcp-header annotations),
// whose forgotten entries are only asked again, so that memory stays
// bounded whatever clients do; facts that must not be forgotten are in a
// factTable (facts.go). It is safe for concurrent use.
type expiringTable[K comparable, V any] struct {
	mu    sync.Mutex
	max   int
	items map[K]*list.Element
	order *list.List // of *tableEntry, least recently written first
}

type tableEntry[K comparable, V any] struct {
	key     K
	val     V
	expires time.Time
}

func newExpiringTable[K comparable, V any](max int) *expiringTable[K, V] {
	return &expiringTable[K, V]{max: max, items: make(map[K]*list.Element), order: list.New()}
}

// put stores val under key until expires, evicting the oldest entries (and
// any expired one found at the front) to stay within the bound.
func (t *expiringTable[K, V]) put(key K, val V, expires time.Time, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e, ok := t.items[key]; ok {
		t.order.Remove(e)
		delete(t.items, key)
	}
	for front := t.order.Front(); front != nil; front = t.order.Front() {
		ent := front.Value.(*tableEntry[K, V])
		if len(t.items) < t.max && now.Before(ent.expires) {
			break
		}
		t.order.Remove(front)
		delete(t.items, ent.key)
	}
	t.items[key] = t.order.PushBack(&tableEntry[K, V]{key: key, val: val, expires: expires})
}

// get returns the value under key if it has not expired.
func (t *expiringTable[K, V]) get(key K, now time.Time) (V, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var zero V
	e, ok := t.items[key]
	if !ok {
		return zero, false
	}
	ent := e.Value.(*tableEntry[K, V])
	if !now.Before(ent.expires) {
		t.order.Remove(e)
		delete(t.items, key)
		return zero, false
	}
	return ent.val, true
}

// len returns the number of entries, expired ones included.
func (t *expiringTable[K, V]) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.items)
}
