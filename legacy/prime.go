package legacy

import (
	"context"
	"net/http"
)

// Prime opens, when key has no idle session, one more session for it and
// keeps it idle, so that the next Lease of key finds one ready instead of
// initializing a session while its caller waits. It is for a session that
// left the pool for a while (a call parked holding no stream keeps its
// session until the retry, which may come to another instance and end the
// session there). Unlike Lease, it never closes another session to make
// room: it does nothing when the pool or the key's principal is at its
// bound (limits.MaxPerPrincipal), when one is already being opened for
// key, or when the upstream refuses. It reports whether it opened one.
func (p *Pool) Prime(ctx context.Context, key PoolKey, header http.Header, caps, clientInfo []byte, limits LeaseLimits) bool {
	p.mu.Lock()
	if p.closed || p.idle[key] != nil || p.priming[key] || p.open >= p.opts.MaxSessions ||
		(limits.MaxPerPrincipal > 0 && p.byPrin[key.Principal] >= limits.MaxPerPrincipal) {
		p.mu.Unlock()
		return false
	}
	p.priming[key] = true
	p.countLocked(key, 1)
	p.mu.Unlock()
	s, err := p.openCounted(ctx, key, header, caps, clientInfo)
	p.mu.Lock()
	delete(p.priming, key)
	closed := p.closed
	p.mu.Unlock()
	if err != nil {
		return false
	}
	// Idle in the pool, or, if it closed meanwhile, ended at once.
	p.Release(key, s, !closed)
	return !closed
}
