package forward

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/legacy"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/seal"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/traces"
)

// Parking without holding. In front of an upstream whose call
// streams are resumable — their events carry ids, and a GET with
// Last-Event-ID replays what followed (2025-11-25) — a call that asks for
// input parks with no stream held: its stream is closed, its session's
// standalone GET stream stopped, and everything its retry needs travels
// sealed in the requestState (seal.ResumeState). The instance keeps only a
// place (placeForLocked) with the session object, until the state is used
// here or expires. The retry, on any instance holding the key, goes on
// with that session (here) or attaches to the upstream session by id
// (elsewhere), POSTs the answers, reopens the call's stream
// after the event before the round's first question, skips what the
// gateway had already seen (asking again what is still unanswered), and
// runs the call on as usual: it may park again, with a new state.
//
// A call parks this way when its upstream's resume option is on (Request.Resume),
// the upstream keeps sessions, every question of the round came on the
// call's own stream after a numbered event, the call may not become a task,
// and the state fits its bounds; otherwise it parks holding its stream, as
// before. Single use: the instance that serves the retry records the state
// as used until it expires (Bridge.used, a seal.ReplayFilter); another instance sharing the key
// does not know, so a state replayed there within its expiry reopens the
// stream — and reads the result again — but cannot change the call: the
// upstream takes the first answer to a question and drops the others.

// resumable reports whether c, about to park, may park without holding.
func (c *call) resumable() bool {
	return c.resumeOn && c.resumeAt != "" && !c.inboxAsked && c.taskRule == nil && !c.taskPlaced &&
		c.sess.ID != "" && len(c.held) == 0 && len(c.pending) > 0
}

// parkResumable parks c with nothing held, if its state can be sealed; ok
// is false (and nothing changed) when it cannot, and the caller parks it
// holding its stream.
func (b *Bridge) parkResumable(c *call, r Request, sink translate.Sink) (outcome string, ok bool) {
	w := translate.StartWatch(&c.overhead)
	digest := c.digest
	if c.round == 0 {
		digest = translate.RequestDigest(r.Method, translate.ParamsOf(r.Raw))
	}
	expires := time.Now().Add(c.opts.ParkTTL)
	if c.base != nil && c.resumeAt == c.base.after && c.seen == c.base.seen {
		// Nothing happened upstream since the state the retry resumed
		// from: the new state ends when that one did (abandon.go).
		expires = c.base.expires
	}
	rs := seal.ResumeState{
		Upstream: c.key.Upstream, Session: string(c.sess.ID), Version: c.sess.Version, CallID: c.up.ID,
		After: c.resumeAt, Seen: c.seen, Keys: c.keys.AppendBinary(nil), ServerInfo: translate.ServerInfo(c.sess.InitResult), Round: c.round + 1,
		Principal: c.princ, Digest: digest, Started: c.started, Expires: expires, Trace: seal.TraceRef(c.first),
	}
	reqs := make([]translate.InputRequest, len(c.pending))
	for i, p := range c.pending {
		reqs[i] = p.InputRequest
		rs.Inputs = append(rs.Inputs, seal.ResumeInput{ID: p.upstreamID, Key: p.Key, Method: p.Method})
	}
	rs.Place = newPlace(time.Time{})
	if !c.own {
		// The session is of this instance's pool: an instance that ends
		// the call gives it back here (giveback.go), and one that gets
		// its retry while it lingers relays it here (linger.go).
		rs.Home, rs.HomeAddress = r.Options.Instance, r.Options.Address
		if d := b.lingersFor(c, time.Until(expires)); d > 0 {
			rs.Place = newPlace(time.Now().Add(d))
		}
	}
	token, err := seal.SealResume(r.Options.Keyring, rs)
	if errors.Is(err, seal.ErrResumeTooLarge) && (rs.Home != "" || rs.Trace != seal.TraceRef{}) {
		// What a state may go without, rather than hold the call.
		rs.Home, rs.HomeAddress, rs.Place, rs.Trace = "", "", newPlace(time.Time{}), seal.TraceRef{}
		token, err = seal.SealResume(r.Options.Keyring, rs)
	}
	w.Stop()
	if err != nil {
		return "", false
	}
	// It parks holding nothing, but it holds the upstream session open
	// until the retry: it takes a place among the calls parked with its
	// options here, for its state's life (placeFor), so that max_parked
	// and max_parked_per_principal bound what one principal makes the
	// upstream hold. A call admitted before (a place held from a round
	// parked holding, or a call resumed from a state) is never turned away
	// mid-way.
	b.mu.Lock()
	older := b.bySession[placeSession{c.sess.URL, c.sess.ID}]
	if older != nil {
		// The call's own place from an earlier round, whose retry went
		// to another instance: the new one replaces it.
		b.mu.Unlock()
		olderPlace, hot := b.takePlace(older.id)
		b.closeLingering(hot)
		if olderPlace != nil && olderPlace.sess != c.sess {
			b.dropPlace(olderPlace)
		}
		b.mu.Lock()
	}
	if !c.placed && !c.own && older == nil {
		if rerr := b.makeRoomLocked(c.opts, c.princ, true); rerr != nil {
			b.mu.Unlock()
			return b.refuse(c, r, sink, rerr), true
		}
	}
	p := b.placeForLocked(c.opts, c.princ, rs.Place, max(time.Until(expires), 0))
	// The session object stays with the place (its pool still counts a
	// session of the pool as leased): a retry reaching this instance goes
	// on with it, and gives it back to the pool at the end. What the
	// state says of the call's stream stays too, to tell at the state's
	// expiry whether the call was abandoned (abandon.go).
	p.sess, p.key, p.pooled = c.sess, c.key, !c.own
	b.bySession[placeSession{c.sess.URL, c.sess.ID}] = p
	p.callID, p.after, p.seen = c.up.ID, c.resumeAt, c.seen
	p.method, p.name, p.round, p.waiting, p.started, p.expires = c.method, c.name, rs.Round, len(c.pending), c.started, expires
	c.round, c.digest, c.expires = rs.Round, digest, expires
	lingers := b.lingerLocked(c, p, time.Until(expires))
	b.mu.Unlock()
	// No stream of the call stays open (once it stopped lingering): its
	// stream closes (the upstream goes on, keeping what it sends for the
	// retry's GET), its session's GET stream stops, its place (from a
	// round parked holding) is freed.
	if !lingers {
		b.closeLingering(c)
	}
	if p.pooled && b.primes(c.key) {
		go b.prime(c.key, r.Header.Clone(), translate.MetaField(translate.ParamsOf(r.Raw), translate.MetaClientInfo), c.opts.Lease)
	}
	b.release(c)
	resumeEvent(c.opts, ResumeParked)
	_ = sink.Respond(http.StatusOK, translate.ResultResponse(r.ID, b.inputRequired(c, reqs, token)))
	return translate.OutcomeInputRequired, true
}

// resumePlace is the place a resumable state holds on the instance that
// parked it (placeForLocked): its id, the session object (no stream open)
// and a timer.
type resumePlace struct {
	id    [16]byte
	opts  *Options
	princ [16]byte
	// timer is the place's one timer (placeTimer): at deadline (unix
	// nanoseconds) the place expires; before it, the timer is that of the
	// next check that the call's session lives, checkEvery its interval,
	// checkedAt when it was last known to (unix nanoseconds; 0: never
	// checked), trustedUntil until when a pass that makes room takes that
	// for granted, since when the place was taken, unreachable whether its
	// last check failed (the upstream could not tell): places.go. One
	// timer, not two: a timer is ~140 bytes of each of 10,000 parked calls.
	timer        *time.Timer
	deadline     int64
	checkEvery   time.Duration
	checkedAt    int64
	trustedUntil int64
	since        int64
	unreachable  bool
	// sess is the call's session, key its pool key, pooled whether the
	// pool counts it (a session of the pool's, leased; not an attached
	// one).
	sess   *legacy.Session
	key    legacy.PoolKey
	pooled bool
	// callID, after and seen are the state's CallID, After and Seen: how
	// to reopen the call's stream, and how much of it the gateway saw.
	callID json.RawMessage
	after  string
	seen   uint32
	// hot is the call while it lingers with its streams open, cool the
	// timer that ends that (linger.go) at coolAt (unix nanoseconds); under
	// Bridge.mu.
	hot      *call
	cool     *time.Timer
	coolAt   int64
	parkedAt int64         // unix nanoseconds; 0: the options want no linger
	cooling  chan struct{} // closed once cool has closed hot's streams
	// What the admin API lists of the call (ParkedCall): its method and
	// name, the round its state answers, how many questions it asked,
	// when it started and when its state expires.
	method, name     string
	round            uint32
	waiting          int
	started, expires time.Time
}

// placeForLocked takes a place among the calls parked with o, for princ,
// under id, that frees itself after ttl (the state's life), when a retry
// carrying the state reaches this instance (takePlace), or when the call's
// session turns out to have ended (a retry that reached another instance
// finished the call there: places.go).
func (b *Bridge) placeForLocked(o *Options, princ [16]byte, id [16]byte, ttl time.Duration) *resumePlace {
	set := b.sets[o]
	if set == nil {
		set = &parkSet{byPrin: make(map[[16]byte]int)}
		b.sets[o] = set
	}
	set.held++
	set.byPrin[princ]++
	now := time.Now()
	p := &resumePlace{id: id, opts: o, princ: princ, since: now.UnixNano(), deadline: now.Add(ttl).UnixNano(), checkEvery: b.checkAfter}
	b.places[id] = p
	p.timer = time.AfterFunc(min(ttl, b.checkAfter), func() { b.placeTimer(p) })
	return p
}

// placeTimer is p's timer firing: p expires at its deadline, and is
// checked before it (places.go).
func (b *Bridge) placeTimer(p *resumePlace) {
	if time.Now().UnixNano() >= p.deadline {
		taken, hot := b.takePlace(p.id)
		b.closeLingering(hot)
		b.expirePlace(taken)
		return
	}
	b.checkPlaceLater(p)
}

// takePlace frees the place id and returns it, if this instance holds it,
// with its call if that still lingers (its caller's now).
func (b *Bridge) takePlace(id [16]byte) (p *resumePlace, hot *call) {
	b.mu.Lock()
	p = b.places[id]
	if p == nil {
		b.mu.Unlock()
		return nil, nil
	}
	delete(b.places, id)
	if p.sess != nil {
		if k := (placeSession{p.sess.URL, p.sess.ID}); b.bySession[k] == p {
			delete(b.bySession, k)
		}
	}
	b.freeLocked(p.opts, p.princ)
	hot = takeLingeringLocked(p)
	cooling := p.cooling
	b.mu.Unlock()
	p.timer.Stop()
	if cooling != nil {
		<-cooling // a cool in progress: the session is the place's again after
	}
	return p, hot
}

// dropPlace lets go of the session a taken place kept: out of the pool,
// open upstream (the call may go on elsewhere: expirePlace ends it only
// once it made sure nobody did).
func (b *Bridge) dropPlace(p *resumePlace) {
	if p != nil && p.sess != nil && p.pooled {
		b.pool.Detach(p.key, p.sess)
	}
}

// resumeSealed serves a retry whose requestState is resumable (opened and
// checked against the retry's principal and request by openState).
func (b *Bridge) resumeSealed(ctx context.Context, r Request, params []byte, token string, rs *seal.ResumeState, sink translate.Sink) translate.Served {
	served := translate.Served{Round: int(rs.Round), Outcome: translate.OutcomeError}
	if r.Upstream != rs.Upstream {
		_ = sink.Respond(http.StatusBadRequest, jsonrpc.ErrorResponse(r.ID, &jsonrpc.RPCError{HTTPStatus: http.StatusBadRequest, Code: jsonrpc.InvalidParams,
			Message: "requestState names an upstream this gateway does not serve: send the request again without it"}))
		return served
	}
	if err := b.used.Use(stateID(token), rs.Expires, time.Now()); err != nil {
		why := "already used on this instance"
		if errors.Is(err, seal.ErrReplayFloor) {
			why = "older than the states this instance still remembers, after a flood of retries"
		}
		rerr := refuseState(why)
		_ = sink.Respond(rerr.HTTPStatus, jsonrpc.ErrorResponse(r.ID, rerr))
		served.Refused = refusedWhy(rerr)
		return served
	}
	p, hot := b.takePlace(rs.Place)
	if hot != nil {
		if hot.key == poolKey(r) && hot.sess.ID == legacy.UpstreamSessionID(rs.Session) {
			return b.resumeLingering(ctx, hot, r, params, rs, sink)
		}
		b.closeLingering(hot)
	}
	opened := time.Now()
	c := &call{opts: r.Options, method: r.Method, name: r.Name, started: rs.Started, princ: r.Principal, caps: r.ClientCapabilities,
		key: poolKey(r), always: r.GatherAlways, resumeOn: r.Resume, own: true, round: rs.Round, digest: rs.Digest,
		first: traces.Ref(rs.Trace)}
	traces.Link(ctx, c.first, traces.FirstRound) // this round's span to the call's first
	_ = b.newHandle(&c.handle)
	c.keys = translate.DecodeKeyCounter(rs.Keys)
	if p != nil {
		b.cameQuickly(p)
	} else {
		homeOf(c, r, homeState{rs.Home, rs.HomeAddress, rs.Place})
	}
	if p != nil && p.sess != nil && p.key == c.key && p.sess.ID == legacy.UpstreamSessionID(rs.Session) && p.sess.Relisten() {
		// Back on the instance that parked it: its own session, which
		// goes back to the pool at the end.
		c.sess, c.own = p.sess, !p.pooled
	} else {
		b.dropPlace(p)
		c.sess = legacy.Attach(b.pool.Client(c.key), rs.Upstream, r.Header, legacy.UpstreamSessionID(rs.Session), rs.Version)
	}
	c.sess.SetCallBuffer(r.Options.Lease.CallBuffer)
	if rs.ServerInfo != nil && c.sess.InitResult == nil {
		// What the call's result needs of the InitializeResult
		// (reshapeOptions); the rest is not kept.
		c.sess.InitResult = append(append([]byte(`{"serverInfo":`), rs.ServerInfo...), '}')
	}

	answers := translate.InputResponses(params)
	unanswered := make(map[string]seal.ResumeInput)
	pctx, cancel := context.WithTimeout(traces.Carry(b.ctx, ctx), 10*time.Second)
	for _, in := range rs.Inputs {
		resp, ok := answers[in.Key]
		if !ok || translate.ValidateInputResponse(in.Method, resp) != nil {
			unanswered[string(in.ID)] = in
			continue
		}
		if err := c.sess.Respond(pctx, in.ID, resp, nil); err != nil {
			cancel()
			return b.resumeFailed(ctx, c, r, sink, err, served)
		}
	}
	cancel()
	callCtx, cancelCall := context.WithCancel(traces.Carry(b.ctx, ctx)) // the stream reopened in the retry's trace
	stop := context.AfterFunc(ctx, cancelCall)
	up, err := c.sess.Reopen(callCtx, rs.CallID, rs.After)
	stop()
	if err != nil {
		cancelCall()
		return b.resumeFailed(ctx, c, r, sink, err, served)
	}
	c.up, c.cancelUp = up, cancelCall
	c.resumeAt = rs.After
	pending, err := b.replaySeen(ctx, c, rs.Seen, unanswered)
	if err != nil && ctx.Err() != nil {
		served.Outcome = b.requestEnded(ctx, c, r, sink)
		return served
	}
	if err != nil {
		resumeEvent(c.opts, ResumeGone)
		b.abandon(c, translate.OutcomeError, "the upstream's replay of the call differs")
		rerr := translate.UpstreamFailure("the upstream did not replay the call as it had sent it", err)
		_ = sink.Respond(http.StatusBadGateway, jsonrpc.ErrorResponse(r.ID, rerr))
		served.Cause = err
		return served
	}
	c.pending = pending
	c.base = &resumeBase{after: rs.After, seen: rs.Seen, expires: rs.Expires}
	c.overhead += time.Since(opened)
	resumeEvent(c.opts, ResumeResumed)
	served.Outcome, served.Cause = b.run(ctx, c, r, sink, nil, len(pending) > 0)
	return served
}

// errReplay says how the replay of a call's stream differs from what the
// gateway saw before parking.
var errReplay = errors.New("replay differs")

// replaySeen reads the first seen messages of c's reopened stream: those
// the gateway received before parking. They were handled then, except the
// round's questions still unanswered, which it returns to ask again, with
// the keys they had.
func (b *Bridge) replaySeen(ctx context.Context, c *call, seen uint32, unanswered map[string]seal.ResumeInput) ([]pendingInput, error) {
	var pending []pendingInput
	timeout := time.NewTimer(30 * time.Second)
	defer timeout.Stop()
	for range seen {
		var m jsonrpc.Message
		var ok bool
		select {
		case m, ok = <-c.up.Messages():
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-timeout.C:
			return nil, errors.New("the upstream replayed too little within 30s")
		}
		if !ok {
			return nil, c.up.Err()
		}
		c.seen++
		if m.Kind != jsonrpc.KindRequest {
			continue
		}
		in, ok := unanswered[string(m.ID)]
		if !ok {
			continue
		}
		delete(unanswered, string(m.ID))
		if m.Method != in.Method {
			return nil, errReplay
		}
		ir, err := translate.NewInputRequest(m.Method, m.Params(), new(translate.KeyCounter))
		if err != nil {
			return nil, err
		}
		ir.Key = in.Key
		pending = append(pending, pendingInput{InputRequest: ir, upstreamID: m.ID})
	}
	if len(unanswered) > 0 {
		return nil, errReplay
	}
	return pending, nil
}

// resumeFailed ends a resumed call whose answers or stream the upstream
// did not take: the session is gone (the upstream restarted, or ended it),
// or the upstream failed. When the gateway ended the request (it is
// stopping), neither happened: the call goes on upstream, its answers
// sent, and its session is left to it, so that the client's request, sent
// again to another instance, resumes it from the upstream's event store.
func (b *Bridge) resumeFailed(ctx context.Context, c *call, r Request, sink translate.Sink, err error, served translate.Served) translate.Served {
	if gone := requestGone(ctx); gone != nil && gone.HTTPStatus != 499 {
		b.leave(c, goneReason(gone))
		_ = sink.Respond(gone.HTTPStatus, jsonrpc.ErrorResponse(r.ID, gone))
		served.Outcome = translate.OutcomeCancelled
		return served
	}
	rerr := translate.UpstreamError(err)
	if errors.Is(err, legacy.ErrSessionGone) {
		resumeEvent(c.opts, ResumeGone)
		rerr = &jsonrpc.RPCError{HTTPStatus: http.StatusBadGateway, Code: jsonrpc.InternalError, Cause: err,
			Message: "the upstream no longer knows the call (it restarted, or ended its session): send the request again without requestState"}
	}
	b.finish(c, false)
	b.report(c, translate.OutcomeError, rerr.Detail())
	_ = sink.Respond(rerr.HTTPStatus, jsonrpc.ErrorResponse(r.ID, rerr))
	served.Cause = err
	return served
}

// leave ends c on this instance without ending it upstream: the gateway
// ended the request of a call resumed from a resumable state (it is
// stopping). Its stream closes, as when a call parks holding no stream;
// its answers, if sent, stay with the upstream, and so does its session,
// so that the client's request, sent again to another instance, resumes
// the call from the upstream's event store and gets its result.
func (b *Bridge) leave(c *call, reason string) {
	b.release(c)
	if c.up != nil {
		c.up.Close()
		c.cancelUp()
	}
	if !c.own {
		// Out of the pool, open upstream: the pool, closing with the
		// instance, would end it.
		b.pool.Detach(c.key, c.sess)
	}
	b.report(c, translate.OutcomeCancelled, reason)
}

// ResumeObserver is implemented by an Observer that wants to learn of
// calls parked holding no stream, which never enter the parked list (and
// so never reach Observer.Unparked).
type ResumeObserver interface {
	// Resumable reports ResumeParked (a call parked holding no stream),
	// ResumeResumed (a retry went on with one, on this instance; also
	// ResumeLingered when it read on from the call's stream, still open:
	// linger.go),
	// ResumeGone (the upstream no longer knew the call, or replayed it
	// otherwise than it had sent it), and, for a state parked here that
	// expired with no retry here (abandon.go), ResumeEnded (this
	// instance ended the call's upstream session) or ResumeLeft (it left
	// the session to the upstream: the call went on elsewhere, or it
	// could not tell); ResumeFinished: a state parked here whose call
	// ended elsewhere (its session gone upstream: places.go, or
	// given back: giveback.go) gave its place back;
	// ResumeGivenBack: a call resumed here from a state parked elsewhere
	// ended here, and its session went back to the instance that parked
	// it.
	Resumable(event string)
}

// Events of ResumeObserver.Resumable.
const (
	ResumeParked    = "parked"
	ResumeResumed   = "resumed"
	ResumeLingered  = "lingered"
	ResumeGone      = "gone"
	ResumeEnded     = "ended"
	ResumeLeft      = "left"
	ResumeFinished  = "finished_elsewhere"
	ResumeGivenBack = "given_back"
)

// resumeEvent tells o's observer, if it observes resumable calls.
func resumeEvent(o *Options, event string) {
	if obs, ok := o.Observer.(ResumeObserver); ok {
		obs.Resumable(event)
	}
}
