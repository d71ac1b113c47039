package translate

import (
	"context"
	"net/http"
	"time"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/legacy/seal"
)

// Lingering (issue 14). A call that parks holding no stream
// (bridge_resume.go) costs its retry an upstream connection and a GET that
// reopens the stream and replays what it sent. A retry that comes back at
// once (a client that answers without asking anybody: roots, an agent's
// own sampling) need not pay that: for ResumeLinger after the park, the
// call keeps its stream, and its session its GET stream, as a call parked
// holding them would; a retry that reaches this instance meanwhile goes on
// reading the stream (resumeLingering), with no GET and no replay. The
// state is the resumable one all the same, and any instance can resume it.
//
// The streams close (cool) when the linger ends, when the state's place is
// taken (its retry, its expiry), when the bridge closes, and as soon as
// anything happens on the call's stream (legacy.Call.Linger): an upstream
// that sends more, or ends or breaks the stream, may be answering a retry
// that reached another instance, which then reopens the stream itself. An
// upstream that allows one reader per stream (go-sdk) refuses that other
// instance's GET (409) while the stream is held here: legacy.Session.Reopen
// tries again for up to 2s, so the linger is bounded well below that.

const (
	// defaultResumeLinger is ResumeLinger's default: far longer than a
	// program takes to answer, far shorter than a person.
	defaultResumeLinger = 250 * time.Millisecond
	// MaxResumeLinger bounds ResumeLinger (see above).
	MaxResumeLinger = time.Second
)

// lingerLocked keeps c's streams open for its options' ResumeLinger, on the place
// p its resumable state holds here (under b.mu, before the state reaches
// the client); it reports false, and does nothing, when the options want
// none.
func (b *Bridge) lingerLocked(c *call, p *resumePlace, ttl time.Duration) bool {
	d := min(c.opts.ResumeLinger, ttl)
	if d <= 0 || b.closed {
		return false
	}
	p.hot = c
	p.cool = time.AfterFunc(d, func() { b.cool(p) })
	c.up.Linger(func() { b.cool(p) })
	return true
}

// cool closes the streams of the call lingering on p, if it still does.
func (b *Bridge) cool(p *resumePlace) {
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
		b.cool(p)
	}
}

// resumeLingering serves a retry whose call still lingers here (rs is its
// state, checked and recorded as used): the answers go upstream, and the
// call reads on from its open stream.
func (b *Bridge) resumeLingering(ctx context.Context, c *call, r Request, params []byte, rs *seal.ResumeState, sink Sink) Served {
	served := Served{Round: int(rs.Round)}
	opened := time.Now()
	b.holdArrived(c)
	answers := inputResponses(params)
	pctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	var still []pendingInput
	for _, p := range c.pending {
		resp, ok := answers[p.Key]
		if !ok || ValidateInputResponse(p.Method, resp) != nil {
			still = append(still, p)
			continue
		}
		if err := c.sess.Respond(pctx, p.upstreamID, resp, nil); err != nil {
			b.abandon(c, OutcomeError, "upstream refused the answer")
			_ = sink.Respond(http.StatusBadGateway, ErrorResponse(r.ID, upstreamError(err)))
			served.Outcome, served.Cause = OutcomeError, err
			return served
		}
	}
	c.pending = still
	c.base = &resumeBase{after: rs.After, seen: rs.Seen, expires: rs.Expires}
	c.overhead += time.Since(opened)
	resumeEvent(c.opts, ResumeResumed)
	served.Outcome, served.Cause = b.run(ctx, c, r, sink, nil, len(still) > 0)
	return served
}
