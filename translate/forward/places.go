package forward

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/legacy"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
)

// Places of calls finished elsewhere. A call parked holding no
// stream (resume.go) keeps a place toward MaxParked and
// MaxParkedPerPrincipal on the instance that parked it, because the
// upstream holds its session (and its tool, waiting) until somebody ends
// it: the bound keeps one principal from making the upstream hold
// sessions without end. When the retry reaches another instance, that
// instance goes on with the call and, when the call ends, ends its
// upstream session (DELETE). Nobody tells the parking instance; it learns
// it from the upstream, which answers 404 on a session it no longer knows
// (legacy.Session.Alive: a notification on the session, which a server
// takes with 202 while it knows the session):
//
//   - in the background, each place is checked placeCheckAfter after the
//     park, then again at doubling intervals until its state expires; a
//     place whose session is gone is freed at once (and its call needs no
//     probe at its expiry: abandon.go);
//   - at once, when a new call would be refused for want of room
//     (makeRoomLocked): the places that would make room for it (its
//     options' places, or its principal's at the per-principal bound) not
//     checked lately (see trustedUntil) are checked, the oldest first, at most
//     maxReclaim of them, and the call is admitted if that freed a place.
//     One such pass runs at a time per options set and principal; a caller
//     arriving meanwhile waits for it, and its answer stands for those
//     arriving after it for reclaimCooldown, or until a place it could not
//     free may be checked again (a call found alive just after it parked,
//     which may be ending elsewhere right now, its DELETE on the way; a
//     lingering call), if sooner, but not sooner than reclaimCooldownMin.
//     A caller whose pass freed a place that another took, or freed none
//     while one may be freed soon, tries again: it is refused once no
//     place may be freed within reclaimDeadline of its first try. The
//     same, when the pool refuses a new call an upstream session
//     (max_sessions_per_principal, max_sessions): a place of the pool's
//     holds a session of it (reclaimSessions). When a pass freed nothing
//     because its checks failed (the upstream is down), the call is
//     refused for that, 503 (uncheckedRefusal), not for want of room: the
//     places may all be of calls that are over.
//
// So a place counts while the upstream holds the call's session, and no
// call is refused because of calls that are over. A check that fails (the
// upstream unreachable, slow, or answering otherwise) keeps the place: it
// may hold a live call. A call that goes on elsewhere and parks again
// there keeps its session: its place here counts until the session ends,
// as the other instance's new place does there (each instance bounds what
// it admitted). A call that comes back here with a newer state and parks
// again takes the place of its own older one (bySession): one call holds
// one place per instance.

const (
	// placeCheckAfter is when a place is first checked after its park;
	// the checks then come at doubling intervals.
	placeCheckAfter = 2 * time.Second
	// placeCheckTimeout bounds one check.
	placeCheckTimeout = 5 * time.Second
	// How many background checks run at once, and how many wait (beyond,
	// a check comes again later).
	maxChecking     = 16
	maxChecksQueued = 100_000
	// reclaimRecheck bounds how long a pass that makes room takes a place
	// found alive to hold a live call (trustedUntil): a flood of calls
	// refused for want of room costs the upstream at most one check per
	// long-parked call in that time.
	reclaimRecheck = 5 * time.Second
	// maxReclaim bounds the places one pass checks; reclaimDeadline how
	// long a call waits for room, its passes and their checks included.
	maxReclaim      = 32
	reclaimDeadline = 2 * time.Second
	// reclaimCooldown is how long the result of a pass that freed nothing
	// stands for the calls refused after it, reclaimCooldownMin how long
	// at least: a flood of refused calls walks the places at most once
	// per reclaimCooldownMin, not once per call.
	reclaimCooldown    = 200 * time.Millisecond
	reclaimCooldownMin = 10 * time.Millisecond
)

// placeSession names an upstream session a place holds.
type placeSession struct {
	upstream string
	id       legacy.UpstreamSessionID
}

// reclaimKey names what a pass makes room in: an options set's places
// (opts), or its principal's (own); or, with opts nil, the pool's upstream
// sessions the places hold, all or the principal's (own).
type reclaimKey struct {
	opts  *Options
	princ [16]byte
	own   bool
}

// holds reports whether p counts toward what k makes room in.
func (k reclaimKey) holds(p *resumePlace) bool {
	if k.opts == nil {
		return p.pooled && (!k.own || p.princ == k.princ)
	}
	return p.opts == k.opts && (!k.own || p.princ == k.princ)
}

// reclaimRun is a pass: done is closed when it ends; freed then says
// whether it freed any place, and if not, until when its answer stands
// (unix nanoseconds), retry whether a place may be freed then, and
// unchecked whether a check failed (the upstream could not tell).
type reclaimRun struct {
	done      chan struct{}
	freed     bool
	until     int64
	retry     bool
	unchecked bool
}

// uncheckedRefusal is the refusal of a call for want of room when the
// places that would make room could not be checked: the upstream is
// unavailable, which is what the client is told (503), not that it has
// too many calls waiting. what says whether the call was sent.
func uncheckedRefusal(what string) *jsonrpc.RPCError {
	return &jsonrpc.RPCError{HTTPStatus: http.StatusServiceUnavailable, Code: jsonrpc.InternalError,
		Message: translate.MsgUpstreamUnavailable + " (whether the calls waiting for input there are over could not be checked); " +
			what + ": retry later"}
}

// checkPlaceLater queues p's background check (its timer fired before
// its deadline), its timer set for the deadline meanwhile; with the queue
// full, the check comes again after the same interval.
func (b *Bridge) checkPlaceLater(p *resumePlace) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.places[p.id] != p {
		return
	}
	if !b.checks.add(func() { b.checkPlace(p) }) {
		b.armCheckLocked(p, p.checkEvery)
		return
	}
	p.timer.Reset(time.Duration(p.deadline - time.Now().UnixNano()))
}

// armCheckLocked sets p's timer for its next background check, after d,
// or for its deadline if sooner (under b.mu).
func (b *Bridge) armCheckLocked(p *resumePlace, d time.Duration) {
	p.checkEvery = d
	p.timer.Reset(min(d, time.Duration(p.deadline-time.Now().UnixNano())))
}

// checkPlace checks p in the background: freed if its session is gone,
// checked again later otherwise.
func (b *Bridge) checkPlace(p *resumePlace) {
	if b.verify(p) {
		return
	}
	b.mu.Lock()
	if b.places[p.id] == p {
		b.armCheckLocked(p, 2*p.checkEvery)
	}
	b.mu.Unlock()
}

// verify asks the upstream whether p's session lives, and frees p if it
// does not; it reports whether it freed p. A lingering call's place, or one
// already taken, is not checked.
func (b *Bridge) verify(p *resumePlace) (freed bool) {
	b.mu.Lock()
	if b.places[p.id] != p || p.hot != nil || p.sess == nil {
		b.mu.Unlock()
		return false
	}
	sess := p.sess
	b.mu.Unlock()
	ctx, cancel := context.WithTimeout(b.ctx, placeCheckTimeout)
	alive, err := sess.Alive(ctx)
	cancel()
	if alive || err != nil {
		now := time.Now().UnixNano()
		b.mu.Lock()
		p.checkedAt = now
		// A call found alive just after it parked may be ending right
		// now elsewhere (its session's DELETE on the way): it is trusted
		// as long as it had been parked, up to reclaimRecheck, so that
		// the checks a place costs grow with the log of its age.
		p.trustedUntil = now + min(int64(reclaimRecheck), now-p.since)
		p.unreachable = err != nil
		b.mu.Unlock()
		return false
	}
	if taken, hot := b.takePlace(p.id); taken == p {
		b.closeLingering(hot)
		b.dropPlace(p)
		b.elsewhereAt.Store(time.Now().UnixNano())
		resumeEvent(p.opts, ResumeFinished)
		return true
	}
	return false
}

// makeRoomLocked is roomLocked, but before it refuses a call for want of
// room, it checks the places that could make room (see above) and asks
// again, until reclaimDeadline. It is called under b.mu, which it
// releases meanwhile.
func (b *Bridge) makeRoomLocked(o *Options, princ [16]byte, sent bool) *jsonrpc.RPCError {
	deadline := time.Now().Add(reclaimDeadline)
	unchecked := false // a pass freed nothing because a check failed
	for {
		rerr := b.roomLocked(o, princ, sent)
		if rerr == nil {
			return nil
		}
		key := reclaimKey{opts: o}
		if set := b.sets[o]; set != nil && set.byPrin[princ] >= o.MaxParkedPerPrincipal {
			key.princ, key.own = princ, true
		}
		again, failed := b.awaitReclaimLocked(key, deadline)
		unchecked = unchecked || failed
		b.mu.Lock()
		if !again {
			rerr = b.roomLocked(o, princ, sent)
			if rerr != nil && unchecked {
				rerr = uncheckedRefusal(sentWhat(sent))
			}
			return rerr
		}
	}
}

// reclaimSessions is makeRoomLocked's pass for a call the pool refused a
// session (legacy.ErrPrincipalFull, legacy.ErrPoolFull): the places whose
// calls may have ended elsewhere hold sessions of the pool. It reports
// whether the lease is worth trying again (before deadline), and whether
// the pass's checks failed (awaitReclaimLocked).
func (b *Bridge) reclaimSessions(princ [16]byte, err error, deadline time.Time) (again, unchecked bool) {
	key := reclaimKey{}
	switch {
	case errors.Is(err, legacy.ErrPrincipalFull):
		key.princ, key.own = princ, true
	case !errors.Is(err, legacy.ErrPoolFull):
		return false, false
	}
	b.mu.Lock()
	return b.awaitReclaimLocked(key, deadline)
}

// awaitReclaimLocked runs, or waits for, a pass of key (called under b.mu,
// which it releases), and reports whether to look for room again: the pass
// freed a place, or a place may be freed before deadline, and that time
// came; and whether the pass freed nothing because a check failed (the
// caller keeps that across its tries).
func (b *Bridge) awaitReclaimLocked(key reclaimKey, deadline time.Time) (again, unchecked bool) {
	if !time.Now().Before(deadline) {
		b.mu.Unlock()
		return false, false
	}
	run := b.reclaimLocked(key)
	if run.freed {
		return true, false
	}
	if !run.retry || run.until > deadline.UnixNano() {
		return false, run.unchecked
	}
	t := time.NewTimer(time.Until(time.Unix(0, run.until)))
	defer t.Stop()
	select {
	case <-t.C:
		return true, run.unchecked
	case <-b.ctx.Done():
		return false, run.unchecked
	}
}

// reclaimLocked runs, or waits for, the pass of key (called under b.mu,
// which it releases), and returns it, done.
func (b *Bridge) reclaimLocked(key reclaimKey) *reclaimRun {
	if run := b.reclaiming[key]; run != nil {
		select {
		case <-run.done:
			if time.Now().UnixNano() < run.until {
				b.mu.Unlock()
				return run
			}
			delete(b.reclaiming, key) // its answer stood its time
		default:
			b.mu.Unlock()
			<-run.done
			return run
		}
	}
	run := &reclaimRun{done: make(chan struct{})}
	b.reclaiming[key] = run
	cands := b.staleLocked(key)
	b.mu.Unlock()

	ctx, cancel := context.WithTimeout(b.ctx, reclaimDeadline)
	defer cancel()
	var wg sync.WaitGroup
	var freed atomic.Bool // checks still running at the deadline go on
	for _, p := range cands {
		wg.Go(func() {
			if b.verify(p) {
				freed.Store(true)
			}
		})
	}
	waited := make(chan struct{})
	go func() { wg.Wait(); close(waited) }()
	timedOut := false
	select {
	case <-waited:
	case <-ctx.Done():
		timedOut = true // checks too slow to answer count as failed
	}
	b.mu.Lock()
	run.freed = freed.Load()
	run.unchecked = !run.freed && (timedOut || b.unreachableLocked(key))
	if run.freed {
		delete(b.reclaiming, key)
	} else {
		// A pass that freed nothing answers the calls refused right
		// after it, rather than each of them looking again.
		now := time.Now().UnixNano()
		stands := int64(reclaimCooldown)
		if soonest, ok := b.soonestLocked(key, now); ok && soonest-now <= stands {
			run.retry = true
			stands = max(soonest-now, int64(reclaimCooldownMin))
		}
		run.until = now + stands
		time.AfterFunc(time.Duration(stands), func() { b.endReclaim(key, run) })
	}
	close(run.done)
	b.mu.Unlock()
	return run
}

// soonestLocked returns when the earliest of key's places a pass could
// not free now may be checked again (unix nanoseconds, now at the
// earliest): one found alive (trustedUntil), one not checked yet, or one
// lingering (until it cools); false when key holds none.
func (b *Bridge) soonestLocked(key reclaimKey, now int64) (int64, bool) {
	soonest, ok := int64(0), false
	for _, p := range b.places {
		if !key.holds(p) || p.sess == nil {
			continue
		}
		at := max(p.trustedUntil, now)
		if p.hot != nil {
			at = max(p.coolAt, now)
		}
		if !ok || at < soonest {
			soonest, ok = at, true
		}
	}
	return soonest, ok
}

// unreachableLocked reports whether the last check of one of key's places
// failed: the upstream could not say whether its call is over.
func (b *Bridge) unreachableLocked(key reclaimKey) bool {
	for _, p := range b.places {
		if key.holds(p) && p.unreachable {
			return true
		}
	}
	return false
}

// endReclaim forgets key's pass run.
func (b *Bridge) endReclaim(key reclaimKey, run *reclaimRun) {
	b.mu.Lock()
	if b.reclaiming[key] == run {
		delete(b.reclaiming, key)
	}
	b.mu.Unlock()
}

// staleLocked returns the places of key no longer trusted (see verify):
// those never checked first, the oldest first, then the least recently
// checked; at most maxReclaim.
func (b *Bridge) staleLocked(key reclaimKey) []*resumePlace {
	now := time.Now().UnixNano()
	var cands []*resumePlace
	for _, p := range b.places {
		if key.holds(p) && p.hot == nil && p.sess != nil && p.trustedUntil <= now {
			cands = append(cands, p)
		}
	}
	slices.SortFunc(cands, func(x, y *resumePlace) int {
		return cmp.Or(cmp.Compare(x.checkedAt, y.checkedAt), cmp.Compare(x.since, y.since))
	})
	return cands[:min(len(cands), maxReclaim)]
}
