package caddymodule

import (
	"crypto/sha256"
	"encoding/binary"
	"slices"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/tidwall/gjson"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
)

// discoverKind is the cache's kind of a merged server/discover (after
// the ListKinds).
const discoverKind byte = 0xff

// A merged page, or a merged server/discover, is kept for as long as its ttlMs says (the smallest of its
// parts'), and answered again from memory within it: for everyone when
// every part was `public`, else for the same principal only. The key is
// the list, the request's params but for the cursor, what the cursor
// opened to (each server's own cursor: a sealed token differs at every
// sealing) and, for a private page, the principal. The cursor on an
// answer is sealed anew for the principal asking.

const (
	listCacheEntries   = 256
	listCacheMaxResult = 1 << 20 // a larger page is not kept
)

// listEntry is a merged page kept.
type listEntry struct {
	result  []byte         // the merged result object, without nextCursor
	next    map[int]string // each server's nextCursor
	expires time.Time
}

// listCache is a block's merged pages.
type listCache struct {
	pages *lru.Cache[[32]byte, listEntry]
}

func newListCache() listCache {
	pages, _ := lru.New[[32]byte, listEntry](listCacheEntries) // only a size < 1 fails
	return listCache{pages: pages}
}

// listKey is the key of a page: public (zero principal) or princ's.
func listKey(kind byte, params gjson.Result, cursors map[int]string, princ [16]byte) [32]byte {
	h := sha256.New()
	h.Write([]byte{kind})
	h.Write(princ[:])
	h.Write([]byte(jsonrpc.RemoveMembers(orEmpty(params.Raw), "cursor")))
	servers := make([]int, 0, len(cursors))
	for i := range cursors {
		servers = append(servers, i)
	}
	slices.Sort(servers)
	var n [8]byte
	for _, i := range servers {
		binary.BigEndian.PutUint64(n[:], uint64(i))
		h.Write(n[:])
		binary.BigEndian.PutUint64(n[:], uint64(len(cursors[i])))
		h.Write(n[:])
		h.Write([]byte(cursors[i]))
	}
	var k [32]byte
	h.Sum(k[:0])
	return k
}

// get returns the page kept for the request: a public one, else princ's.
func (c *listCache) get(kind byte, params gjson.Result, cursors map[int]string, princ [16]byte, now time.Time) (listEntry, bool) {
	for _, p := range [][16]byte{{}, princ} {
		k := listKey(kind, params, cursors, p)
		if e, ok := c.pages.Get(k); ok {
			if now.Before(e.expires) {
				return e, true
			}
			c.pages.Remove(k)
		}
	}
	return listEntry{}, false
}

// put keeps a merged page for its ttlMs.
func (c *listCache) put(kind byte, params gjson.Result, cursors map[int]string, princ [16]byte, result []byte, next map[int]string, now time.Time) {
	res := gjson.ParseBytes(result)
	ttl := res.Get("ttlMs").Int()
	if ttl <= 0 || len(result) > listCacheMaxResult {
		return
	}
	if res.Get("cacheScope").String() == "public" {
		princ = [16]byte{}
	}
	c.pages.Add(listKey(kind, params, cursors, princ), listEntry{result: result, next: next, expires: now.Add(time.Duration(ttl) * time.Millisecond)})
}

func orEmpty(raw string) string {
	if raw == "" {
		return "{}"
	}
	return raw
}
