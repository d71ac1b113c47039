package forward

import (
	"context"
	"time"
)

// Abandoned resumable calls. A call parked holding no stream
// (resume.go) keeps its upstream session open, and its tool waiting
// for the answer, until somebody ends it. When its state expires on the
// instance that parked it with no retry there, that instance checks, a
// little later (abandonGrace), whether the call went on elsewhere, and
// ends its upstream session (DELETE) only if it did not:
//
//   - it reopens the call's stream after the state's After event (GET with
//     Last-Event-ID) and reads what the upstream replays, for at most
//     probeDeadline;
//   - the upstream no longer knows the session or the stream, refuses the
//     GET (409: a retry on another instance holds the stream; both the
//     go-sdk and the TypeScript SDK refuse a second connection), fails, or
//     the deadline passes: the session is left to the upstream;
//   - the replay holds anything past the state's Seen messages (an answer
//     reached the upstream, which went on: a retry elsewhere, which may
//     have parked the call again with a newer state): left to the
//     upstream;
//   - the replay holds exactly the Seen messages and nothing follows
//     within probeQuiet: nobody took the call on; the instance closes the
//     stream, cancels the call (notifications/cancelled: the go-sdk ends a
//     session only once its requests returned) and DELETEs the session
//     (the call's own: a session of the pool is leased to one call while
//     parked, and an attached one is the call's).
//
// A retry that brings no progress (no answer the upstream acted on) and
// parks the call again, here or elsewhere, gets a state that expires when
// the one it came with did (parkResumable), so the replay that looks the
// same to the probe can only be of a call whose states have all expired.
// Other instances refuse a state after its expiry, so a retry still in
// flight when the probe runs was accepted before it, within the clock
// skew between instances; abandonGrace leaves it that long to POST its
// answers and reopen the stream. A retry accepted just before the expiry
// whose answers take longer than abandonGrace to reach an upstream that
// then shows nothing may still lose its session: its client gets the
// "upstream no longer knows the call" error and sends the request again.
//
// The probes run in at most maxProbing goroutines, from a queue of at most
// maxAbandoned expired places (beyond, the session is left to the
// upstream; workQueue); nothing else waits for them. When the instance that parked
// the call is gone (or its bridge closed), nobody probes: the upstream's
// own session expiry ends the call.

const (
	// defaultAbandonGrace is how long after a state's expiry its parking
	// instance waits before probing.
	defaultAbandonGrace = 10 * time.Second
	// probeDeadline bounds a probe's hold of the call's stream: below
	// legacy's reopenConflicts (2s), so that a retry's own reopening,
	// refused while the probe holds the stream, outlasts it.
	probeDeadline = 1500 * time.Millisecond
	// probeQuiet is how long a probe waits for a message past the state's
	// Seen ones once it read those.
	probeQuiet = 500 * time.Millisecond
	// How many probes run at once, and how many wait.
	maxProbing   = 64
	maxAbandoned = 100_000
)

// resumeBase is what the state a retry resumed the call from said of the
// call's stream, and when that state expired.
type resumeBase struct {
	after   string
	seen    uint32
	expires time.Time
}

// Places returns how many resumable states parked here have not expired
// nor been used here: each keeps its upstream session open.
func (b *Bridge) Places() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.places)
}

// expirePlace lets go of the place of a state that expired with no retry
// here (nil: a retry took it), and probes its call after abandonGrace.
func (b *Bridge) expirePlace(p *resumePlace) {
	if p == nil {
		return
	}
	b.dropPlace(p)
	if p.sess == nil || p.after == "" {
		return
	}
	time.AfterFunc(b.abandonGrace, func() { b.enqueueProbe(p) })
}

// enqueueProbe queues p's probe (see above).
func (b *Bridge) enqueueProbe(p *resumePlace) {
	if !b.probes.add(func() { resumeEvent(p.opts, b.probe(p)) }) {
		resumeEvent(p.opts, ResumeLeft)
	}
}

// probe ends p's call upstream if nobody took it on (see above), and says
// which it did: ResumeEnded or ResumeLeft.
func (b *Bridge) probe(p *resumePlace) string {
	ctx, cancel := context.WithTimeout(b.ctx, probeDeadline)
	defer cancel()
	up, err := p.sess.Reopen(ctx, p.callID, p.after)
	if err != nil {
		return ResumeLeft
	}
	msgs := up.Messages()
	for range p.seen {
		select {
		case _, ok := <-msgs:
			if !ok {
				up.Close()
				return ResumeLeft
			}
		case <-ctx.Done():
			up.Close()
			return ResumeLeft
		}
	}
	quiet := time.NewTimer(probeQuiet)
	defer quiet.Stop()
	select {
	case <-msgs:
		up.Close()
		return ResumeLeft // past what was seen: the call went on
	case <-ctx.Done():
		up.Close()
		return ResumeLeft
	case <-quiet.C:
	}
	up.Close()
	// The call first (an upstream may wait for its requests to end before
	// it ends their session: the go-sdk does), then the session.
	b.cancelUpstream(p.sess, p.callID, "abandoned: no retry came before the requestState expired")
	dctx, dcancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer dcancel()
	p.sess.Close(dctx)
	return ResumeEnded
}
