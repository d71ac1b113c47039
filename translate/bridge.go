package translate

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/tidwall/gjson"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/legacy"
)

// Sink is where the bridge writes its answer to the client's request.
type Sink interface {
	// Notify sends a notification related to the request before its final
	// answer (the answer then becomes an SSE stream).
	Notify(msg []byte) error
	// Respond ends the answer with the final JSON-RPC message (nil for
	// none, e.g. 202 to a notification) and its HTTP status (ignored once
	// the answer is a stream).
	Respond(status int, msg []byte) error
}

// BridgeOptions configure the forward bridge's calls: those of one
// configuration (one mcp_gateway handler), which passes them with each
// Request, or the bridge's own for requests without. They are taken as
// given, with no defaulting here: start from DefaultBridgeOptions, which
// holds the documented defaults, and set what differs.
type BridgeOptions struct {
	// Keyring seals and opens requestState. Required.
	Keyring *legacy.Keyring
	// Instance names this gateway instance inside the requestState it seals.
	Instance string
	// Address is this instance's advertised base URL, sealed into the
	// requestState so that another instance can forward the retry here
	// without a peer list ("" for none).
	Address string
	// ParkTTL is how long a parked call waits for the client's retry.
	ParkTTL time.Duration
	// MaxParked bounds the calls parked with these options (the same
	// *BridgeOptions): a call counts from its first park until it ends,
	// its later rounds included. When full, a new call that wants to park
	// is refused (503, -32603) and cancelled upstream; no parked call is
	// ended to make room (see bridge_admit.go). Calls parked with other
	// options do not count.
	MaxParked int
	// MaxParkedPerPrincipal bounds, within MaxParked, the calls of one
	// principal: at the bound the principal's new call is refused (429,
	// -32603) the same way.
	MaxParkedPerPrincipal int
	// GatherWindow is how long a round waits, after the upstream's first
	// request for input, for sibling requests to ask in the same round:
	// on the first round of a target (tool, prompt, resource), and on every
	// round of the targets that asked several at once (see gather.go;
	// others take the requests already there and park at once). Zero or
	// negative: no wait.
	GatherWindow time.Duration
	// MaxRounds bounds the input_required rounds of one call (asking again
	// for missing or invalid answers counts).
	MaxRounds int
	// MaxInputsPerRound bounds the requests for input one round may hold.
	MaxInputsPerRound int
	// Lease bounds the upstream sessions a principal holds when a call
	// leases one, and how many messages a parked call holds unread.
	Lease legacy.LeaseLimits
	// Observer learns how calls end and parked calls leave (metrics,
	// logs). Optional.
	Observer Observer

	ready bool // made by Ready
}

// Defaults of the limits both bridges share.
const (
	defaultMaxRounds         = 8
	defaultMaxInputsPerRound = 16
	defaultRoundTimeout      = 5 * time.Minute // park_ttl: a parked call, a reverse round
)

// DefaultBridgeOptions returns the documented defaults of the forward
// bridge's options, and is their one source: the gateway's Provision takes
// the defaults of the options a configuration leaves unset from here, and a
// caller outside Caddy starts from it. Keyring, Instance, Address and
// Observer are left unset.
func DefaultBridgeOptions() BridgeOptions {
	return BridgeOptions{
		ParkTTL:   defaultRoundTimeout,
		MaxParked: 10000,
		// 100 waiting questions is more than one person or agent answers
		// at once, and a hundredth of MaxParked: filling the table takes a
		// hundred identities.
		MaxParkedPerPrincipal: 100,
		GatherWindow:          2 * time.Millisecond,
		MaxRounds:             defaultMaxRounds,
		MaxInputsPerRound:     defaultMaxInputsPerRound,
		Lease:                 legacy.LeaseLimits{MaxPerPrincipal: 1000, CallBuffer: legacy.DefaultCallBuffer},
	}
}

// Ready returns o as the options of one configuration, to be passed with
// every request of it: make it once, since the calls parked with one
// *BridgeOptions share its MaxParked. o is taken as given (see
// DefaultBridgeOptions).
func (o BridgeOptions) Ready() *BridgeOptions {
	o.ready = true
	return &o
}

// Bridge serves modern (2026-07-28) clients from legacy upstreams: it leases
// upstream sessions initialized with the client's declared capabilities,
// reshapes results, and parks calls that ask for input until the client
// retries with inputResponses.
type Bridge struct {
	pool     *legacy.Pool
	defaults *BridgeOptions // of the requests that carry none
	gather   *gatherPolicy

	mu     sync.Mutex
	parked map[[16]byte]*call
	sets   map[*BridgeOptions]*parkSet // places held per options (bridge_admit.go)
	closed bool

	// ctx outlives every client request: upstream calls run in it, so a
	// parked call survives its first request.
	ctx    context.Context
	cancel context.CancelFunc
}

// NewBridge returns a bridge using pool for upstream sessions, with opts
// for the requests that carry no options of their own.
func NewBridge(pool *legacy.Pool, opts BridgeOptions) *Bridge {
	b := &Bridge{pool: pool, defaults: opts.Ready(), parked: make(map[[16]byte]*call),
		sets: make(map[*BridgeOptions]*parkSet), gather: newGatherPolicy()}
	b.ctx, b.cancel = context.WithCancel(context.Background())
	return b
}

// optionsOf returns the options r carries, or the bridge's own.
func (b *Bridge) optionsOf(r *Request) *BridgeOptions {
	switch {
	case r.Options == nil:
		return b.defaults
	case !r.Options.ready:
		return r.Options.Ready()
	}
	return r.Options
}

// Parked returns how many calls are parked.
func (b *Bridge) Parked() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.parked)
}

// Close abandons every parked call (their upstream requests are answered
// and cancelled) and refuses new ones.
func (b *Bridge) Close() {
	b.mu.Lock()
	b.closed = true
	var all []*call
	for _, c := range b.parked {
		c.timer.Stop()
		all = append(all, c)
	}
	clear(b.parked)
	b.mu.Unlock()
	for _, c := range all {
		b.unparked(c, ParkCancelled)
		b.abandon(c, OutcomeCancelled, "gateway shutting down")
	}
	b.cancel()
}

// Request is one validated modern request for the bridge.
type Request struct {
	// Upstream is the URL of the legacy upstream.
	Upstream string
	// Principal identifies who is calling: PrincipalHash of the evaluated
	// principal expression (e.g. of Authorization). Sessions and parked
	// calls are never shared across principals.
	Principal [16]byte
	// Header is sent upstream with the session's requests.
	Header http.Header
	// NoGetStream: the upstream sends everything a call needs on the
	// call's own stream, so the sessions leased for calls open no
	// standalone GET stream (subscriptions/listen still does).
	NoGetStream bool
	// Options are those of the configuration that received the request,
	// made by Ready (nil: the bridge's own). A call keeps the
	// options of its first request for its whole life (limits, park TTL,
	// observer); a retry's requestState is opened, and the next round's
	// sealed, with the options of the request carrying it.
	Options *BridgeOptions
	// GatherAlways makes every round of the call wait GatherWindow for
	// sibling questions (the upstream is configured with gather always).
	GatherAlways bool
	// Failover, if set, is asked for another upstream when a new upstream
	// session could not be opened on Upstream and nothing of the request
	// reached it: the connection was refused, or dropped before the
	// upstream answered initialize (or, on an idle session the call
	// would have used, the connection of its first request was refused).
	// It points r at another upstream (Upstream, NoGetStream,
	// GatherAlways) and returns true, or returns false to give up: the
	// client then gets the error.
	// It must give up after finitely many calls (say, once per upstream).
	// It is never asked once the request may have reached an upstream,
	// nor for a retry carrying requestState, which belongs to the call it
	// resumes.
	Failover func(r *Request, cause error) bool
	*ModernRequest

	retry *openedState // the requestState as RetryOf opened it
}

// openedState is a retry's requestState, opened and checked once.
type openedState struct {
	st   State
	rerr *RPCError
}

// bridgedMethods are the 2026-07-28 client requests a legacy server can
// serve through the bridge.
var bridgedMethods = map[string]bool{
	"server/discover": true, "subscriptions/listen": true, "completion/complete": true,
	"tools/list": true, "tools/call": true, "prompts/list": true, "prompts/get": true,
	"resources/list": true, "resources/templates/list": true, "resources/read": true,
}

// inputCapable methods may return input_required (MRTR): only these park.
var inputCapable = map[string]bool{"tools/call": true, "prompts/get": true, "resources/read": true}

// Serve answers r through sink. It returns when the answer is complete
// (possibly with the call parked).
func (b *Bridge) Serve(ctx context.Context, r Request, sink Sink) Served {
	if r.Kind == KindNotification {
		// notifications/cancelled is stdio-only in 2026-07-28; nothing else
		// is meaningful for a legacy upstream.
		_ = sink.Respond(http.StatusAccepted, nil)
		return Served{}
	}
	if !bridgedMethods[r.Method] {
		// A legacy server cannot serve other modern methods (the Tasks
		// extension's are not wire-compatible with 2025 tasks).
		_ = sink.Respond(http.StatusNotFound, ErrorResponse(r.ID, NewMethodNotFound(r.Method)))
		return Served{Outcome: OutcomeError}
	}
	r.Options = b.optionsOf(&r)
	params := paramsOf(r.Body)
	if inputCapable[r.Method] {
		if state := stringField(params, "requestState"); state != "" {
			return b.resume(ctx, r, params, state, sink)
		}
	}
	started := time.Now()
	if rerr := b.roomBeforeStart(r); rerr != nil {
		// Refused before it reached the upstream: no side effect there.
		_ = sink.Respond(rerr.HTTPStatus, ErrorResponse(r.ID, rerr))
		c := &call{key: poolKey(r), method: r.Method, name: r.Name, started: started, opts: r.Options}
		b.unparked(c, ParkRefused)
		b.report(c, OutcomeRefused, rerr.Message)
		return Served{Outcome: OutcomeRefused}
	}
	c, rerr := b.start(ctx, &r, params)
	if rerr != nil {
		_ = sink.Respond(rerr.HTTPStatus, ErrorResponse(r.ID, rerr))
		outcome := OutcomeError
		if rerr.HTTPStatus == 499 {
			outcome = OutcomeCancelled
		}
		if r.Method != "server/discover" && r.Method != "subscriptions/listen" {
			// A call that never reached the upstream still ended.
			b.report(&call{key: poolKey(r), method: r.Method, name: r.Name, started: started, opts: r.Options}, outcome, rerr.detail())
		}
		return Served{Outcome: outcome, Cause: rerr.Cause}
	}
	switch r.Method {
	case "server/discover":
		return Served{Outcome: b.discover(c, r, sink)}
	case "subscriptions/listen":
		b.listen(ctx, c, r, params, sink)
		return Served{}
	}
	var fresh map[string]json.RawMessage
	if inputCapable[r.Method] {
		fresh = inputResponses(params)
	}
	outcome, cause := b.run(ctx, c, r, sink, fresh, false)
	return Served{Outcome: outcome, Cause: cause}
}

// call is one upstream request of the bridge's, from its first client
// request to its result, across every parking.
type call struct {
	key      legacy.PoolKey
	opts     *BridgeOptions // of the call's first request
	always   bool           // Request.GatherAlways
	sess     *legacy.Session
	up       *legacy.Call // nil for server/discover
	cancelUp context.CancelFunc
	method   string
	name     string    // tool or prompt name, or resource URI
	started  time.Time // first request
	expires  time.Time // while parked
	handle   [16]byte
	round    uint32
	digest   [16]byte // of the request, computed when the call first parks
	princ    [16]byte
	keys     KeyCounter
	pending  []pendingInput
	held     []legacy.Message // arrived while parked, for run
	timer    *time.Timer
	placed   bool          // holds a place in Bridge.sets[opts] (bridge_admit.go), under Bridge.mu
	overhead time.Duration // spent translating (CallReport.Overhead)
}

type pendingInput struct {
	InputRequest
	upstreamID json.RawMessage
}

// start leases a session and sends the request upstream (re-initializing
// once if the upstream forgot the session). When nothing reached the
// upstream (see Request.Failover), it starts again on the upstream
// r.Failover points r at.
func (b *Bridge) start(ctx context.Context, r *Request, params []byte) (*call, *RPCError) {
	info := metaField(params, MetaClientInfo)
	c := &call{opts: r.Options, method: r.Method, name: r.Name, started: time.Now(), princ: r.Principal}
	if _, err := rand.Read(c.handle[:]); err != nil {
		return nil, internalError("no randomness")
	}
	failover := func(err error) bool { return r.Failover != nil && r.Failover(r, err) }
	for attempt := 0; ; {
		key := poolKey(*r)
		c.key, c.always = key, r.GatherAlways
		sess, err := b.pool.Lease(ctx, key, r.Header, []byte(key.Caps), info, r.Options.Lease)
		if err != nil {
			if unopened(ctx, err) && failover(err) {
				continue
			}
			return nil, upstreamError(err)
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
				if ctx.Err() == nil && legacy.Refused(err) && failover(err) {
					continue // an idle session of a dead upstream
				}
				return nil, upstreamError(err)
			}
		}
		// The call outlives the client's request (it may park), but until
		// the upstream answers the headers, a client that leaves cancels it.
		callCtx, cancelCall := context.WithCancel(b.ctx)
		stop := context.AfterFunc(ctx, cancelCall)
		id := sess.NewRequestID()
		c.up, err = sess.CallWithID(callCtx, id, r.Method, upstreamParams(params))
		if !stop() {
			// The client left first. A legacy server does not take a
			// dropped connection for a cancellation: tell it.
			if err == nil {
				c.up.Close()
			}
			cancelCall()
			b.cancelUpstream(sess, id, "client disconnected")
			b.pool.Release(key, sess, false)
			return nil, &RPCError{HTTPStatus: 499, Code: InternalError, Message: "client disconnected"}
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
		case ctx.Err() == nil && legacy.Refused(err) && failover(err):
			// The call never left: an idle session of a dead upstream.
		default:
			return nil, upstreamError(err)
		}
	}
}

// discover answers server/discover from the session's InitializeResult.
func (b *Bridge) discover(c *call, r Request, sink Sink) string {
	defer b.pool.Release(c.key, c.sess, true)
	res, err := BuildDiscoverResult(c.sess.InitResult, b.reshapeOptions(c))
	if err != nil {
		_ = sink.Respond(http.StatusBadGateway, ErrorResponse(r.ID, internalError(err.Error())))
		return OutcomeError
	}
	_ = sink.Respond(http.StatusOK, resultResponse(r.ID, res))
	return OutcomeComplete
}

func (b *Bridge) reshapeOptions(c *call) ReshapeOptions {
	return ReshapeOptions{ServerInfo: serverInfo(c.sess.InitResult)}
}

// run relays the upstream answer until the result, or until the upstream
// asks for input and the call parks. It returns the request's outcome, and
// the upstream failure that ended it, if any (for the logs).
//
// Once the upstream has asked, the round takes the questions already there
// and parks; for a target known to ask several at once, or not known yet
// (gatherPolicy), it waits GatherWindow for siblings first. A round that asks again for
// answers missing from the retry (reask) takes what is there and parks.
func (b *Bridge) run(ctx context.Context, c *call, r Request, sink Sink, fresh map[string]json.RawMessage, reask bool) (string, error) {
	var gather <-chan time.Time
	asked := 0          // new questions this round
	collecting := reask // the round takes what is already there, then parks
	taken := 0          // messages taken while collecting
	msgs := c.up.Messages()
	for {
		var m legacy.Message
		ok, inbox := true, false
		switch {
		case len(c.held) > 0:
			m, c.held = c.held[0], c.held[1:]
		case collecting:
			if taken++; taken > maxCollected {
				return b.parkRound(c, r, sink, asked), nil // a chatty upstream
			}
			yieldToReaders()
			select {
			case m, ok = <-msgs:
			case m = <-c.sess.Inbox():
				inbox = true
			default:
				return b.parkRound(c, r, sink, asked), nil
			}
		default:
			select {
			case m, ok = <-msgs:
			case m = <-c.sess.Inbox():
				inbox = true
			case <-gather:
				return b.parkRound(c, r, sink, asked), nil
			case <-ctx.Done():
				return b.requestEnded(ctx, c, r, sink), nil
			}
		}
		if !ok {
			return b.upstreamEnded(c, r, sink)
		}
		switch {
		case m.Kind == legacy.KindRequest:
			if !b.upstreamRequest(c, r, m, fresh) {
				continue
			}
		case inbox:
			continue // the session's other messages are not the call's
		case m.Kind == legacy.KindResponse && string(m.ID) == string(c.up.ID):
			b.finish(c, true)
			outcome := b.respondFinal(c, r, m, sink)
			b.report(c, outcome, "")
			return outcome, nil
		case m.Kind == legacy.KindNotification:
			if err := relayNotification(m, r, sink); err != nil {
				// The client stopped reading (or left): nobody will
				// see the result.
				b.abandon(c, OutcomeCancelled, "client stopped reading")
				return OutcomeCancelled, nil
			}
			continue
		default:
			continue
		}
		asked++
		o := c.opts
		if len(c.pending) > o.MaxInputsPerRound {
			b.gather.learn(c, asked > 1)
			b.abandon(c, OutcomeError, "too many requests for input")
			_ = sink.Respond(http.StatusBadGateway, ErrorResponse(r.ID, internalError(
				fmt.Sprintf("the upstream asked for more than %d inputs in one round (max_inputs_per_round); the call was cancelled", o.MaxInputsPerRound))))
			return OutcomeError, nil
		}
		if asked == 1 && !collecting {
			if b.gather.waits(c) {
				gather = time.After(o.GatherWindow)
			} else {
				collecting = true
			}
		}
	}
}

// requestEnded abandons c when the client's request ended before the call:
// the client left, or the gateway is stopping (the client may still be
// listening: it is told).
func (b *Bridge) requestEnded(ctx context.Context, c *call, r Request, sink Sink) string {
	cause := context.Cause(ctx)
	if errors.Is(cause, context.Canceled) {
		b.abandon(c, OutcomeCancelled, "client disconnected")
		return OutcomeCancelled
	}
	b.abandon(c, OutcomeCancelled, "gateway shutting down")
	_ = sink.Respond(http.StatusServiceUnavailable, ErrorResponse(r.ID, &RPCError{
		HTTPStatus: http.StatusServiceUnavailable, Code: InternalError, Message: "the call was abandoned: " + cause.Error()}))
	return OutcomeCancelled
}

// upstreamEnded answers the client when the upstream's answer ended without
// the call's result; it returns the outcome and why (for the logs: the
// transport's error may name the upstream's address).
func (b *Bridge) upstreamEnded(c *call, r Request, sink Sink) (string, error) {
	rerr := upstreamFailure("the upstream ended the call without a result", c.up.Err())
	switch {
	case errors.Is(rerr.Cause, legacy.ErrBacklog):
		// The upstream is still working: tell it to stop. The client may
		// know why (max_buffered_notifications).
		rerr.Message += ": " + legacy.ErrBacklog.Error()
		b.abandon(c, OutcomeError, "too many unread messages")
	case errors.Is(rerr.Cause, legacy.ErrJSONTooDeep):
		// Its stream was closed on a nesting bomb; it may still be
		// working on the call.
		rerr.Message += ": it sent JSON nested too deeply"
		b.abandon(c, OutcomeError, "the upstream sent JSON nested too deeply")
	default:
		b.finish(c, false)
		b.report(c, OutcomeError, rerr.detail())
	}
	_ = sink.Respond(http.StatusBadGateway, ErrorResponse(r.ID, rerr))
	return OutcomeError, rerr.Cause
}

// upstreamRequest handles a request the upstream made during the call. It
// reports whether the request now waits for the client.
func (b *Bridge) upstreamRequest(c *call, r Request, m legacy.Message, fresh map[string]json.RawMessage) bool {
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	params := m.Params()
	switch {
	case m.Method == "ping":
		_ = c.sess.Respond(ctx, m.ID, []byte("{}"), nil)
		return false
	case !IsInputMethod(m.Method) || !inputCapable[c.method]:
		_ = c.sess.Respond(ctx, m.ID, nil, []byte(`{"code":-32601,"message":"Method not found"}`))
		return false
	case !ClientSupports(r.ClientCapabilities, m.Method, params):
		res, errObj := CancelAnswer(m.Method)
		_ = c.sess.Respond(ctx, m.ID, res, errObj)
		return false
	}
	w := startWatch(&c.overhead)
	ir, err := NewInputRequest(m.Method, params, &c.keys)
	w.stop()
	if err != nil {
		res, errObj := CancelAnswer(m.Method)
		_ = c.sess.Respond(ctx, m.ID, res, errObj)
		return false
	}
	if resp, ok := fresh[ir.Key]; ok && ValidateInputResponse(ir.Method, resp) == nil {
		// The client already answered this question (a fresh request
		// carrying inputResponses): no round trip.
		_ = c.sess.Respond(ctx, m.ID, resp, nil)
		return false
	}
	c.pending = append(c.pending, pendingInput{InputRequest: ir, upstreamID: m.ID})
	return true
}

// abandon ends a call nobody will finish: the upstream's pending requests
// are answered (elicitation cancelled, others refused), the upstream call
// is cancelled, and the session is ended upstream (a cancelled call may have
// left it in any state; a new one is cheap).
func (b *Bridge) abandon(c *call, outcome, reason string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, p := range c.pending {
		res, errObj := CancelAnswer(p.Method)
		_ = c.sess.Respond(ctx, p.upstreamID, res, errObj)
	}
	for _, m := range c.held {
		if m.Kind == legacy.KindRequest {
			res, errObj := CancelAnswer(m.Method)
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

// cancelUpstream sends notifications/cancelled for the request id.
func (b *Bridge) cancelUpstream(sess *legacy.Session, id json.RawMessage, reason string) {
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	params, _ := json.Marshal(map[string]any{"requestId": id, "reason": reason})
	_ = sess.Notify(ctx, "notifications/cancelled", params)
}

// finish closes the upstream call, releases the session and frees the
// call's place among the parked calls.
func (b *Bridge) finish(c *call, healthy bool) {
	b.release(c)
	if c.up != nil {
		c.up.Close()
		c.cancelUp()
	}
	b.pool.Release(c.key, c.sess, healthy)
}

// report tells c's observer the call ended.
func (b *Bridge) report(c *call, outcome, reason string) {
	if obs := c.opts.Observer; obs != nil {
		obs.CallEnded(CallReport{
			Bridge: "forward", Upstream: c.key.Upstream, Method: c.method, Name: c.name,
			Rounds: int(c.round), Outcome: outcome, Reason: reason,
			Duration: time.Since(c.started), Overhead: c.overhead,
		})
	}
}

// respondFinal reshapes the upstream's response for the modern client and
// returns the outcome.
func (b *Bridge) respondFinal(c *call, r Request, m legacy.Message, sink Sink) string {
	w := startWatch(&c.overhead)
	if res := resultOf(m.Raw); res != nil {
		out, err := ReshapeResult(r.Method, res, b.reshapeOptions(c))
		w.stop()
		if err != nil {
			_ = sink.Respond(http.StatusBadGateway, ErrorResponse(r.ID, internalError(err.Error())))
			return OutcomeError
		}
		_ = sink.Respond(http.StatusOK, resultResponse(r.ID, out))
		return OutcomeComplete
	}
	errObj := errorOf(m.Raw)
	if reqs, ok := URLElicitationFromError(errObj); ok && inputCapable[r.Method] {
		// A legacy "URL elicitation required" error becomes an input round:
		// the client retries once the user is done, and the call runs again.
		answer := resultResponse(r.ID, InputRequiredResult(reqs, ""))
		w.stop()
		_ = sink.Respond(http.StatusOK, answer)
		return OutcomeInputRequired
	}
	code, out := ReshapeError(errObj)
	w.stop()
	status := http.StatusOK
	switch code {
	case MissingRequiredClientCapability:
		status = http.StatusBadRequest // the gateway's convention for legacy servers, see README
	case MethodNotFound:
		status = http.StatusNotFound
	}
	_ = sink.Respond(status, errorObjectResponse(r.ID, out))
	return OutcomeError
}

// setLogLevel sets the session's logging level (logging/setLevel).
func setLogLevel(ctx context.Context, sess *legacy.Session, level string) error {
	p, _ := json.Marshal(map[string]string{"level": level})
	call, err := sess.Call(ctx, "logging/setLevel", p)
	if err != nil {
		return err
	}
	defer call.Close()
	_, err = call.Final()
	return err
}

// relayNotification passes on the notifications related to the request:
// progress always, log messages only when the request asked with logLevel.
// It returns the sink's error: the client is not reading.
func relayNotification(m legacy.Message, r Request, sink Sink) error {
	switch m.Method {
	case "notifications/progress":
		return sink.Notify(m.Raw)
	case "notifications/message":
		if r.LogLevel != "" && logLevelAtLeast(stringField(m.Params(), "level"), r.LogLevel) {
			return sink.Notify(m.Raw)
		}
	}
	return nil
}

// logLevelAtLeast reports whether level is at or above threshold in the
// order of logLevels.
func logLevelAtLeast(level, threshold string) bool {
	l, t := slices.Index(logLevels, level), slices.Index(logLevels, threshold)
	return l >= 0 && l >= t
}

// poolKey derives the session key of a request.
func poolKey(r Request) legacy.PoolKey {
	return legacy.PoolKey{Upstream: r.Upstream, Principal: hex.EncodeToString(r.Principal[:]), Caps: legacyCapabilities(r.ClientCapabilities),
		NoGetStream: r.NoGetStream && r.Method != "subscriptions/listen"}
}

func internalError(msg string) *RPCError {
	return &RPCError{HTTPStatus: http.StatusBadGateway, Code: InternalError, Message: msg}
}
