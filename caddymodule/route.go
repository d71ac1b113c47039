package caddymodule

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/forward"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/reverse"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/seal"
)

// The routing decision. A request that passed the front door (serve.go:
// origin, HTTP method, body, forwarding signature) and its era's checks
// (the modern validation ladder, or a legacy JSON-RPC peek) is described
// once by a routeInput — its era, whether it opens a legacy session, whose
// call its requestState resumes, what its session id names, whose in-line
// request it answers — and decide turns that into one cell, one upstream
// and, for a call or round another instance holds, the instance to relay
// it to. Nothing tries one path and falls back to another: the only
// choices left to run time are the selection policy's (pick) and the
// pass-through and new-session failover among upstreams of the decided era
// (upstreams.go).

// routeInput is what decides a request's route.
type routeInput struct {
	// method is the HTTP method: GET and DELETE are legacy session
	// requests.
	method string
	// era is the client's era, eraModern or eraLegacy
	// (translate.ClassifyRequest; an unrecognizable POST is modern, whose
	// ladder said what is wrong with it).
	era string
	// initialize marks a legacy initialize without a session id: a new
	// session.
	initialize bool
	// state is whose call a modern retry's requestState resumes
	// (translate.Bridge.RetryOf), or whose task a tasks/get, tasks/update
	// or tasks/cancel names (translate.Bridge.TaskOf: the forward bridge
	// holds it, the upstream is nil); stateOwner names the instance,
	// stateUp the upstream a call parked here runs on (nil once it is
	// no longer parked, or when its upstream left the configuration).
	state      forward.Whose
	stateOwner translate.Owner
	stateUp    *Upstream
	// lingersThere: a resumable call whose home (stateOwner), another
	// instance this one can reach, still holds its streams (a lingering
	// call, forward.Retry.Lingers): relayed there, resumed here if that
	// instance cannot be reached.
	lingersThere bool
	// session is what a legacy request's Mcp-Session-Id names, and
	// sessionUp the configured upstream it names.
	session   sessionKind
	sessionUp *Upstream
	// upstreamSession: a pinned session names an upstream session of its
	// own (an upstream that keeps none has nothing for DELETE to end).
	upstreamSession bool
	// batch marks a legacy POST whose body is a JSON-RPC batch;
	// batchAllowed says that the session's revision has batches
	// (2025-03-26, translate.SessionBatchVersion). Only a pinned session
	// passes one on, checked element by element (translate.CheckBatch)
	// once its session is known.
	batch, batchAllowed bool
	// answerOwner, if set, is the instance whose in-line request a
	// gateway-held session's POST answers (its id is `gw-<instance>-n`,
	// translate.Reverse.AnswerOwner) when that is another instance.
	answerOwner *translate.Owner
}

// sessionKind is what a legacy request's session id names, told by the
// purpose it was sealed for (seal.OpenSessionID).
type sessionKind uint8

const (
	// noSession: the request carries no Mcp-Session-Id.
	noSession sessionKind = iota
	// sessionUnknown: the id does not open (unknown, forged, sealed under
	// a retired key), or opens but is another principal's, expired or
	// deleted, or names an upstream no longer configured. The client must
	// initialize again.
	sessionUnknown
	// sessionPinned: a pin, to a legacy upstream's own session.
	sessionPinned
	// sessionHeld: a session the gateway holds itself in front of a
	// modern upstream (the reverse bridge).
	sessionHeld
)

// refusal is an answer the gateway gives itself, no upstream involved.
type refusal uint8

const (
	refuseNone refusal = iota
	// refuseNoUpstream: 503, no upstream of either era for a modern
	// request.
	refuseNoUpstream
	// refuseNoLegacyUpstream: 503, no upstream of either era for a new
	// legacy session.
	refuseNoLegacyUpstream
	// refuseNoSession: 400 -32000, a legacy request other than initialize
	// without a session id.
	refuseNoSession
	// refuseUnknownSession: 404 -32001, the client must initialize again.
	refuseUnknownSession
	// refuseNothingToEnd: 405, DELETE of a pinned session whose upstream
	// keeps no session.
	refuseNothingToEnd
	// refuseBatch: 400 -32600, a JSON-RPC batch in a session whose revision
	// has none (2025-06-18 and later), or in a gateway-held session (the
	// reverse bridge sends single requests upstream).
	refuseBatch
)

// decision is where a request goes.
type decision struct {
	// cell is the cell that serves it; "" when it is refused. A request
	// relayed to the owner of its call is in its call's cell on both
	// instances: a modern retry in the forward bridge's, a legacy answer
	// in the reverse bridge's ({http.mcp_gateway.owner} tells the relaying
	// instance's log lines apart).
	cell string
	// up is the upstream: chosen by the selection policy for a new
	// session or a modern request, named by the session id or the parked
	// call otherwise. nil for a retry whose call is no longer parked here.
	up *Upstream
	// relayTo, if set, is the instance the request is relayed to.
	relayTo *translate.Owner
	refuse  refusal
}

// decide routes a request, in this order. A modern retry goes to the
// instance that parked its call: another instance (relayed), or this one
// (the forward bridge, whatever upstreams are up now); a resumable one is
// served here, unless its home still holds its streams (relayed there). Any other modern
// request goes to a modern upstream, else through the forward bridge to a
// legacy one. A legacy initialize without a session opens one on a legacy
// upstream (pinned), else the gateway holds it in front of a modern one
// (reverse bridge). Any other legacy request needs a session id, and goes
// where its session is: the pinned upstream, or the reverse bridge (an
// answer to another instance's in-line request is relayed there). pick
// selects an upstream of an era (nil when none is available); it is called
// only when the choice is the selection policy's.
func decide(in routeInput, pick func(eraSet) *Upstream) decision {
	switch {
	case in.era == eraModern && in.state == forward.ParkedThere:
		return decision{cell: cellForward, relayTo: &in.stateOwner}
	case in.era == eraModern && in.state == forward.ParkedHere:
		return decision{cell: cellForward, up: in.stateUp}
	case in.era == eraModern && in.state == forward.Resumable && in.lingersThere:
		return decision{cell: cellForward, up: in.stateUp, relayTo: &in.stateOwner}
	case in.era == eraModern && in.state == forward.Resumable:
		// The state holds the whole call: served here, never relayed, on
		// the upstream it names (nil when not configured here: refused).
		return decision{cell: cellForward, up: in.stateUp}
	case in.era == eraModern:
		if up := pick(speaksModern); up != nil {
			return decision{cell: cellModern, up: up}
		}
		if up := pick(speaksLegacy); up != nil {
			return decision{cell: cellForward, up: up}
		}
		return decision{refuse: refuseNoUpstream}
	case in.initialize:
		if up := pick(speaksLegacy); up != nil {
			return decision{cell: cellPinned, up: up}
		}
		if up := pick(speaksModern); up != nil {
			return decision{cell: cellReverse, up: up}
		}
		return decision{refuse: refuseNoLegacyUpstream}
	case in.session == noSession:
		return decision{refuse: refuseNoSession}
	case in.session == sessionPinned && in.method == http.MethodDelete && !in.upstreamSession:
		return decision{refuse: refuseNothingToEnd}
	case in.session == sessionPinned && in.batch && !in.batchAllowed:
		return decision{cell: cellPinned, up: in.sessionUp, refuse: refuseBatch}
	case in.session == sessionPinned:
		return decision{cell: cellPinned, up: in.sessionUp}
	case in.session == sessionHeld && in.batch:
		return decision{cell: cellReverse, up: in.sessionUp, refuse: refuseBatch}
	case in.session == sessionHeld:
		return decision{cell: cellReverse, up: in.sessionUp, relayTo: in.answerOwner}
	}
	return decision{refuse: refuseUnknownSession}
}

// learned is what dispatch learned about a request: the input of decide,
// and what the cells serve it with.
type learned struct {
	in   routeInput
	body []byte          // nil for GET and DELETE
	id   json.RawMessage // the JSON-RPC id, for errors of the gateway's own
	// Modern requests: the request for the forward bridge (its
	// requestState opened once, by RetryOf).
	breq forward.Request
	// Legacy requests: the message (POST), the client's session id, and
	// what it opened to.
	msg  jsonrpc.Message
	sid  string
	pin  seal.Pin
	held *reverse.Session
	// batchVersion is the revision a batch's session speaks
	// (translate.SessionBatchVersion), for its refusal.
	batchVersion string
}

// learnModern checks a modern request (the validation ladder, removed
// methods) and learns whose call a retry resumes. A request that fails a
// check is answered here (ok false).
func (h *Handler) learnModern(w http.ResponseWriter, r *http.Request, body []byte) (l learned, ok bool, err error) {
	req, rerr := translate.ValidateModern(r.Method, r.Header, body, supportedModern)
	if rerr != nil {
		return l, false, jsonrpc.WriteError(w, requestID(body), rerr)
	}
	if translate.RemovedMethod(req.Method) {
		return l, false, jsonrpc.WriteError(w, req.ID, jsonrpc.NewMethodNotFound(req.Method))
	}
	l = learned{body: body, id: req.ID, in: routeInput{method: r.Method, era: eraModern},
		breq: forward.Request{Principal: h.principal(r), ModernRequest: req, Options: h.bridgeOpts, HostTask: routeOf(r).hostTask}}
	retry := h.bridge.RetryOf(&l.breq)
	if retry.Whose == forward.NotRetry {
		// tasks/get, tasks/update, tasks/cancel: a taskId of the
		// principal's names the instance holding the task, as a
		// requestState does.
		retry = h.bridge.TaskOf(&l.breq)
	}
	l.in.state, l.in.stateOwner = retry.Whose, retry.Owner
	if retry.Whose == forward.Resumable {
		// A call parked elsewhere may end here: its session goes back.
		l.breq.GiveBack = h.giveBackVia(r)
		_, forwarded := forwardedOf(r)
		l.in.lingersThere = retry.Lingers && !forwarded && h.fleet.auth != nil && h.fleet.ownerAddress(retry.Owner) != ""
	}
	if retry.Upstream != "" {
		l.in.stateUp = h.upstreamByURL(r, retry.Upstream)
	}
	return l, true, nil
}

// learnLegacy checks a legacy request (one JSON-RPC message; body is nil
// for GET and DELETE) and learns what its session id names. A request that
// fails a check is answered here (ok false). A batch is checked element by
// element only once its session is known to take one (a pinned session of
// 2025-03-26): without a session, with an unknown one, in a gateway-held
// one or with another revision it is refused (decide) without its elements
// being looked at.
func (h *Handler) learnLegacy(w http.ResponseWriter, r *http.Request, body []byte) (l learned, ok bool, err error) {
	l = learned{body: body, in: routeInput{method: r.Method, era: eraLegacy}, sid: r.Header.Get("Mcp-Session-Id")}
	switch {
	case body != nil && translate.IsBatch(body):
		l.in.batch = true
		l.batchVersion, l.in.batchAllowed = translate.SessionBatchVersion(r.Header)
	case body != nil:
		msg, err := jsonrpc.Peek(body)
		if err != nil {
			return l, false, jsonrpc.WriteError(w, msg.ID, asRPCError(err))
		}
		l.msg, l.id = msg, msg.ID
		l.in.initialize = msg.Method == "initialize" && l.sid == ""
	}
	h.learnSession(r, &l)
	if l.in.batch && l.in.batchAllowed && l.in.session == sessionPinned {
		if err := translate.CheckBatch(body); err != nil {
			return l, false, jsonrpc.WriteError(w, nil, asRPCError(err))
		}
	}
	return l, true, nil
}

// learnSession learns what a legacy request's session id names (l.in.session
// stays noSession without one, sessionUnknown when it opens to nothing of
// this principal's here).
func (h *Handler) learnSession(r *http.Request, l *learned) {
	if l.sid == "" {
		return
	}
	l.in.session = sessionUnknown
	opened, err := seal.OpenSessionID(h.keyring, seal.GatewaySessionID(l.sid))
	if err != nil {
		if errors.Is(err, seal.ErrUnknownKey) {
			h.warnForeignKey(foreignSessionID)
		}
		return
	}
	switch opened.Kind {
	case seal.SessionPinned:
		if opened.Pin.Principal != h.principal(r) {
			return // another principal's session id is as good as unknown
		}
		if up := h.upstreamByURL(r, opened.Pin.Upstream); up != nil {
			l.in.session, l.in.sessionUp = sessionPinned, up
			l.in.upstreamSession = opened.Pin.Session != ""
			l.pin = opened.Pin
		}
	case seal.SessionHeld:
		s, err := h.reverse.Session(h.reverseOpts, opened.Held, h.principal(r), time.Now())
		if err != nil {
			return
		}
		if up := h.upstreamByURL(r, s.Upstream); up != nil {
			l.in.session, l.in.sessionUp = sessionHeld, up
			s.Target = up.target
			l.held = s
			if l.body != nil && l.msg.Kind == jsonrpc.KindResponse {
				if owner, elsewhere := h.reverse.AnswerOwner(s, l.body); elsewhere {
					l.in.answerOwner = &owner
				}
			}
		}
	}
}

// route is what the gateway learned about one request and where it sent
// it. ServeHTTP stores one in the request's context (routeOf) before
// anything else; dispatch and the cells fill it in; publish sets the
// placeholders from it once, when the request has been served.
type route struct {
	// era is the client's era ({http.mcp_gateway.era}); "" when the
	// request was refused at the front door.
	era string
	// method is the JSON-RPC method of a POST ({http.mcp_gateway.method}).
	method string
	// cell is decision.cell ({http.mcp_gateway.cell}; observeRequest says
	// none when it is "").
	cell string
	// up is the upstream serving the request ({http.mcp_gateway.upstream}):
	// the bridges' from the start (moved by a new session's failover), a
	// relayed legacy answer's session upstream, pass-through's once it
	// answered.
	up *Upstream
	// owner is the instance the request was relayed to
	// ({http.mcp_gateway.owner}).
	owner string
	// probeWait, once set, is when this request stops waiting for era
	// probes in flight (candidates): one bound for all its choices.
	probeWait time.Time
	// server is the federated block's server serving the request
	// ({http.mcp_gateway.server}).
	server string
	// hostTask: a face's internal tools/call the gateway hosts as a task
	// (face.Internal.Task, forward.Request.HostTask).
	hostTask bool
	// face is the face that served the request ("" for MCP's own
	// endpoint), and tool the tool of the call it serves
	// (faceGateway.Traced): its span's mcp_gateway.face and
	// gen_ai.tool.name.
	face, tool string
	// detached: a PathFace's request (REST), whose internal requests may
	// outlive it (a call running in the background): they write nothing
	// to its route. Set before the face serves it, never after.
	detached bool
	// fillParams: accept_client_quirks filled the standard headers the
	// client left out; a tools/call passed through gets its Mcp-Param-*
	// too, once the upstream is known (fillParamHeaders).
	fillParams bool
}

// routeKey is the context key of a request's *route.
type routeKey struct{}

// withRoute returns r carrying a new, empty route.
func withRoute(r *http.Request) (*http.Request, *route) {
	rt := &route{}
	return r.WithContext(context.WithValue(r.Context(), routeKey{}, rt)), rt
}

// routeOf returns the route of r; a request that has none (a unit test's)
// gets a fresh one that nothing publishes.
func routeOf(r *http.Request) *route {
	if rt, ok := r.Context().Value(routeKey{}).(*route); ok {
		return rt
	}
	return &route{}
}

// publish sets the routing placeholders of r from rt, the ones it learned.
func (rt *route) publish(r *http.Request) {
	repl, ok := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
	if !ok {
		return
	}
	for name, v := range map[string]string{"era": rt.era, "method": rt.method, "cell": rt.cell, "owner": rt.owner, "server": rt.server} {
		if v != "" {
			repl.Set("http.mcp_gateway."+name, v)
		}
	}
	if rt.up != nil {
		repl.Set("http.mcp_gateway.upstream", rt.up.URL)
	}
}
