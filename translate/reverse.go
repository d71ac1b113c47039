package translate

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tidwall/gjson"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/legacy"
)

// This file is the reverse bridge: legacy (2025-11-25 and earlier) clients
// in front of modern (2026-07-28) servers. The gateway holds the legacy
// session itself, in a sealed session id; sends each legacy request upstream
// statelessly with the full _meta; and turns every input_required round of
// the upstream into in-line requests on the SSE answer to the legacy
// client, whose POSTed answers it collects before retrying upstream
// (PROTOCOL.md §8.2, §8.3).

// ReverseOptions configure the reverse bridge's sessions: those of one
// configuration (one mcp_gateway handler), which opens them with its own
// options (InitRequest.Options, Open); the bridge's own serve the rest. They
// are taken as given, with no defaulting here: start from
// DefaultReverseOptions, which holds the documented defaults.
type ReverseOptions struct {
	// Keyring seals and opens the gateway-held session ids. Required.
	Keyring *legacy.Keyring
	// Instance names this gateway instance in the ids of the in-line
	// requests it sends, so that an answer reaching another instance can be
	// recognized and forwarded to this one.
	Instance string
	// Address is this instance's advertised base URL. When set, the ids of
	// in-line requests also carry it, sealed, so that another instance can
	// forward an answer here without a peer list.
	Address string
	// MaxRounds bounds the input_required rounds of one legacy request.
	MaxRounds int
	// MaxInputsPerRound bounds the input requests of one round; a round
	// asking for more ends the call with an error.
	MaxInputsPerRound int
	// RoundTimeout bounds how long a round waits for the client's answers.
	RoundTimeout time.Duration
	// SessionLifetime is how long a gateway-held session id stays valid
	// after initialize.
	SessionLifetime time.Duration
	// RetryPause is the wait before retrying a requestState-only
	// input_required result (load shedding).
	RetryPause time.Duration
	// Observer learns how calls end (metrics, logs). Optional.
	Observer Observer

	ownerTag string // Instance and Address sealed, for in-line ids
	ready    bool   // made by Ready
}

// DefaultReverseOptions returns the documented defaults of the reverse
// bridge's options, and is their one source (see DefaultBridgeOptions).
// Keyring, Instance, Address and Observer are left unset.
func DefaultReverseOptions() ReverseOptions {
	return ReverseOptions{
		MaxRounds:         defaultMaxRounds,
		MaxInputsPerRound: defaultMaxInputsPerRound,
		RoundTimeout:      defaultRoundTimeout,
		SessionLifetime:   24 * time.Hour,
		RetryPause:        250 * time.Millisecond,
	}
}

// Ready returns o as the options of one configuration, made once and passed
// to Initialize and Open: it seals Instance and Address for the ids of
// in-line requests. o is taken as given (see DefaultReverseOptions).
func (o ReverseOptions) Ready() *ReverseOptions {
	if o.Address != "" && o.Keyring != nil {
		o.ownerTag = sealOwner(o.Keyring, Owner{Instance: o.Instance, Address: o.Address})
	}
	o.ready = true
	return &o
}

// Bounds of the reverse bridge's per-instance tables.
const (
	maxSessionFacts   = 100000 // log levels, deleted sessions
	maxDiscoverCached = 1024
	maxDiscoverTTL    = time.Hour
)

// ErrNoSession means a session id is not (or no longer) a session of this
// principal: forged, tampered, sealed under a retired key, expired,
// deleted, or opened by someone else. The client must initialize again.
var ErrNoSession = errors.New("translate: no such session")

// errCallCancelled is the cause of a call the client cancelled with
// notifications/cancelled.
var errCallCancelled = errors.New("cancelled by the client")

// Reverse is the reverse bridge. It is safe for concurrent use.
type Reverse struct {
	client   *http.Client
	defaults *ReverseOptions // of the sessions opened without options
	nextID   atomic.Uint64

	levels   *expiringTable[[16]byte, string]   // logging/setLevel, per session
	deleted  *expiringTable[[16]byte, struct{}] // DELETEd sessions
	discover *expiringTable[string, []byte]     // server/discover results

	toolLists *expiringTable[string, toolHeaders] // x-mcp-header annotations (reverse_params.go)

	subsMu sync.Mutex                                      // serializes creating subscriptions
	subs   *expiringTable[[16]byte, *reverseSubscriptions] // resources/subscribe and the GET stream

	mu      sync.Mutex
	waiting map[string]*leg       // in-line request id -> the round waiting for it
	calls   map[callKey]*liveCall // calls in progress, for notifications/cancelled
}

// leg is one in-line request of a round, waiting for the client's answer.
type leg struct {
	key     string
	method  string
	session [16]byte
	answers chan<- legAnswer
}

type legAnswer struct {
	key string
	msg gjson.Result // the client's JSON-RPC response
}

type callKey struct {
	session [16]byte
	id      string // the raw JSON id of the client's request
}

type liveCall struct {
	cancel context.CancelCauseFunc
}

// NewReverse returns a reverse bridge that reaches modern upstreams with
// client, with opts for the sessions opened without options of their own.
func NewReverse(client *http.Client, opts ReverseOptions) *Reverse {
	rv := &Reverse{
		client:    client,
		defaults:  opts.Ready(),
		levels:    newExpiringTable[[16]byte, string](maxSessionFacts),
		deleted:   newExpiringTable[[16]byte, struct{}](maxSessionFacts),
		discover:  newExpiringTable[string, []byte](maxDiscoverCached),
		subs:      newExpiringTable[[16]byte, *reverseSubscriptions](maxSessionFacts),
		toolLists: newExpiringTable[string, toolHeaders](maxToolListsCached),
		waiting:   make(map[string]*leg),
		calls:     make(map[callKey]*liveCall),
	}
	return rv
}

// optionsOf returns o made Ready, or the bridge's own when nil.
func (rv *Reverse) optionsOf(o *ReverseOptions) *ReverseOptions {
	switch {
	case o == nil:
		return rv.defaults
	case !o.ready:
		return o.Ready()
	}
	return o
}

// options returns the options s was opened with.
func (rv *Reverse) options(s *ReverseSession) *ReverseOptions { return rv.optionsOf(s.opts) }

// Waiting returns how many in-line requests wait for a client's answer.
func (rv *Reverse) Waiting() int {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	return len(rv.waiting)
}

// ReverseRequest is one legacy request or notification of a session.
type ReverseRequest struct {
	// Message is the envelope Peek returned for Body.
	Message
	// Body is the JSON-RPC message as received.
	Body []byte
	// Header is sent upstream (Authorization, trace context).
	Header http.Header
}

// Serve answers a request or notification of session s through sink. It
// returns when the answer is complete.
func (rv *Reverse) Serve(ctx context.Context, s *ReverseSession, r ReverseRequest, sink Sink) Served {
	if r.Kind == KindNotification {
		if r.Method == "notifications/cancelled" {
			rv.cancel(s, gjson.GetBytes(r.Body, "params.requestId"))
		}
		// notifications/initialized and roots/list_changed need nothing:
		// the session is ready at once, and roots are asked per request.
		_ = sink.Respond(http.StatusAccepted, nil)
		return Served{}
	}
	switch r.Method {
	case "initialize":
		_ = sink.Respond(http.StatusBadRequest, ErrorResponse(r.ID, errorf(http.StatusBadRequest, InvalidRequest, "Invalid Request: the session is already initialized")))
	case "ping":
		_ = sink.Respond(http.StatusOK, resultResponse(r.ID, []byte("{}")))
	case "logging/setLevel":
		level := gjson.GetBytes(r.Body, "params.level")
		if level.Type != gjson.String || !slices.Contains(logLevels, level.Str) {
			_ = sink.Respond(http.StatusOK, ErrorResponse(r.ID, errorf(http.StatusBadRequest, InvalidParams, "Invalid params: level must be one of %v", logLevels)))
			return Served{}
		}
		now := time.Now()
		rv.levels.put(s.ID, level.Str, s.Issued.Add(rv.options(s).SessionLifetime), now)
		_ = sink.Respond(http.StatusOK, resultResponse(r.ID, []byte("{}")))
	case "resources/subscribe", "resources/unsubscribe":
		// Kept by this instance for the session's GET stream, which
		// subscribes upstream (reverse_listen.go).
		uri := gjson.GetBytes(r.Body, "params.uri")
		if uri.Type != gjson.String {
			_ = sink.Respond(http.StatusOK, ErrorResponse(r.ID, errorf(http.StatusBadRequest, InvalidParams, "Invalid params: uri must be a string")))
			return Served{}
		}
		if rerr := rv.subscribe(s, uri.Str, r.Method == "resources/subscribe"); rerr != nil {
			_ = sink.Respond(http.StatusOK, ErrorResponse(r.ID, rerr))
			return Served{}
		}
		_ = sink.Respond(http.StatusOK, resultResponse(r.ID, []byte("{}")))
	default:
		return rv.call(ctx, s, r, sink)
	}
	return Served{}
}

// cancel ends the call of s whose request id is id.
func (rv *Reverse) cancel(s *ReverseSession, id gjson.Result) {
	if !id.Exists() {
		return
	}
	rv.mu.Lock()
	c := rv.calls[callKey{s.ID, id.Raw}]
	rv.mu.Unlock()
	if c != nil {
		c.cancel(errCallCancelled)
	}
}

// call sends a request upstream and answers it, running the input rounds
// the upstream asks for.
func (rv *Reverse) call(ctx context.Context, s *ReverseSession, r ReverseRequest, sink Sink) (served Served) {
	o := rv.options(s)
	started := time.Now()
	var overhead time.Duration
	reason := ""
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	key := callKey{s.ID, string(r.ID)}
	lc := &liveCall{cancel: cancel}
	rv.mu.Lock()
	rv.calls[key] = lc
	rv.mu.Unlock()
	defer func() {
		rv.mu.Lock()
		if rv.calls[key] == lc {
			delete(rv.calls, key)
		}
		rv.mu.Unlock()
	}()

	params := paramsOf(r.Body)
	name, hasName := "", false
	if f := nameSourceField(r.Method); f != "" {
		if v := gjson.GetBytes(params, f); v.Type == gjson.String {
			name, hasName = v.Str, true
		}
	}
	defer func() {
		if obs := o.Observer; obs != nil {
			obs.CallEnded(CallReport{
				Bridge: "reverse", Upstream: s.Upstream, Method: r.Method, Name: name,
				Rounds: served.Round, Outcome: served.Outcome, Reason: reason,
				Duration: time.Since(started), Overhead: overhead,
			})
		}
	}()
	if rerr := checkUniqueParams(params); rerr != nil {
		// Before the headers are derived, and before anything goes
		// upstream.
		reason = rerr.Message
		served.Outcome = OutcomeError
		rv.respondError(r, sink, rerr)
		return served
	}
	level, _ := rv.levels.get(s.ID, time.Now())
	hdr := modernHeader(r.Header, r.Method, name, hasName)
	paramHeaders := r.Method == "tools/call" && hasName
	if paramHeaders {
		setParamHeaders(hdr, rv.toolHeadersOf(ctx, s, r.Header, false)[name], gjson.GetBytes(params, "arguments"))
	}
	var responses map[string]json.RawMessage
	var state string              // the raw JSON string of the last requestState
	served.Outcome = OutcomeError // unless the call completes or is cancelled
	for round := 0; ; round++ {
		served.Round = round
		id := rv.upstreamID(o)
		w := startWatch(&overhead)
		body, err := upstreamRequest(id, r.Method, params, s, level, responses, state)
		w.stop()
		if err != nil {
			reason = err.Error()
			rv.respondError(r, sink, errorf(http.StatusBadRequest, InvalidParams, "Invalid params: %v", err))
			return served
		}
		final, rerr := rv.exchange(ctx, s.Upstream, hdr, body, id, sink, level)
		if ctx.Err() != nil {
			served.Outcome, reason = rv.abandoned(ctx, r, sink, nil)
			return served
		}
		if rerr != nil {
			served.Outcome, reason = rv.abandoned(ctx, r, sink, rerr)
			served.Cause = rerr.Cause
			return served
		}
		if e := final.Get("error"); e.Exists() {
			if paramHeaders && e.Get("code").Int() == HeaderMismatch {
				// The tool's x-mcp-header annotations may have changed:
				// read them again and send the same request once more.
				paramHeaders = false
				hdr = modernHeader(r.Header, r.Method, name, hasName)
				setParamHeaders(hdr, rv.toolHeadersOf(ctx, s, r.Header, true)[name], gjson.GetBytes(params, "arguments"))
				round--
				continue
			}
			w := startWatch(&overhead)
			answer := errorObjectResponse(r.ID, LegacyError(r.Method, []byte(e.Raw)))
			w.stop()
			_ = sink.Respond(http.StatusOK, answer)
			return served
		}
		res := final.Get("result")
		switch rt := res.Get("resultType"); {
		case !res.IsObject():
			reason = "the upstream answered without a result object"
			rv.respondError(r, sink, internalError(reason))
			return served
		case !rt.Exists() || rt.Type == gjson.String && rt.Str == "complete":
			w := startWatch(&overhead)
			out, err := LegacyResult(r.Method, []byte(res.Raw))
			w.stop()
			if err != nil {
				reason = err.Error()
				rv.respondError(r, sink, internalError(reason))
				return served
			}
			_ = sink.Respond(http.StatusOK, resultResponse(r.ID, out))
			served.Outcome = OutcomeComplete
			return served
		case rt.Str != "input_required":
			reason = fmt.Sprintf("the upstream answered with resultType %s, which legacy clients cannot receive", clip(rt.Raw))
			rv.respondError(r, sink, internalError(reason))
			return served
		case !inputCapable[r.Method]:
			reason = "the upstream asked for input on " + r.Method + ", which cannot ask for input"
			rv.respondError(r, sink, internalError(reason))
			return served
		case round >= o.MaxRounds:
			reason = fmt.Sprintf("the server asked for input more than %d times; giving up", o.MaxRounds)
			rv.fail(r, sink, reason)
			return served
		}
		reqs, st := res.Get("inputRequests"), res.Get("requestState")
		hasReqs := reqs.IsObject() && len(reqs.Map()) > 0
		if !hasReqs && st.Type != gjson.String {
			reason = "the upstream answered input_required with neither inputRequests nor requestState"
			rv.respondError(r, sink, internalError(reason))
			return served
		}
		state = ""
		if st.Type == gjson.String {
			state = st.Raw // byte-exact, escapes included
		}
		responses = nil
		if !hasReqs {
			// Load shedding: retry after a pause, with the state only.
			select {
			case <-time.After(o.RetryPause):
				continue
			case <-ctx.Done():
				served.Outcome, reason = rv.abandoned(ctx, r, sink, nil)
				return served
			}
		}
		var fail string
		responses, fail = rv.ask(ctx, s, r, sink, reqs, startWatch(&overhead))
		if ctx.Err() != nil {
			served.Outcome, reason = rv.abandoned(ctx, r, sink, nil)
			return served
		}
		if fail != "" {
			reason = fail
			if strings.HasPrefix(fail, noAnswer) {
				served.Outcome = OutcomeExpired
			}
			rv.fail(r, sink, fail)
			return served
		}
		served.Round = round + 1
	}
}

// noAnswer starts the failure of a round whose answers did not come in time.
const noAnswer = "the client did not answer"

// ask sends one round's input requests in-line to the client and collects
// its answers. It returns the inputResponses, or why the round failed (""
// when it did not); when ctx ends first it returns nothing.
//
// w, started by the caller, measures the time spent building the in-line
// requests; it is stopped before they are sent.
func (rv *Reverse) ask(ctx context.Context, s *ReverseSession, r ReverseRequest, sink Sink, reqs gjson.Result, w stopwatch) (map[string]json.RawMessage, string) {
	o := rv.options(s)
	type inline struct {
		id, key, method string
		params          []byte
	}
	var legs []inline
	fail := ""
	n := 0
	reqs.ForEach(func(_, _ gjson.Result) bool { n++; return true })
	if n > o.MaxInputsPerRound {
		return nil, fmt.Sprintf("the server asked for %d inputs in one round, more than %d (max_inputs_per_round); giving up", n, o.MaxInputsPerRound)
	}
	reqs.ForEach(func(k, v gjson.Result) bool {
		method, params := v.Get("method"), v.Get("params")
		switch {
		case !v.IsObject() || method.Type != gjson.String || !IsInputMethod(method.Str):
			fail = fmt.Sprintf("the server asked for input %q of an unknown kind", clip(k.Str))
		case method.Str != MethodListRoots && !params.IsObject():
			fail = fmt.Sprintf("the server's input request %q (%s) has no params", clip(k.Str), method.Str)
		case !ClientSupports(s.Capabilities, method.Str, []byte(params.Raw)):
			fail = fmt.Sprintf("cannot ask for input %q (%s): this client did not declare the capability %s at initialize",
				clip(k.Str), method.Str, RequiredCapability(method.Str, []byte(params.Raw)))
		}
		if fail != "" {
			return false
		}
		p := []byte(nil)
		if params.IsObject() {
			p = []byte(params.Raw)
		}
		if method.Str == MethodElicit && elicitMode(p) == "url" && !gjson.GetBytes(p, "elicitationId").Exists() {
			// 2025-11-25 URL mode requires an elicitationId; 2026 has none.
			var rnd [16]byte
			_, _ = rand.Read(rnd[:])
			if at, text, ok := insertMember(string(p), "elicitationId", `"elicitationId":"`+hex.EncodeToString(rnd[:])+`"`); ok {
				p = []byte(string(p[:at]) + text + string(p[at:]))
			}
		}
		legs = append(legs, inline{id: rv.inlineID(o), key: k.Str, method: method.Str, params: p})
		return true
	})
	w.stop()
	if fail != "" {
		return nil, fail
	}

	answers := make(chan legAnswer, len(legs))
	rv.mu.Lock()
	for _, l := range legs {
		rv.waiting[l.id] = &leg{key: l.key, method: l.method, session: s.ID, answers: answers}
	}
	rv.mu.Unlock()
	defer func() {
		rv.mu.Lock()
		for _, l := range legs {
			delete(rv.waiting, l.id)
		}
		rv.mu.Unlock()
	}()
	for _, l := range legs {
		msg := make([]byte, 0, 64+len(l.id)+len(l.method)+len(l.params))
		msg = append(msg, `{"jsonrpc":"2.0","id":`...)
		msg = strconv.AppendQuote(msg, l.id)
		msg = append(msg, `,"method":`...)
		msg = strconv.AppendQuote(msg, l.method)
		if l.params != nil {
			msg = append(msg, `,"params":`...)
			msg = append(msg, l.params...)
		}
		msg = append(msg, '}')
		if err := sink.Notify(msg); err != nil {
			return nil, "the client's stream failed: " + err.Error()
		}
	}

	timeout := time.NewTimer(o.RoundTimeout)
	defer timeout.Stop()
	responses := make(map[string]json.RawMessage, len(legs))
	for len(responses) < len(legs) {
		select {
		case a := <-answers:
			if e := a.msg.Get("error"); e.Exists() {
				return nil, fmt.Sprintf("the client refused the server's request for input %q: %s (code %d)",
					clip(a.key), clip(e.Get("message").String()), e.Get("code").Int())
			}
			responses[a.key] = json.RawMessage(a.msg.Get("result").Raw)
		case <-timeout.C:
			return nil, fmt.Sprintf(noAnswer+" the server's request for input within %v", o.RoundTimeout)
		case <-ctx.Done():
			return nil, ""
		}
	}
	return responses, ""
}

// Answer takes a client's JSON-RPC response (its answer to an in-line
// request) for session s. nil means accepted (202).
func (rv *Reverse) Answer(s *ReverseSession, body []byte) *RPCError {
	id := gjson.GetBytes(body, "id")
	if id.Type != gjson.String {
		return errorf(http.StatusBadRequest, InvalidRequest, "Invalid Request: no pending request of this session has id %s", clip(id.Raw))
	}
	inst, _, ok := inlineOwner(id.Str)
	if ok && inst != rv.options(s).Instance {
		return errorf(http.StatusMisdirectedRequest, InvalidRequest,
			"Invalid Request: request %s was sent by gateway instance %s; its answer must reach that instance",
			clip(strconv.Quote(id.Str)), clip(inst))
	}
	rv.mu.Lock()
	l := rv.waiting[id.Str]
	if l != nil && l.session == s.ID {
		delete(rv.waiting, id.Str)
	} else {
		l = nil
	}
	rv.mu.Unlock()
	if l == nil {
		return errorf(http.StatusBadRequest, InvalidRequest,
			"Invalid Request: no pending request of this session has id %s (unknown, already answered, cancelled or timed out)", clip(strconv.Quote(id.Str)))
	}
	l.answers <- legAnswer{key: l.key, msg: gjson.ParseBytes(body)} // buffered for every leg
	return nil
}

// inlineID mints the id of an in-line request: "gw:<instance>:<n>", and
// when the instance advertises an address, "gw:<instance>:<n>:<owner tag>".
func (rv *Reverse) inlineID(o *ReverseOptions) string {
	id := "gw:" + o.Instance + ":" + strconv.FormatUint(rv.nextID.Add(1), 10)
	if o.ownerTag != "" {
		id += ":" + o.ownerTag
	}
	return id
}

// inlineOwner returns the instance an in-line request id names, and its
// owner tag ("" when none).
func inlineOwner(id string) (inst, tag string, ok bool) {
	rest, ok := strings.CutPrefix(id, "gw:")
	if !ok {
		return "", "", false
	}
	inst, rest, ok = strings.Cut(rest, ":")
	if !ok || inst == "" {
		return "", "", false
	}
	n, tag, hasTag := strings.Cut(rest, ":")
	if _, err := strconv.ParseUint(n, 10, 64); err != nil || hasTag && tag == "" {
		return "", "", false
	}
	return inst, tag, true
}

// AnswerOwner reports whether body, a legacy client's JSON-RPC response
// to session s, answers an in-line request another instance than s's
// options name sent, and which. The owner's address is set only from a tag
// sealed with s's keyring that opens and names the same instance.
func (rv *Reverse) AnswerOwner(s *ReverseSession, body []byte) (Owner, bool) {
	id := gjson.GetBytes(body, "id")
	if id.Type != gjson.String {
		return Owner{}, false
	}
	o := rv.options(s)
	inst, tag, ok := inlineOwner(id.Str)
	if !ok || inst == o.Instance {
		return Owner{}, false
	}
	owner := Owner{Instance: inst}
	if sealed, ok := openOwner(o.Keyring, tag); ok && sealed.Instance == inst {
		owner.Address = sealed.Address
	}
	return owner, true
}

// upstreamID mints the JSON-RPC id of an upstream request; every round
// gets a new one.
func (rv *Reverse) upstreamID(o *ReverseOptions) string {
	return "gw-" + o.Instance + "-" + strconv.FormatUint(rv.nextID.Add(1), 10)
}

// exchange sends one request upstream and returns its JSON-RPC response,
// relaying the request's progress notifications (and log messages when
// level is set) to sink, which may be nil. A JSON-RPC error response is a
// response; rerr is for answers that are not one.
func (rv *Reverse) exchange(ctx context.Context, upstream string, hdr http.Header, body []byte, id string, sink Sink, level string) (gjson.Result, *RPCError) {
	a, err := postModern(ctx, rv.client, upstream, hdr, body)
	if err != nil {
		if ctx.Err() != nil {
			return gjson.Result{}, nil
		}
		return gjson.Result{}, upstreamFailure(MsgUpstreamUnavailable, err)
	}
	defer a.close()
	for {
		m, err := a.Next()
		if err != nil {
			if ctx.Err() != nil {
				return gjson.Result{}, nil
			}
			if errors.Is(err, io.EOF) {
				return gjson.Result{}, internalError(errNoResponse.Error())
			}
			// A broken connection, an oversized or garbled answer: the
			// details are the operator's.
			return gjson.Result{}, upstreamFailure(fmt.Sprintf("the upstream's answer (HTTP %d) could not be read", a.status), err)
		}
		switch m.Kind {
		case legacy.KindResponse:
			if v := gjson.ParseBytes(m.ID); v.Type == gjson.String && v.Str == id {
				return gjson.ParseBytes(m.Raw), nil
			}
			if !a.IsStream() {
				return gjson.Result{}, internalError(fmt.Sprintf("the upstream answered HTTP %d with a response to another request", a.status))
			}
		case legacy.KindNotification:
			if sink == nil {
				continue
			}
			if m.Method == "notifications/progress" || m.Method == "notifications/message" && level != "" {
				if err := sink.Notify(m.Raw); err != nil {
					return gjson.Result{}, internalError("the client's stream failed: " + err.Error())
				}
			}
		default:
			if !a.IsStream() {
				return gjson.Result{}, internalError(fmt.Sprintf("the upstream answered HTTP %d without a JSON-RPC response", a.status))
			}
			// A request on a modern response stream is forbidden; ignore it.
		}
	}
}

// abandoned ends the answer of a call that stopped: nothing more is sent
// for a call the client cancelled or left; a call the gateway ended gets
// an error (the client may be listening still).
// It returns the call's outcome and why.
func (rv *Reverse) abandoned(ctx context.Context, r ReverseRequest, sink Sink, rerr *RPCError) (outcome, reason string) {
	if rerr == nil {
		cause := context.Cause(ctx)
		if cause == nil || errors.Is(cause, errCallCancelled) || errors.Is(cause, context.Canceled) {
			_ = sink.Respond(http.StatusAccepted, nil)
			if cause == nil {
				cause = context.Canceled
			}
			return OutcomeCancelled, cause.Error()
		}
		rerr = &RPCError{HTTPStatus: http.StatusServiceUnavailable, Code: InternalError, Message: "the call was abandoned: " + cause.Error()}
	}
	rv.respondError(r, sink, rerr)
	return OutcomeError, rerr.detail()
}

func (rv *Reverse) respondError(r ReverseRequest, sink Sink, e *RPCError) {
	_ = sink.Respond(e.HTTPStatus, ErrorResponse(r.ID, e))
}

// fail ends a call with LegacyFailure.
func (rv *Reverse) fail(r ReverseRequest, sink Sink, msg string) {
	res, errObj := LegacyFailure(r.Method, msg)
	if res != nil {
		_ = sink.Respond(http.StatusOK, resultResponse(r.ID, res))
		return
	}
	_ = sink.Respond(http.StatusOK, errorObjectResponse(r.ID, errObj))
}

// modernHeader builds the headers of a modern upstream request (SEP-2243):
// base (Authorization, trace context) plus the protocol headers.
func modernHeader(base http.Header, method, name string, hasName bool) http.Header {
	h := base.Clone()
	if h == nil {
		h = http.Header{}
	}
	h.Set("Content-Type", "application/json")
	h.Set("Accept", "application/json, text/event-stream")
	h.Set(HeaderProtocolVersion, ModernVersion)
	h.Set(HeaderMethod, method)
	if hasName {
		h.Set(HeaderName, EncodeHeaderValue(name))
	}
	return h
}

// upstreamRequest builds the body of a modern request from a legacy one:
// the client's params (arguments, progressToken and its other _meta kept),
// the per-request _meta of the session, and the MRTR retry fields.
func upstreamRequest(id, method string, params []byte, s *ReverseSession, level string, responses map[string]json.RawMessage, state string) ([]byte, error) {
	p := map[string]json.RawMessage{}
	if len(params) > 0 {
		if err := json.Unmarshal(params, &p); err != nil {
			return nil, errors.New("params must be an object")
		}
	}
	delete(p, "inputResponses")
	delete(p, "requestState")
	meta := map[string]json.RawMessage{}
	if raw, ok := p["_meta"]; ok {
		if err := json.Unmarshal(raw, &meta); err != nil {
			return nil, errors.New("_meta must be an object")
		}
	}
	meta[MetaProtocolVersion] = json.RawMessage(`"` + ModernVersion + `"`)
	meta[MetaClientCapabilities] = ModernClientCapabilities(s.Capabilities)
	if s.ClientInfo != nil {
		meta[MetaClientInfo] = s.ClientInfo
	} else {
		delete(meta, MetaClientInfo)
	}
	if level != "" {
		meta[MetaLogLevel] = json.RawMessage(strconv.Quote(level))
	} else {
		delete(meta, MetaLogLevel)
	}
	var err error
	if p["_meta"], err = marshalVerbatim(meta); err != nil {
		return nil, err
	}
	if responses != nil {
		if p["inputResponses"], err = marshalVerbatim(responses); err != nil {
			return nil, err
		}
	}
	if state != "" {
		p["requestState"] = json.RawMessage(state)
	}
	pb, err := marshalVerbatim(p)
	if err != nil {
		return nil, err
	}
	b := make([]byte, 0, len(pb)+len(id)+len(method)+48)
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = strconv.AppendQuote(b, id)
	b = append(b, `,"method":`...)
	b = strconv.AppendQuote(b, method)
	b = append(b, `,"params":`...)
	b = append(b, pb...)
	return append(b, '}'), nil
}

// marshalVerbatim marshals a map of raw values without HTML-escaping
// their strings, so that every string (a requestState above all) reaches
// the upstream with the bytes the client or server wrote.
func marshalVerbatim(m map[string]json.RawMessage) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(m); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

// compactJSON returns raw without insignificant whitespace.
func compactJSON(raw string) []byte {
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(raw)); err != nil {
		return []byte(raw)
	}
	return b.Bytes()
}
