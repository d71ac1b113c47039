package forward

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"net/http"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/seal"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/traces"
)

// Lingering. A call that parks holding no stream
// (resume.go) costs its retry an upstream connection and a GET that
// reopens the stream and replays what it sent. A retry that comes back at
// once (a client that answers without asking anybody: roots, an agent's
// own sampling) need not pay that: for ResumeLinger after the park, the
// call keeps its stream, and its session its GET stream, as a call parked
// holding them would; a retry that reaches this instance meanwhile goes on
// reading the stream (resumeLingering), with no GET and no replay. The
// state is the resumable one all the same, and any instance can resume it.
//
// Only the calls of targets (upstream, method, tool, prompt or resource)
// whose retries have come back that quickly linger (quickTargets): a
// retry that reaches the parking instance within ResumeLinger of the park
// teaches it, and a linger that ends with no retry unteaches it. A tool
// whose questions a person answers never lingers, and costs nothing more
// than a call parked holding no stream; the first park of a quick one
// does not linger, the next do.
//
// The streams close (cool) when the linger ends, when the state's place is
// taken (its retry, its expiry), when the bridge closes, and as soon as
// anything happens on the call's stream (legacy.Call.Linger): an upstream
// that sends more, or ends or breaks the stream, may be answering a retry
// that reached another instance, which then reopens the stream itself. An
// upstream that allows one reader per stream (go-sdk) refuses that other
// instance's GET (409) while the stream is held here: legacy.Session.Reopen
// tries again for up to 2s, so the linger is bounded well below that.
//
// In a fleet, a retry landing on another instance while the call lingers
// is relayed to the parking instance (its home), which reads on as above:
// the state says until when the call lingers (in its place's id: newPlace;
// only for a session of the home's pool, whose address the state carries),
// and the other instance relays it (Retry.Lingers) when that is more than
// lingerRelayMargin away by its own clock, else resumes it itself, as it
// does when the home cannot be reached. Such a relayed retry teaches the
// home like one that came to it directly; so does a session given back by
// an instance that ended the call (TakeBack) within the linger, a retry
// that came back quickly elsewhere: the next call of that target lingers,
// and its retry is relayed. Relaying one round costs a hop between the
// instances; resuming it costs the upstream a GET that replays the
// stream, a new connection on the home for its next call, and the session's
// journey back (BENCHMARKS.md, "The fleet").

const (
	// defaultResumeLinger is ResumeLinger's default: far longer than a
	// program takes to answer, far shorter than a person.
	defaultResumeLinger = 250 * time.Millisecond
	// MaxResumeLinger bounds ResumeLinger (see above).
	MaxResumeLinger = time.Second
	// lingerRelayMargin is how long a call must still linger for another
	// instance to relay its retry home rather than resume it itself:
	// about a relay's hop, and some clock skew between the instances.
	lingerRelayMargin = 20 * time.Millisecond
)

// newPlace returns the id of a resumable state's place (seal.ResumeState.Place,
// opaque to every instance but the one that parked the call, and sealed):
// 8 random bytes, then until when the call lingers there (Unix
// milliseconds, big-endian; 0 when it does not). The state's format is
// the one earlier releases seal and open, so instances of both go on
// resuming each other's calls; an earlier release's place (16 random
// bytes) reads as a time within the next MaxResumeLinger with odds of
// about 1 in 10^16, and would then cost one needless hop.
func newPlace(until time.Time) (p [16]byte) {
	_, _ = rand.Read(p[:8])
	if ms := until.UnixMilli(); ms > 0 {
		binary.BigEndian.PutUint64(p[8:], uint64(ms))
	}
	return p
}

// placeLingers reports whether the call whose place is p lingers on its
// home for more than lingerRelayMargin after now (and no further away than
// a linger can be: see newPlace).
func placeLingers(p [16]byte, now time.Time) bool {
	until, at := binary.BigEndian.Uint64(p[8:]), now.UnixMilli()
	if at <= 0 || until <= uint64(at) {
		return false
	}
	left := until - uint64(at) // milliseconds
	return left > uint64(lingerRelayMargin.Milliseconds()) && left <= uint64((MaxResumeLinger+time.Second).Milliseconds())
}

// lingersFor is how long c, about to park holding no stream, will linger
// (lingerLocked), 0 for not at all: the state says so before it is sealed.
func (b *Bridge) lingersFor(c *call, ttl time.Duration) time.Duration {
	d := min(c.opts.ResumeLinger, ttl)
	if d <= 0 || !b.quick.has(b.gather.target(c)) {
		return 0
	}
	return d
}

// lingerLocked keeps c's streams open for its options' ResumeLinger, on
// the place p its resumable state holds here (under b.mu, before the state
// reaches the client); it reports false, and keeps nothing, when the
// options want no linger, or c's target is not known to be quick.
func (b *Bridge) lingerLocked(c *call, p *resumePlace, ttl time.Duration) bool {
	if c.opts.ResumeLinger <= 0 || ttl <= 0 {
		return false
	}
	p.parkedAt = time.Now().UnixNano()
	d := b.lingersFor(c, ttl)
	if b.closed || d <= 0 {
		return false
	}
	p.hot, p.coolAt = c, time.Now().Add(d).UnixNano()
	p.cool = time.AfterFunc(d, func() { b.cool(p, true) })
	c.up.Linger(func() { b.cool(p, false) })
	return true
}

// cool closes the streams of the call lingering on p, if it still does;
// missed: its linger ended with no retry.
func (b *Bridge) cool(p *resumePlace, missed bool) {
	b.mu.Lock()
	c := takeLingeringLocked(p)
	var cooled chan struct{}
	if c != nil {
		// Whoever takes the place meanwhile waits until the session
		// is detached (takePlace): it is the place's again then.
		cooled = make(chan struct{})
		p.cooling = cooled
	}
	b.mu.Unlock()
	if c == nil {
		return
	}
	if missed {
		b.quick.forget(b.gather.target(c))
	}
	b.closeLingering(c)
	b.mu.Lock()
	p.cooling = nil
	b.mu.Unlock()
	close(cooled)
}

// closeLingering closes the streams of a call that lingered (nil: none),
// as parkResumable closes those of a call that does not.
func (b *Bridge) closeLingering(c *call) {
	if c == nil {
		return
	}
	c.up.Close()
	c.cancelUp()
	c.sess.Detach()
}

// takeLingeringLocked takes the call lingering on p, if any, and stops its
// timer.
func takeLingeringLocked(p *resumePlace) *call {
	c := p.hot
	p.hot = nil
	if p.cool != nil {
		p.cool.Stop()
		p.cool = nil
	}
	return c
}

// coolAll closes the streams of every lingering call (the bridge closes):
// their states stay resumable, here or elsewhere.
func (b *Bridge) coolAll() {
	b.mu.Lock()
	var hot []*resumePlace
	for _, p := range b.places {
		if p.hot != nil {
			hot = append(hot, p)
		}
	}
	b.mu.Unlock()
	for _, p := range hot {
		b.cool(p, false)
	}
}

// resumeLingering serves a retry whose call still lingers here (rs is its
// state, checked and recorded as used): the answers go upstream, and the
// call reads on from its open stream.
func (b *Bridge) resumeLingering(ctx context.Context, c *call, r Request, params []byte, rs *seal.ResumeState, sink translate.Sink) translate.Served {
	served := translate.Served{Round: int(rs.Round)}
	opened := time.Now()
	b.holdArrived(c)
	traces.Link(ctx, c.first, traces.FirstRound) // this round's span to the call's first
	if err := b.respondAnswers(ctx, c, params); err != nil {
		b.abandon(c, translate.OutcomeError, "upstream refused the answer")
		_ = sink.Respond(http.StatusBadGateway, jsonrpc.ErrorResponse(r.ID, translate.UpstreamError(err)))
		served.Outcome, served.Cause = translate.OutcomeError, err
		return served
	}
	c.base = &resumeBase{after: rs.After, seen: rs.Seen, expires: rs.Expires}
	b.quick.learn(b.gather.target(c))
	c.overhead += time.Since(opened)
	resumeEvent(c.opts, ResumeResumed)
	resumeEvent(c.opts, ResumeLingered)
	served.Outcome, served.Cause = b.run(ctx, c, r, sink, nil, len(c.pending) > 0)
	return served
}

// quickTargets remembers the targets whose retries came back to the
// parking instance within ResumeLinger: their calls linger. Bounded like
// the gather policy's (a forgotten target stops lingering until a quick
// retry teaches it again). Safe for concurrent use.
type quickTargets struct {
	known *lru.Cache[uint64, struct{}]
}

func newQuickTargets() *quickTargets {
	known, err := lru.New[uint64, struct{}](maxGatherTargets)
	if err != nil {
		panic(err) // only for a size <= 0
	}
	return &quickTargets{known: known}
}

func (q *quickTargets) has(t uint64) bool { return q.known.Contains(t) }
func (q *quickTargets) learn(t uint64)    { q.known.Add(t, struct{}{}) }
func (q *quickTargets) forget(t uint64)   { q.known.Remove(t) }

// cameQuickly teaches q the target of the call parked on p when its retry
// reached the instance that parked it (or ended it elsewhere) within its
// options' ResumeLinger of the park.
func (b *Bridge) cameQuickly(p *resumePlace) {
	if p.parkedAt != 0 && time.Since(time.Unix(0, p.parkedAt)) <= p.opts.ResumeLinger {
		b.quick.learn(b.gather.targetOf(p.key.Upstream, p.method, p.name))
	}
}
