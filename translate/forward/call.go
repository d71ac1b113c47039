package forward

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/tidwall/gjson"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/legacy"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/traces"
)

// The life of a forward-bridge call: one upstream request, from its
// client's first request to its end, across every round of input (MRTR).
// States are in capitals; each arrow names the function that takes it, and
// the file where that is not this one.
//
//	client's first request: Serve (bridge.go)
//	  |  roomBeforeStart (admit.go): no room -----> refused, never sent
//	  |  start: lease a session, send the request; fails -> error, never sent
//	  v
//	RUNNING: run (run.go) relays the upstream's answer <-------------+
//	  |  the result: finish, respondFinal ------------------> ENDED         |
//	  |  the client's request ended (requestEnded), the upstream's answer   |
//	  |  ended (upstreamEnded), the client stopped reading, too many        |
//	  |  inputs: abandon, or finish ------------------------> ENDED         |
//	  |  the round's questions are in (gather.go): parkRound                |
//	  v                                                                     |
//	park (park.go): takes a place (admitLocked, admit.go)     |
//	  |  max_rounds, Close: abandon; no room: refuse -------> ENDED         |
//	  |  input_required, with the sealed requestState, to the client        |
//	  v                                                                     |
//	PARKED: in Bridge.parked, until one of these takes it out:              |
//	  |  the retry: resume (park.go), take, holdArrived,             |
//	  |             the answers posted upstream ----------------------------+
//	  |             (unless the upstream refuses them: abandon -> ENDED)
//	  |  park_ttl, the upstream call failing: endParked ----> ENDED
//	  |  Close (bridge.go): unparkLocked, abandon ----------> ENDED
//	  v
//	ENDED: finish frees the call's place, closes the upstream call and
//	       releases the session; abandon first answers the upstream's open
//	       questions with a cancellation, sends notifications/cancelled and
//	       ends the session; report tells the observer.
//
// Who may touch a call: while RUNNING, the goroutine serving the client's
// request (the first one, or the retry that took it). Once park has put it
// in Bridge.parked, its fields are read only under Bridge.mu (ParkedCalls);
// park itself goes on only with the upstream call (Park, OnFailure), which
// is safe for concurrent use. It leaves PARKED only through take (or Close,
// under the same lock): the retry, the park_ttl timer and the upstream's
// failure race for it, one wins, and the others find nothing. take checks
// the round too, so that a timer of an earlier round cannot take the call
// parked again in a later one. The call's place in the parked table
// (admit.go) is a separate matter: taken at its first park, kept
// across later rounds (RUNNING again included), freed by finish.
//
// server/discover and subscriptions/listen only start (a session leased,
// nothing sent): discover and listen answer them, and they never park.

// call is one upstream request of the bridge's, from its first client
// request to its result, across every parking.
type call struct {
	// Set by start, then fixed.
	key      legacy.PoolKey
	opts     *Options // of the call's first request
	always   bool     // Request.GatherAlways
	sess     *legacy.Session
	up       *legacy.Call // nil for server/discover
	cancelUp context.CancelFunc
	method   string
	name     string    // tool or prompt name, or resource URI
	started  time.Time // first request
	handle   [16]byte
	princ    [16]byte
	// taskRule is the tool's rule when the call may become a task (its
	// first request declared the Tasks extension), and taskPlaced whether
	// it holds a task place (task.go) that finish frees: one that
	// became a task has handed it over.
	taskRule   *TaskRule
	taskPlaced bool
	// upTask: the call was sent task-augmented to an upstream with 2025
	// tasks, which runs the task itself (task_upstream.go).
	upTask bool
	// caps are the client capabilities the upstream's questions are
	// checked against: the first request's, then the request that made
	// the task.
	caps []byte

	// first names the span of the call's first request (zero without
	// tracing or a client traceparent): its later rounds link to it.
	first traces.Ref

	// Kept across rounds by whoever holds the call (see above).
	round    uint32
	digest   [16]byte // of the request, computed when the call first parks
	keys     translate.KeyCounter
	pending  []pendingInput    // the round's questions, not yet answered
	held     []jsonrpc.Message // arrived while parked, for run
	overhead time.Duration     // spent translating (CallReport.Overhead)

	// Resuming without holding (resume.go). resumeOn: the
	// upstream's resume option; own: the session is the call's own (out
	// of the pool, ended by finish); resumeAt: the id of the event before
	// the round's first question; seen: the call's stream's messages
	// since (that question included); inboxAsked: a question came on the
	// session's standalone stream, which no reopening replays.
	resumeOn   bool
	own        bool
	resumeAt   string
	seen       uint32
	inboxAsked bool
	// home is where the session goes back when the call ends, for a call
	// resumed away from the instance that parked it (giveback.go).
	home *callHome
	// base is what the state a retry resumed the call from said (nil for
	// a call never resumed): a new park with nothing read past it keeps
	// that state's expiry (abandon.go).
	base *resumeBase

	// While PARKED.
	expires time.Time
	timer   *time.Timer // park_ttl; stopped by unparkLocked
	placed  bool        // holds a place in Bridge.sets[opts] (admit.go), under Bridge.mu
}

type pendingInput struct {
	translate.InputRequest
	upstreamID json.RawMessage
}

// unstarted is a call that ended before start sent it (refused, or
// failed), for its report.
func unstarted(r Request, started time.Time) *call {
	return &call{key: poolKey(r), method: r.Method, name: r.Name, started: started, opts: r.Options}
}

// start leases a session and sends the request upstream (re-initializing
// once if the upstream forgot the session). When nothing reached the
// upstream (see Request.Failover), it starts again on the upstream
// r.Failover points r at.
func (b *Bridge) start(ctx context.Context, r *Request, params []byte) (*call, *jsonrpc.RPCError) {
	info := translate.MetaField(params, translate.MetaClientInfo)
	// The name is cloned: r.Name points into a copy of the whole request
	// body, which a parked call would otherwise keep for its whole life.
	c := &call{opts: r.Options, method: r.Method, name: strings.Clone(r.Name), started: time.Now(), princ: r.Principal, caps: r.ClientCapabilities,
		first: traces.RefOf(ctx)}
	if err := b.newHandle(&c.handle); err != nil {
		return nil, translate.BadGateway("no randomness")
	}
	failover := func(err error) bool { return r.Failover != nil && r.Failover(r, err) }
	for attempt := 0; ; {
		key := poolKey(*r)
		c.key, c.always, c.resumeOn = key, r.GatherAlways, r.Resume
		sess, err := b.pool.Lease(ctx, key, r.Header, []byte(key.Caps), info, r.Options.Lease)
		unchecked := false // a pass freed nothing because a check failed
		for deadline := time.Now().Add(reclaimDeadline); err != nil; {
			again, failed := b.reclaimSessions(r.Principal, err, deadline)
			unchecked = unchecked || failed
			if !again {
				break
			}
			sess, err = b.pool.Lease(ctx, key, r.Header, []byte(key.Caps), info, r.Options.Lease)
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil, requestGone(ctx) // not the upstream's failure
			}
			if unchecked {
				return nil, uncheckedRefusal(sentWhat(false))
			}
			if translate.Unopened(ctx, err) && failover(err) {
				continue
			}
			return nil, translate.UpstreamError(err)
		}
		c.sess = sess
		if r.Method == "server/discover" || r.Method == "subscriptions/listen" {
			return c, nil
		}
		if r.LogLevel != "" && gjson.GetBytes(sess.InitResult, "capabilities.logging").Exists() {
			// Legacy servers log per session: set the level this request
			// asked for.
			if err = setLogLevel(ctx, sess, r.LogLevel); err != nil {
				b.pool.Release(key, sess, false)
				if ctx.Err() != nil {
					return nil, requestGone(ctx)
				}
				if legacy.Refused(err) && failover(err) {
					continue // an idle session of a dead upstream
				}
				return nil, translate.UpstreamError(err)
			}
		}
		if b.listens(c, r.GetStream) {
			sess.Listen(listenWait)
		}
		if rerr := b.learnToolTasks(ctx, r, sess); rerr != nil {
			b.pool.Release(key, sess, true)
			return nil, rerr
		}
		// The call outlives the client's request (it may park), but until
		// the upstream answers the headers, a client that leaves cancels it.
		// It carries the request's span: its upstream exchange joins
		// the request's trace.
		callCtx, cancelCall := context.WithCancel(traces.Carry(b.ctx, ctx))
		stop := context.AfterFunc(ctx, cancelCall)
		id := sess.NewRequestID()
		var augmented []byte
		augmented, c.upTask = b.upstreamTaskParams(r, sess, params)
		switch {
		case c.upTask:
			c.up, err = sess.CallWithID(callCtx, id, r.Method, augmented)
		case r.hosting != nil:
			// A call that may become a task waits for the upstream's
			// headers no longer than its window: the task then holds
			// a call whose headers are still to come.
			c.up, err = sess.CallWithin(callCtx, id, r.Method, translate.UpstreamParams(params), r.hosting.Window)
		default:
			c.up, err = sess.CallWithID(callCtx, id, r.Method, translate.UpstreamParams(params))
		}
		if !stop() {
			// The client left first, or the gateway is stopping. A legacy
			// server does not take a dropped connection for a
			// cancellation: tell it.
			if err == nil {
				c.up.Close()
			}
			cancelCall()
			rerr := requestGone(ctx)
			b.cancelUpstream(sess, id, goneReason(rerr))
			b.pool.Release(key, sess, false)
			return nil, rerr
		}
		if err == nil {
			c.cancelUp = cancelCall
			return c, nil
		}
		cancelCall()
		b.pool.Release(key, sess, false)
		switch {
		case errors.Is(err, legacy.ErrSessionGone) && attempt == 0:
			attempt++
		case ctx.Err() != nil:
			return nil, requestGone(ctx)
		case legacy.Refused(err) && failover(err):
			// The call never left: an idle session of a dead upstream.
		default:
			return nil, translate.UpstreamError(err)
		}
	}
}

// requestGone is the answer to a request whose context ended before its
// call did: 499 when the client left; when the gateway ended it (it is
// stopping), 503 naming why, so that the client sends it again, to
// another instance. Neither is the upstream's failure. It is nil while ctx
// has not ended.
func requestGone(ctx context.Context) *jsonrpc.RPCError {
	cause := context.Cause(ctx)
	switch {
	case cause == nil:
		return nil
	case errors.Is(cause, context.Canceled):
		return &jsonrpc.RPCError{HTTPStatus: 499, Code: jsonrpc.InternalError, Message: "client disconnected"}
	}
	return &jsonrpc.RPCError{HTTPStatus: http.StatusServiceUnavailable, Code: jsonrpc.InternalError,
		Message: "the call was abandoned: " + cause.Error()}
}

// goneReason is the reason the upstream is given for a call cancelled
// with rerr (requestGone).
func goneReason(rerr *jsonrpc.RPCError) string {
	if rerr.HTTPStatus == 499 {
		return "client disconnected"
	}
	return "gateway shutting down"
}

// handleEpoch is how many bytes of a call's handle name the bridge that
// made it (Bridge.epoch); the other 12 are random.
const handleEpoch = 4

// newHandle makes a call's handle: the bridge's epoch, then random bytes.
func (b *Bridge) newHandle(h *[16]byte) error {
	copy(h[:handleEpoch], b.epoch[:])
	_, err := rand.Read(h[handleEpoch:])
	return err
}

// setLogLevel sets the session's logging level (logging/setLevel).
func setLogLevel(ctx context.Context, sess *legacy.Session, level string) error {
	p, _ := json.Marshal(struct {
		Level string `json:"level"`
	}{level})
	call, err := sess.Call(ctx, "logging/setLevel", p)
	if err != nil {
		return err
	}
	defer call.Close()
	_, err = call.Final()
	return err
}

// take removes the parked call with handle at round, or returns nil.
func (b *Bridge) take(handle [16]byte, round uint32) *call {
	b.mu.Lock()
	defer b.mu.Unlock()
	c := b.parked[handle]
	if c == nil || c.round != round {
		return nil
	}
	b.unparkLocked(c)
	return c
}

// unparkLocked removes c from the parked calls; it keeps its place in
// the table until it ends.
func (b *Bridge) unparkLocked(c *call) {
	c.timer.Stop()
	delete(b.parked, c.handle)
}

// endParked ends c if it is still parked at round, from outside the
// client's requests: its park_ttl passed, or its upstream call failed. The
// observer learns why it left the parked calls, then abandon ends it.
func (b *Bridge) endParked(c *call, round uint32, why, outcome, reason string) {
	if b.take(c.handle, round) != nil {
		b.unparked(c, why)
		b.abandon(c, outcome, reason)
	}
}

// unparked tells c's observer it left the parked calls.
func (b *Bridge) unparked(c *call, why string) {
	if obs := c.opts.Observer; obs != nil {
		obs.Unparked(why)
	}
}

// finish closes the upstream call, releases the session and frees the
// call's place among the parked calls.
func (b *Bridge) finish(c *call, healthy bool) {
	b.release(c)
	if c.taskPlaced {
		c.taskPlaced = false
		b.releaseTaskPlace(c.opts, c.princ)
	}
	if c.up != nil {
		c.up.Close()
		c.cancelUp()
	}
	if c.own {
		// Out of the pool (a resumed call's): given back to the pool of
		// the instance that parked the call, or ended upstream.
		if healthy && c.home != nil {
			go b.giveBack(c)
		} else {
			go c.sess.Close(context.Background())
		}
		return
	}
	b.pool.Release(c.key, c.sess, healthy)
}

// abandon ends a call nobody will finish: the upstream's pending requests
// are answered (elicitation cancelled, others refused), the upstream call
// is cancelled, and the session is ended upstream (a cancelled call may have
// left it in any state; a new one is cheap).
func (b *Bridge) abandon(c *call, outcome, reason string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, p := range c.pending {
		res, errObj := translate.CancelAnswer(p.Method)
		_ = c.sess.Respond(ctx, p.upstreamID, res, errObj)
	}
	for _, m := range c.held {
		if m.Kind == jsonrpc.KindRequest {
			res, errObj := translate.CancelAnswer(m.Method)
			_ = c.sess.Respond(ctx, m.ID, res, errObj)
		}
	}
	c.pending, c.held = nil, nil
	if c.up != nil {
		b.cancelUpstream(c.sess, c.up.ID, reason)
	}
	b.finish(c, false)
	b.report(c, outcome, reason)
}

// refuse ends c, which wanted to park and found no room: as abandon, and
// the client gets rerr.
func (b *Bridge) refuse(c *call, r Request, sink translate.Sink, rerr *jsonrpc.RPCError) string {
	b.unparked(c, translate.ParkRefused)
	b.abandon(c, translate.OutcomeRefused, rerr.Message)
	_ = sink.Respond(rerr.HTTPStatus, jsonrpc.ErrorResponse(r.ID, rerr))
	return translate.OutcomeRefused
}

// cancelUpstream sends notifications/cancelled for the request id, even
// once the bridge is closing: every upstream handler is told.
func (b *Bridge) cancelUpstream(sess *legacy.Session, id json.RawMessage, reason string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(b.ctx), 5*time.Second)
	defer cancel()
	params, _ := json.Marshal(struct { // in name order, as always sent
		Reason    string          `json:"reason"`
		RequestID json.RawMessage `json:"requestId"`
	}{reason, id})
	_ = sess.Notify(ctx, "notifications/cancelled", params)
}

// report tells c's observer the call ended.
func (b *Bridge) report(c *call, outcome, reason string) {
	if obs := c.opts.Observer; obs != nil {
		obs.CallEnded(translate.CallReport{
			Bridge: "forward", Upstream: c.key.Upstream, Method: c.method, Name: c.name,
			Rounds: int(c.round), Outcome: outcome, Reason: reason,
			Duration: time.Since(c.started), Overhead: c.overhead,
		})
	}
}
