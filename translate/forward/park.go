package forward

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/seal"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/traces"
)

// Parking and resuming: a call that asked for input waits in the bridge's
// table (bounded per options set and per principal, see admit.go;
// expiring after ParkTTL) for the client's retry, whose requestState leads
// back to it. Which function moves a call in and out of the table:
// call.go.

// parkRound parks c with the round's questions, remembering whether its
// target asked one or several at once.
func (b *Bridge) parkRound(c *call, r Request, sink translate.Sink, asked int) string {
	b.gather.learn(c, asked > 1)
	return b.park(c, r, sink)
}

// holdArrived takes the messages that reached a parked call before its
// answers are posted; run handles them first. A question among them missed
// its round: the call's target asks several at once.
func (b *Bridge) holdArrived(c *call) {
	take := func(m jsonrpc.Message) {
		c.held = append(c.held, m)
		if m.Kind == jsonrpc.KindRequest && translate.IsInputMethod(m.Method) {
			b.gather.learn(c, true)
		}
	}
	for _, m := range c.up.Unpark() {
		take(m)
	}
	// Only what is queued now: the inbox is bounded.
	for range len(c.sess.Inbox()) {
		select {
		case m := <-c.sess.Inbox():
			if m.Kind == jsonrpc.KindRequest {
				c.inboxAsked = true // no reopened stream replays it
				take(m)
			}
		default:
		}
	}
}

// park ends the client's answer with input_required and keeps the upstream
// call waiting for the retry. The call's options bound it (max_rounds,
// park_ttl, max_parked, max_parked_per_principal: a call that finds no room
// is refused, never another one ended); the requestState is sealed with
// those of the request being answered, whose configuration the client
// retries through.
func (b *Bridge) park(c *call, r Request, sink translate.Sink) string {
	o, sealer := c.opts, r.Options
	if int(c.round) >= o.MaxRounds {
		b.abandon(c, translate.OutcomeError, "too many rounds of input")
		_ = sink.Respond(http.StatusBadGateway, jsonrpc.ErrorResponse(r.ID, translate.BadGateway(
			fmt.Sprintf("the upstream asked for input more than %d times (max_rounds); the call was cancelled", o.MaxRounds))))
		return translate.OutcomeError
	}
	if c.resumable() {
		if outcome, ok := b.parkResumable(c, r, sink); ok {
			return outcome
		}
	}
	// The place is taken before the state is sealed, and held until the
	// call ends (finish).
	b.mu.Lock()
	rerr := b.admitLocked(c)
	b.mu.Unlock()
	if rerr != nil {
		return b.refuse(c, r, sink, rerr)
	}
	w := translate.StartWatch(&c.overhead)
	if c.round == 0 {
		// Calls that never ask for input (most) skip the digest.
		c.digest = translate.RequestDigest(r.Method, translate.ParamsOf(r.Raw))
	}
	c.round++
	c.expires = time.Now().Add(o.ParkTTL)
	token := seal.SealState(sealer.Keyring, seal.State{
		Instance: sealer.Instance, Address: sealer.Address, Handle: c.handle, Round: c.round,
		Principal: c.princ, Digest: c.digest, Expires: c.expires,
	})
	reqs := make([]translate.InputRequest, len(c.pending))
	for i, p := range c.pending {
		reqs[i] = p.InputRequest
	}
	answer := translate.ResultResponse(r.ID, b.inputRequired(c, reqs, token))
	w.Stop()
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		b.abandon(c, translate.OutcomeCancelled, "gateway shutting down")
		_ = sink.Respond(http.StatusServiceUnavailable, jsonrpc.ErrorResponse(r.ID, translate.BadGateway("the gateway is shutting down")))
		return translate.OutcomeCancelled
	}
	b.parked[c.handle] = c
	round := c.round // the timer belongs to this round only
	c.timer = time.AfterFunc(o.ParkTTL, func() {
		b.endParked(c, round, translate.ParkExpired, translate.OutcomeExpired, "input not provided in time")
	})
	b.mu.Unlock()
	// Nobody reads the call while it is parked: an upstream that sends more
	// than the call can hold (max_buffered_notifications), or that dies,
	// ends it now rather than at the retry or the expiry.
	c.up.Park()
	c.up.OnFailure(func() {
		b.endParked(c, round, translate.ParkFailed, translate.OutcomeError, "the upstream call failed while parked")
	})
	_ = sink.Respond(http.StatusOK, answer)
	return translate.OutcomeInputRequired
}

// openState opens the requestState of a retry with the keyring of r's
// options, and checks that it belongs to the retry's principal and request
// and has not expired. Every refusal is the same to the client
// (refuseState); the order of the checks only decides what the debug log
// says. A resumable state (seal.ResumeState, resume.go) comes back
// in rs, st then zero.
func (b *Bridge) openState(r Request, params []byte, token string) (st seal.State, rs *seal.ResumeState, rerr *jsonrpc.RPCError) {
	st, rs, err := seal.OpenRequestState(r.Options.Keyring, token, time.Now())
	expired := errors.Is(err, seal.ErrStateExpired)
	princ, digest := st.Principal, st.Digest
	if rs != nil {
		princ, digest = rs.Principal, rs.Digest
	}
	switch {
	case errors.Is(err, seal.ErrUnknownKey):
		return st, nil, refuseState(RefusedUnknownKey)
	case err != nil && !expired:
		return st, nil, refuseState("it does not open (tampered, truncated, or sealed for another purpose)")
	case princ != r.Principal:
		return st, rs, refuseState("another principal's")
	case digest != translate.RequestDigest(r.Method, params):
		return st, rs, refuseState("another request's")
	case expired:
		return st, rs, refuseState("expired")
	}
	return st, rs, nil
}

// Whose is what a retry's requestState says about the call it resumes
// (Retry.Whose).
type Whose uint8

const (
	// NotRetry: r carries no requestState, or is not a request that parks
	// (only tools/call, prompts/get and resources/read do).
	NotRetry Whose = iota
	// StateUnopened: r carries a requestState that does not open as one of
	// the gateway's for r: tampered, expired, sealed under other keys (a
	// modern upstream's own, say), another principal's or another
	// request's.
	StateUnopened
	// ParkedHere: the state names a call this instance parked (Instance of
	// r's options).
	ParkedHere
	// ParkedThere: the state names a call another instance parked.
	ParkedThere
	// Resumable: the state holds all the call needs (it parked holding
	// nothing, resume.go): any instance serves it, on the upstream
	// Retry.Upstream names; it is never relayed.
	Resumable
)

// Retry is what RetryOf learned from a request's requestState.
type Retry struct {
	Whose Whose
	// Owner is the instance that parked the call (ParkedHere, ParkedThere;
	// Resumable when Lingers).
	Owner translate.Owner
	// Lingers is, for Resumable, that another instance (Owner) keeps the
	// call's streams open for a while yet (linger.go): the caller had
	// better relay the retry there, and resume it here only if that
	// instance cannot be reached.
	Lingers bool
	// Upstream is, for ParkedHere, the URL of the legacy upstream the call
	// runs on, or "" when it is no longer parked (answered already,
	// abandoned); for Resumable, the URL of the call's upstream.
	Upstream string
}

// RetryOf opens r's requestState, if it carries one, and says whose call
// it resumes. The state is opened once: Serve uses it as opened here (r
// keeps it).
func (b *Bridge) RetryOf(r *Request) Retry {
	if r.Kind != jsonrpc.KindRequest || !translate.InputCapable[r.Method] {
		return Retry{}
	}
	r.Options = b.optionsOf(r)
	params := translate.ParamsOf(r.Raw)
	token := translate.StringField(params, "requestState")
	if token == "" {
		return Retry{}
	}
	st, rs, rerr := b.openState(*r, params, token)
	r.retry = &openedState{st: st, rs: rs, rerr: rerr}
	switch {
	case rerr != nil:
		return Retry{Whose: StateUnopened}
	case rs != nil:
		rt := Retry{Whose: Resumable, Upstream: rs.Upstream}
		if rs.Home != "" && rs.Home != r.Options.Instance && placeLingers(rs.Place, time.Now()) {
			rt.Owner, rt.Lingers = translate.Owner{Instance: rs.Home, Address: rs.HomeAddress}, true
		}
		return rt
	case st.Instance != r.Options.Instance:
		return Retry{Whose: ParkedThere, Owner: translate.Owner{Instance: st.Instance, Address: st.Address}}
	}
	rt := Retry{Whose: ParkedHere, Owner: translate.Owner{Instance: st.Instance, Address: st.Address}}
	b.mu.Lock()
	if c := b.parked[st.Handle]; c != nil && c.round == st.Round {
		rt.Upstream = c.key.Upstream
	}
	b.mu.Unlock()
	return rt
}

// ParkedElsewhere reports whether r is a retry for a call parked on another
// gateway instance than r's options name, and which: the caller forwards it
// there (RetryOf, said shortly).
func (b *Bridge) ParkedElsewhere(r *Request) (translate.Owner, bool) {
	rt := b.RetryOf(r)
	return rt.Owner, rt.Whose == ParkedThere
}

// resume serves a retry: it opens the state, finds the parked call, posts
// the answers upstream and goes on with the call.
func (b *Bridge) resume(ctx context.Context, r Request, params []byte, token string, sink translate.Sink) translate.Served {
	opened := time.Now()
	var st seal.State
	var rs *seal.ResumeState
	var rerr *jsonrpc.RPCError
	if r.retry != nil {
		st, rs, rerr = r.retry.st, r.retry.rs, r.retry.rerr
	} else {
		st, rs, rerr = b.openState(r, params, token)
	}
	if rerr == nil && rs != nil {
		return b.resumeSealed(ctx, r, params, token, rs, sink)
	}
	if rs != nil {
		st.Round = rs.Round
	}
	if rerr == nil && st.Instance != r.Options.Instance {
		// The caller forwards such retries (RetryOf); this one
		// could not be.
		rerr = &jsonrpc.RPCError{HTTPStatus: http.StatusMisdirectedRequest, Code: jsonrpc.InvalidParams,
			Message: "the call is parked on gateway instance " + jsonrpc.Clip(st.Instance) + ", which this request cannot reach"}
	}
	if rerr != nil {
		_ = sink.Respond(rerr.HTTPStatus, jsonrpc.ErrorResponse(r.ID, rerr))
		return translate.Served{Round: int(st.Round), Outcome: translate.OutcomeError, Refused: refusedWhy(rerr)}
	}
	c := b.take(st.Handle, st.Round)
	if c == nil && b.parkedBefore(st) {
		// Parked by this instance before it restarted: its call ended
		// with the process that held it, as after a crash.
		rerr = translate.BadGateway("the gateway instance that parked the call stopped since: start the call again")
		_ = sink.Respond(rerr.HTTPStatus, jsonrpc.ErrorResponse(r.ID, rerr))
		return translate.Served{Round: int(st.Round), Outcome: translate.OutcomeError}
	}
	if c == nil {
		rerr = refuseState("already used, or its call has ended")
		_ = sink.Respond(rerr.HTTPStatus, jsonrpc.ErrorResponse(r.ID, rerr))
		return translate.Served{Round: int(st.Round), Outcome: translate.OutcomeError, Refused: refusedWhy(rerr)}
	}
	b.holdArrived(c)
	b.unparked(c, translate.ParkAnswered)
	served := translate.Served{Round: int(st.Round)}
	traces.Link(ctx, c.first, traces.FirstRound) // this round's span to the call's first
	c.overhead += time.Since(opened)
	if err := b.respondAnswers(ctx, c, params); err != nil {
		b.abandon(c, translate.OutcomeError, "upstream refused the answer")
		_ = sink.Respond(http.StatusBadGateway, jsonrpc.ErrorResponse(r.ID, translate.UpstreamError(err)))
		served.Outcome, served.Cause = translate.OutcomeError, err
		return served
	}
	// Ask again for what is missing or invalid, with what arrived meanwhile;
	// or go on with the call.
	served.Outcome, served.Cause = b.run(ctx, c, r, sink, nil, len(c.pending) > 0)
	return served
}

// parkedBefore reports whether st, a state of this instance's (it
// opened), names a call another bridge parked (its handle's epoch is not
// this one's): an earlier process, whose parked calls are gone.
func (b *Bridge) parkedBefore(st seal.State) bool {
	return [handleEpoch]byte(st.Handle[:handleEpoch]) != b.epoch
}

// respondAnswers POSTs upstream the retry's valid answers (its params'
// inputResponses) to c's pending questions, which it leaves with those
// still unanswered: missing or invalid. ctx is the retry's: its span, if
// any, is the answers' parent (they are sent on whether it ends or not).
func (b *Bridge) respondAnswers(ctx context.Context, c *call, params []byte) error {
	answers := translate.InputResponses(params)
	pctx, cancel := context.WithTimeout(traces.Carry(b.ctx, ctx), 10*time.Second)
	defer cancel()
	var still []pendingInput
	for _, p := range c.pending {
		resp, ok := answers[p.Key]
		w := translate.StartWatch(&c.overhead)
		valid := ok && translate.ValidateInputResponse(p.Method, resp) == nil
		w.Stop()
		if !valid {
			still = append(still, p)
			continue
		}
		if err := c.sess.Respond(pctx, p.upstreamID, resp, nil); err != nil {
			return err
		}
	}
	c.pending = still
	return nil
}
