package forward

import (
	"context"
	"net/http"
	"time"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/legacy"
	lru "github.com/hashicorp/golang-lru/v2"
)

// Sessions primed for calls that leave. A call parked holding
// no stream takes its upstream session out of the pool; when its retry
// reaches another instance, that instance ends the session with the call,
// so the session never comes back here and the next call of the same
// principal and capabilities would initialize a new one while its client
// waits (initialize, notifications/initialized and the GET stream: three
// upstream round trips). Behind a balancer that is most calls. So, while
// retries of this instance's calls are seen to end elsewhere (a place
// found finished elsewhere within primeWindow, places.go), a park
// whose key (principal, upstream, capabilities) parked here before opens
// one idle session for that key in the background if the pool has none
// (legacy.Pool.Prime: never past the pool's or the principal's bound,
// never evicting; an idle session is closed after the pool's idle
// timeout). An instance whose retries come back to it opens none, nor
// does a principal's first park (a client that calls once would leave an
// idle session behind for nothing).

const (
	// primeWindow is how long after a place was found finished elsewhere
	// the instance keeps priming.
	primeWindow = time.Minute
	// primedKeys is how many keys that parked lately the instance
	// remembers (the least recent forgotten).
	primedKeys = 4096
)

func newParkedKeys() *lru.Cache[legacy.PoolKey, struct{}] {
	c, err := lru.New[legacy.PoolKey, struct{}](primedKeys)
	if err != nil {
		panic(err) // only for a size <= 0
	}
	return c
}

// primes reports whether a call of key parking now should leave a session
// ready for the next, and remembers that key parked.
func (b *Bridge) primes(key legacy.PoolKey) bool {
	seen, _ := b.parkedKeys.ContainsOrAdd(key, struct{}{})
	return seen && b.retriesGoElsewhere()
}

// retriesGoElsewhere reports whether a place of this instance was found
// finished on another instance within primeWindow.
func (b *Bridge) retriesGoElsewhere() bool {
	at := b.elsewhereAt.Load()
	return at != 0 && time.Since(time.Unix(0, at)) < primeWindow
}

// prime opens an idle session for key if the pool has none, with what the
// parked call opened its session with.
func (b *Bridge) prime(key legacy.PoolKey, header http.Header, clientInfo []byte, limits legacy.LeaseLimits) {
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	b.pool.Prime(ctx, key, header, []byte(key.Caps), clientInfo, limits)
}
