package legacy

import (
	"container/list"
	"context"
	"errors"
	"net/http"
	"sync"
	"time"
)

// PoolKey says which upstream sessions are interchangeable: same upstream,
// same principal, same declared client capabilities. A legacy server fixes
// a session's capabilities at initialize, so a stateless client is only ever
// given a session initialized with exactly what it declared, and never one
// of another principal.
type PoolKey struct {
	Upstream  string
	Principal string // an opaque hash, never the credential itself
	// Credential is an opaque hash of the Authorization the session sends
	// upstream (never the credential itself): a session opened with one
	// credential (a principal's exchanged token, a client's own) never
	// serves a request that carries another.
	Credential string
	Caps       string // canonical JSON of the declared capabilities
	// NoGetStream: the session opens no standalone GET stream (see Open).
	NoGetStream bool
	// Client, if set, makes the requests of the session instead of the
	// pool's (PoolOptions.Client): sessions opened through different
	// clients (another TLS identity, another trust pool) are never
	// interchangeable. It must be comparable (a pointer).
	Client Doer
}

// ErrPoolFull is returned when no session can be opened because the pool
// holds its maximum and none is idle.
var ErrPoolFull = errors.New("too many upstream sessions")

// ErrPrincipalFull is returned when no session can be opened because the
// principal holds MaxPerPrincipal sessions and none of them is idle.
var ErrPrincipalFull = errors.New("too many upstream sessions for this principal")

// PoolOptions bound a Pool.
type PoolOptions struct {
	// MaxSessions bounds the sessions open at once (leased and idle).
	MaxSessions int
	// IdleTimeout closes sessions unused for this long.
	IdleTimeout time.Duration
	// MaxUses retires a session once it has been leased (and released)
	// this many times: it is closed at that release instead of kept. An
	// upstream keeps what a session's calls left behind until the session
	// ends — the go-sdk's MemoryEventStore every call's stream (purging
	// the oldest event of every stream, active ones included, once all
	// sessions together hold 10 MiB, after which their calls cannot be
	// resumed), the TypeScript SDK's example store every event — so a
	// session reused without end makes the upstream grow, then fail. 0
	// means no bound.
	MaxUses int
	// Client makes the upstream requests.
	Client Doer
}

// Pool holds upstream legacy sessions for stateless clients. A session is
// leased exclusively: while a call holds it, every request the upstream
// makes on it belongs to that call.
type Pool struct {
	opts PoolOptions

	mu     sync.Mutex
	idle   map[PoolKey]*list.List // of *Session, most recently used at the back
	lru    *list.List             // of *idleEntry across keys, oldest at the front
	open   int
	openBy map[string]int    // open sessions per upstream URL
	byPrin map[string]int    // open sessions per principal
	inits  map[string]uint64 // sessions ever initialized per upstream URL
	// priming: a session is being opened for the key by Prime.
	priming map[PoolKey]bool
	closed  bool
	// closing counts the sessions Release is ending in the background:
	// Close waits for them, so that a process exiting after its calls
	// ended does not leave their sessions, and the handlers of calls the
	// upstream took no cancellation for, open upstream.
	closing sync.WaitGroup
}

type idleEntry struct {
	key     PoolKey
	sess    *Session
	elem    *list.Element // in idle[key]
	lruElem *list.Element // in lru
}

// NewPool returns an empty pool.
func NewPool(opts PoolOptions) *Pool {
	return &Pool{opts: opts, idle: make(map[PoolKey]*list.List), lru: list.New(), openBy: make(map[string]int), byPrin: make(map[string]int),
		inits: make(map[string]uint64), priming: make(map[PoolKey]bool)}
}

// LeaseLimits are the limits of one lease, set by whoever asks for it (the
// configuration serving the call): two leases of one pool may carry
// different limits.
type LeaseLimits struct {
	// MaxPerPrincipal bounds the open sessions of the key's principal in
	// the pool, across upstreams and capability sets: at the bound, the
	// principal's least recently used idle session is closed to make room,
	// or the lease is refused (ErrPrincipalFull) when none is idle. 0 means
	// no bound of its own.
	MaxPerPrincipal int
	// CallBuffer is how many messages a call of the leased session holds
	// while nobody reads it (see Call); 0 means DefaultCallBuffer.
	CallBuffer int
}

// Lease returns an idle session for key, or opens one with caps and
// clientInfo, sending header (e.g. the client's Authorization) with its
// requests, within limits. The caller must Release it.
func (p *Pool) Lease(ctx context.Context, key PoolKey, header http.Header, caps, clientInfo []byte, limits LeaseLimits) (*Session, error) {
	buffer := int32(min(max(limits.CallBuffer, 0), 1<<16))
	p.mu.Lock()
	if s := p.takeIdleLocked(key); s != nil {
		p.mu.Unlock()
		s.buffer.Store(buffer) // the calls of this lease
		return s, nil
	}
	var evicted []*Session
	if limit := limits.MaxPerPrincipal; limit > 0 && p.byPrin[key.Principal] >= limit {
		// Make room by closing this principal's least recently used idle
		// session; another principal's are not touched.
		e := p.oldestIdleLocked(func(e *idleEntry) bool { return e.key.Principal == key.Principal })
		if e == nil {
			p.mu.Unlock()
			return nil, ErrPrincipalFull
		}
		evicted = append(evicted, p.dropIdleLocked(e))
	}
	if p.open >= p.opts.MaxSessions {
		// Make room by closing the least recently used idle session.
		e := p.oldestIdleLocked(func(*idleEntry) bool { return true })
		if e == nil {
			p.mu.Unlock()
			for _, s := range evicted {
				go s.Close(context.Background())
			}
			return nil, ErrPoolFull
		}
		evicted = append(evicted, p.dropIdleLocked(e))
	}
	p.countLocked(key, 1)
	p.mu.Unlock()
	for _, s := range evicted {
		go s.Close(context.Background())
	}
	s, err := p.openCounted(ctx, key, header, caps, clientInfo)
	if err != nil {
		return nil, err
	}
	s.buffer.Store(buffer)
	return s, nil
}

// openCounted opens a session for key, which the caller counted already
// (countLocked): it is uncounted if the upstream refuses, and counted
// among the upstream's initializations if not.
func (p *Pool) openCounted(ctx context.Context, key PoolKey, header http.Header, caps, clientInfo []byte) (*Session, error) {
	s, err := Open(ctx, p.Client(key), key.Upstream, header, caps, clientInfo, !key.NoGetStream)
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		p.countLocked(key, -1)
		return nil, err
	}
	p.inits[key.Upstream]++
	return s, nil
}

// oldestIdleLocked returns the least recently used idle entry that match
// accepts, or nil.
func (p *Pool) oldestIdleLocked(match func(*idleEntry) bool) *idleEntry {
	for el := p.lru.Front(); el != nil; el = el.Next() {
		if e := el.Value.(*idleEntry); match(e) {
			return e
		}
	}
	return nil
}

// dropIdleLocked removes an idle entry and uncounts its session, which the
// caller closes.
func (p *Pool) dropIdleLocked(e *idleEntry) *Session {
	p.removeIdleLocked(e)
	p.countLocked(e.key, -1)
	return e.sess
}

// countLocked records delta sessions opened (or closed) for key.
func (p *Pool) countLocked(key PoolKey, delta int) {
	p.open += delta
	for _, c := range []struct {
		m map[string]int
		k string
	}{{p.openBy, key.Upstream}, {p.byPrin, key.Principal}} {
		if n := c.m[c.k] + delta; n > 0 {
			c.m[c.k] = n
		} else {
			delete(c.m, c.k)
		}
	}
}

func (p *Pool) takeIdleLocked(key PoolKey) *Session {
	l := p.idle[key]
	if l == nil || l.Len() == 0 {
		return nil
	}
	e := l.Back().Value.(*idleEntry)
	p.removeIdleLocked(e)
	return e.sess
}

func (p *Pool) removeIdleLocked(e *idleEntry) {
	p.lru.Remove(e.lruElem)
	l := p.idle[e.key]
	l.Remove(e.elem)
	if l.Len() == 0 {
		delete(p.idle, e.key)
	}
}

// Release gives a leased session back. A session that failed (or whose
// upstream forgot it), or that served MaxUses leases, is closed instead of
// kept.
func (p *Pool) Release(key PoolKey, s *Session, healthy bool) {
	if uses := s.uses.Add(1); p.opts.MaxUses > 0 && uses >= int64(p.opts.MaxUses) {
		healthy = false // retired
	}
	if !healthy {
		p.mu.Lock()
		p.countLocked(key, -1)
		track := !p.closed // after Close, nothing waits
		if track {
			p.closing.Add(1)
		}
		p.mu.Unlock()
		go func() {
			s.Close(context.Background())
			if track {
				p.closing.Done()
			}
		}()
		return
	}
	s.touch()
	p.mu.Lock()
	defer p.mu.Unlock()
	l := p.idle[key]
	if l == nil {
		l = list.New()
		p.idle[key] = l
	}
	e := &idleEntry{key: key, sess: s}
	e.elem = l.PushBack(e)
	e.lruElem = p.lru.PushBack(e)
}

// Reap closes the sessions idle since before now - IdleTimeout.
func (p *Pool) Reap(now time.Time) int {
	cutoff := now.Add(-p.opts.IdleTimeout)
	var stale []*Session
	p.mu.Lock()
	for front := p.lru.Front(); front != nil; front = p.lru.Front() {
		e := front.Value.(*idleEntry)
		if e.sess.LastUsed().After(cutoff) {
			break
		}
		stale = append(stale, p.dropIdleLocked(e))
	}
	p.mu.Unlock()
	for _, s := range stale {
		s.Close(context.Background())
	}
	return len(stale)
}

// Stats returns how many sessions are open and how many of them are idle.
func (p *Pool) Stats() (open, idle int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.open, p.lru.Len()
}

// Close closes every idle session, and waits for those Release is closing
// (each bounded by closeTimeout). Leased ones are closed by their holders'
// Release.
func (p *Pool) Close() {
	p.mu.Lock()
	p.closed = true
	var all []*Session
	for front := p.lru.Front(); front != nil; front = p.lru.Front() {
		e := front.Value.(*idleEntry)
		all = append(all, p.dropIdleLocked(e))
	}
	p.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for _, s := range all {
		wg.Add(1)
		go func() { defer wg.Done(); s.Close(ctx) }()
	}
	wg.Wait()
	p.closing.Wait()
}

// UpstreamStats counts the sessions of one upstream.
type UpstreamStats struct {
	Open int `json:"open"`
	Idle int `json:"idle"`
	// Initialized counts the sessions ever opened (initialize) on it.
	Initialized uint64 `json:"initialized"`
}

// StatsByUpstream counts the pool's sessions per upstream URL.
func (p *Pool) StatsByUpstream() map[string]UpstreamStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]UpstreamStats)
	for k, n := range p.inits {
		out[k] = UpstreamStats{Initialized: n}
	}
	for k, n := range p.openBy {
		st := out[k]
		st.Open = n
		out[k] = st
	}
	for e := p.lru.Front(); e != nil; e = e.Next() {
		k := e.Value.(*idleEntry).key.Upstream
		st := out[k]
		st.Idle++
		out[k] = st
	}
	return out
}

// Detach takes a leased session out of the pool for good: it no longer
// counts toward the pool's bounds, its standalone GET stream stops, and it
// stays open upstream for whoever attaches it again (Attach); the caller
// owns it (it ends it with Close, or leaves it to the upstream's own
// expiry).
func (p *Pool) Detach(key PoolKey, s *Session) {
	p.mu.Lock()
	p.countLocked(key, -1)
	p.mu.Unlock()
	s.Detach()
}

// Client is the client the sessions of key make their requests with.
func (p *Pool) Client(key PoolKey) Doer {
	if key.Client != nil {
		return key.Client
	}
	return p.opts.Client
}
