package reverse

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
	"github.com/tidwall/gjson"
)

// This file is the reverse bridge: legacy (2025-11-25 and earlier) clients
// in front of modern (2026-07-28) servers. The gateway holds the legacy
// session itself, in a sealed session id; sends each legacy request upstream
// statelessly with the full _meta; and turns every input_required round of
// the upstream into in-line requests on the SSE answer to the legacy
// client, whose POSTed answers it collects before retrying upstream.
//
// Here is the engine: the bridge, Serve, and a call's rounds (call). Its
// parts: options.go (options), session.go (initialize and
// the sealed session id), inline.go (a round's in-line requests to
// the client, and its answers), upstream.go (the modern upstream
// over HTTP), params.go (x-mcp-header parameters),
// listen.go (the GET stream), resubscribe.go (its upstream
// subscription following the session's subscribes), subscribe.go
// (resources/subscribe and its byte bounds), streams.go (the bounds
// of GET streams), facts.go (what this instance knows of a
// session: level, DELETE, subscriptions), reshape.go (results and
// errors for legacy clients).

// Bounds of the reverse bridge's caches (session facts: facts.go).
const (
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

// Bridge is the reverse bridge. It is safe for concurrent use.
type Bridge struct {
	client   *http.Client
	defaults *Options // of the sessions opened without options
	nextID   atomic.Uint64

	facts    *factTable                     // per session: log level, DELETE, subscriptions
	subBytes *subscriptionBudget            // bytes the subscriptions hold
	streams  *streamCount                   // open GET streams
	discover *expiringTable[string, []byte] // server/discover results

	toolLists *expiringTable[string, toolHeaders] // x-mcp-header annotations (params.go)

	mu      sync.Mutex
	waiting map[string]*leg       // in-line request id -> the round waiting for it
	calls   map[callKey]*liveCall // calls in progress, for notifications/cancelled
}

type callKey struct {
	session [16]byte
	id      string // the raw JSON id of the client's request
}

type liveCall struct {
	cancel context.CancelCauseFunc
}

// New returns a reverse bridge that reaches modern upstreams with
// client, with opts for the sessions opened without options of their own.
func New(client *http.Client, opts Options) *Bridge {
	rv := &Bridge{
		client:    client,
		defaults:  opts.Ready(),
		facts:     newFactTable(maxSessionFacts, maxSessionFactsPerPrincipal),
		subBytes:  newSubscriptionBudget(),
		streams:   newStreamCount(),
		discover:  newExpiringTable[string, []byte](maxDiscoverCached),
		toolLists: newExpiringTable[string, toolHeaders](maxToolListsCached),
		waiting:   make(map[string]*leg),
		calls:     make(map[callKey]*liveCall),
	}
	return rv
}

// Waiting returns how many in-line requests wait for a client's answer.
func (rv *Bridge) Waiting() int {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	return len(rv.waiting)
}

// Request is one legacy request or notification of a session.
type Request struct {
	// Message is the envelope Peek returned; Raw is the message as received.
	jsonrpc.Message
	// Header is sent upstream (Authorization, trace context).
	Header http.Header
}

// Serve answers a request or notification of session s through sink. It
// returns when the answer is complete.
func (rv *Bridge) Serve(ctx context.Context, s *Session, r Request, sink translate.Sink) translate.Served {
	if r.Kind == jsonrpc.KindRequest && len(r.Method) > translate.MaxMethodLength {
		// Before it becomes an Mcp-Method header, a log line or a metric.
		rv.respondError(r, sink, jsonrpc.Errorf(http.StatusBadRequest, jsonrpc.InvalidRequest,
			"Invalid Request: method names are at most %d bytes long", translate.MaxMethodLength))
		return translate.Served{Outcome: translate.OutcomeError}
	}
	if r.Kind == jsonrpc.KindNotification {
		if r.Method == "notifications/cancelled" {
			rv.cancel(s, gjson.GetBytes(r.Raw, "params.requestId"))
		}
		// notifications/initialized and roots/list_changed need nothing:
		// the session is ready at once, and roots are asked per request.
		_ = sink.Respond(http.StatusAccepted, nil)
		return translate.Served{}
	}
	switch r.Method {
	case "initialize":
		_ = sink.Respond(http.StatusBadRequest, jsonrpc.ErrorResponse(r.ID, jsonrpc.Errorf(http.StatusBadRequest, jsonrpc.InvalidRequest, "Invalid Request: the session is already initialized")))
	case "ping":
		_ = sink.Respond(http.StatusOK, translate.ResultResponse(r.ID, []byte("{}")))
	case "logging/setLevel":
		level := gjson.GetBytes(r.Raw, "params.level")
		if level.Type != gjson.String || !slices.Contains(translate.LogLevels, level.Str) {
			_ = sink.Respond(http.StatusOK, jsonrpc.ErrorResponse(r.ID, jsonrpc.Errorf(http.StatusBadRequest, jsonrpc.InvalidParams, "Invalid params: level must be one of %v", translate.LogLevels)))
			return translate.Served{}
		}
		if rerr := rv.setLevel(s, level.Str); rerr != nil {
			rv.respondError(r, sink, rerr)
			return translate.Served{}
		}
		_ = sink.Respond(http.StatusOK, translate.ResultResponse(r.ID, []byte("{}")))
	case "resources/subscribe", "resources/unsubscribe":
		// Kept by this instance for the session's GET stream, which
		// subscribes upstream (listen.go).
		uri := gjson.GetBytes(r.Raw, "params.uri")
		if uri.Type != gjson.String {
			_ = sink.Respond(http.StatusOK, jsonrpc.ErrorResponse(r.ID, jsonrpc.Errorf(http.StatusBadRequest, jsonrpc.InvalidParams, "Invalid params: uri must be a string")))
			return translate.Served{}
		}
		if rerr := rv.subscribe(s, uri.Str, r.Method == "resources/subscribe", len(r.Raw)); rerr != nil {
			status := rerr.HTTPStatus
			if rerr.Code == jsonrpc.InvalidParams {
				status = http.StatusOK // in-band, as the other invalid params
			}
			_ = sink.Respond(status, jsonrpc.ErrorResponse(r.ID, rerr))
			return translate.Served{}
		}
		_ = sink.Respond(http.StatusOK, translate.ResultResponse(r.ID, []byte("{}")))
	default:
		return rv.call(ctx, s, r, sink)
	}
	return translate.Served{}
}

// cancel ends the call of s whose request id is id.
func (rv *Bridge) cancel(s *Session, id gjson.Result) {
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
func (rv *Bridge) call(ctx context.Context, s *Session, r Request, sink translate.Sink) (served translate.Served) {
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

	params := translate.ParamsOf(r.Raw)
	name, hasName := "", false
	if f := translate.NameSourceField(r.Method); f != "" {
		if v := gjson.GetBytes(params, f); v.Type == gjson.String {
			name, hasName = v.Str, true
		}
	}
	defer func() {
		if obs := o.Observer; obs != nil {
			obs.CallEnded(translate.CallReport{
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
		served.Outcome = translate.OutcomeError
		rv.respondError(r, sink, rerr)
		return served
	}
	level := rv.levelOf(s)
	hdr := modernHeader(r.Header, r.Method, name, hasName)
	paramHeaders := r.Method == "tools/call" && hasName
	if paramHeaders {
		setParamHeaders(hdr, rv.toolHeadersOf(ctx, s, r.Header, false)[name], gjson.GetBytes(params, "arguments"))
	}
	var responses map[string]json.RawMessage
	var state string                        // the raw JSON string of the last requestState
	served.Outcome = translate.OutcomeError // unless the call completes or is cancelled
	for round := 0; ; round++ {
		served.Round = round
		id := rv.upstreamID(o)
		w := translate.StartWatch(&overhead)
		body, err := upstreamRequest(id, r.Method, params, s, level, responses, state)
		w.Stop()
		if err != nil {
			reason = err.Error()
			rv.respondError(r, sink, jsonrpc.Errorf(http.StatusBadRequest, jsonrpc.InvalidParams, "Invalid params: %v", err))
			return served
		}
		final, rerr := rv.exchange(withRound(ctx, round), o, s.Upstream, hdr, body, id, sink, level)
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
			if paramHeaders && e.Get("code").Int() == jsonrpc.HeaderMismatch {
				// The tool's x-mcp-header annotations may have changed:
				// read them again and send the same request once more.
				paramHeaders = false
				hdr = modernHeader(r.Header, r.Method, name, hasName)
				setParamHeaders(hdr, rv.toolHeadersOf(ctx, s, r.Header, true)[name], gjson.GetBytes(params, "arguments"))
				round--
				continue
			}
			w := translate.StartWatch(&overhead)
			answer := translate.ErrorObjectResponse(r.ID, LegacyError(r.Method, []byte(e.Raw)))
			w.Stop()
			_ = sink.Respond(http.StatusOK, answer)
			return served
		}
		res := final.Get("result")
		switch rt := res.Get("resultType"); {
		case !res.IsObject():
			reason = "the upstream answered without a result object"
			rv.respondError(r, sink, translate.BadGateway(reason))
			return served
		case !rt.Exists() || rt.Type == gjson.String && rt.Str == "complete":
			w := translate.StartWatch(&overhead)
			out, err := LegacyResult(r.Method, []byte(res.Raw))
			w.Stop()
			if err != nil {
				reason = err.Error()
				rv.respondError(r, sink, translate.BadGateway(reason))
				return served
			}
			_ = sink.Respond(http.StatusOK, translate.ResultResponse(r.ID, out))
			served.Outcome = translate.OutcomeComplete
			return served
		case rt.Type == gjson.String && rt.Str == "task" && r.Method == "tools/call":
			// A task (the Tasks extension): followed to its end for the
			// legacy client, which sees one blocking call.
			rv.followTask(ctx, s, r, sink, res, level, &served, &reason)
			return served
		case rt.Str != "input_required":
			reason = fmt.Sprintf("the upstream answered with resultType %s, which legacy clients cannot receive", jsonrpc.Clip(rt.Raw))
			rv.respondError(r, sink, translate.BadGateway(reason))
			return served
		case !translate.InputCapable[r.Method]:
			reason = "the upstream asked for input on " + r.Method + ", which cannot ask for input"
			rv.respondError(r, sink, translate.BadGateway(reason))
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
			rv.respondError(r, sink, translate.BadGateway(reason))
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
		responses, fail = rv.ask(ctx, s, r, sink, reqs, translate.StartWatch(&overhead))
		if ctx.Err() != nil {
			served.Outcome, reason = rv.abandoned(ctx, r, sink, nil)
			return served
		}
		if fail != "" {
			reason = fail
			if strings.HasPrefix(fail, noAnswer) {
				served.Outcome = translate.OutcomeExpired
			}
			rv.fail(r, sink, fail)
			return served
		}
		served.Round = round + 1
	}
}

// abandoned ends the answer of a call that stopped: nothing more is sent
// for a call the client cancelled or left; a call the gateway ended gets
// an error (the client may be listening still).
// It returns the call's outcome and why.
func (rv *Bridge) abandoned(ctx context.Context, r Request, sink translate.Sink, rerr *jsonrpc.RPCError) (outcome, reason string) {
	if rerr == nil {
		cause := context.Cause(ctx)
		if cause == nil || errors.Is(cause, errCallCancelled) || errors.Is(cause, context.Canceled) {
			_ = sink.Respond(http.StatusAccepted, nil)
			if cause == nil {
				cause = context.Canceled
			}
			return translate.OutcomeCancelled, cause.Error()
		}
		rerr = &jsonrpc.RPCError{HTTPStatus: http.StatusServiceUnavailable, Code: jsonrpc.InternalError, Message: "the call was abandoned: " + cause.Error()}
	}
	rv.respondError(r, sink, rerr)
	return translate.OutcomeError, rerr.Detail()
}

func (rv *Bridge) respondError(r Request, sink translate.Sink, e *jsonrpc.RPCError) {
	_ = sink.Respond(e.HTTPStatus, jsonrpc.ErrorResponse(r.ID, e))
}

// fail ends a call with LegacyFailure.
func (rv *Bridge) fail(r Request, sink translate.Sink, msg string) {
	res, errObj := LegacyFailure(r.Method, msg)
	if res != nil {
		_ = sink.Respond(http.StatusOK, translate.ResultResponse(r.ID, res))
		return
	}
	_ = sink.Respond(http.StatusOK, translate.ErrorObjectResponse(r.ID, errObj))
}
