package caddymodule

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/tidwall/gjson"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/caddymodule/face"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/forward"
)

// ServeHTTP implements caddyhttp.MiddlewareHandler. The handler is terminal:
// next is never called.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request, _ caddyhttp.Handler) error {
	r, handled, err := h.authenticate(w, r) // auth.go
	if handled {
		return err
	}
	r, span := startSpan(r) // traces.go; nil without tracing
	r, rt := withRoute(r)
	if handled, err := h.servePath(w, r, span); handled {
		return err // faces.go
	}
	start := time.Now()
	sw := &face.StatusWriter{ResponseWriter: w}
	var body []byte
	defer func() {
		if p := recover(); p != nil {
			// A stream aborted midway (http.ErrAbortHandler): count it as
			// failed, and let net/http end the connection.
			setPlaceholder(r, "outcome", outcomeError)
			rt.publish(r)
			h.observeRequest(r, sw.Status, body, start)
			h.endSpan(span, r, rt, sw.Status, body)
			panic(p)
		}
	}()
	err = h.dispatch(sw, r, &body)
	status := answeredStatus(sw.Status, err)
	rt.publish(r)
	h.observeRequest(r, status, body, start)
	h.endSpan(span, r, rt, status, body)
	return err
}

// answeredStatus is the status a request was answered with: the one
// written, else that of the HandlerError it returned (Caddy's error
// handling writes it).
func answeredStatus(written int, err error) int {
	if herr := (caddyhttp.HandlerError{}); written == 0 && errors.As(err, &herr) {
		return herr.StatusCode
	}
	return written
}

// dispatch serves r: the front door's checks (origin, HTTP method, body,
// forwarding signature), the header repairs of accept_client_quirks
// (quirks.go), its era's checks, then the routing decision
// (route.go) and the cell it names. The faces' hooks (faces.go) are asked
// on the way: to open a session id of their own, to serve a POSTed
// message, to serve a request once routed. *body is set to the request
// body once read.
func (h *Handler) dispatch(w http.ResponseWriter, r *http.Request, bodyOut *[]byte) error {
	if rerr := checkOriginForm(r); rerr != nil {
		return jsonrpc.WriteError(w, nil, rerr)
	}
	if rerr := h.checkOrigin(r); rerr != nil {
		return jsonrpc.WriteError(w, nil, rerr)
	}
	w, r = h.openSession(w, r) // faces.go
	rt := routeOf(r)
	var body []byte
	switch r.Method {
	case http.MethodPost:
		var rerr *jsonrpc.RPCError
		if body, rerr = readBody(w, r, h.Security.MaxRequestBody); rerr != nil {
			return jsonrpc.WriteError(w, nil, rerr)
		}
		*bodyOut = body
		if err := jsonrpc.CheckJSONDepth(body); err != nil {
			// A nesting bomb is refused before anything walks the body
			// (classifying it, logging it); Peek would refuse it too.
			return jsonrpc.WriteError(w, nil, &jsonrpc.RPCError{
				HTTPStatus: http.StatusBadRequest, Code: jsonrpc.ParseError, Message: "Parse error: " + err.Error(),
			})
		}
		if h.life.isStopping() {
			return refuseStopping(w, requestID(body)) // stop.go
		}
		if r, rerr = h.acceptForwarded(r, body); rerr != nil {
			return jsonrpc.WriteError(w, requestID(body), rerr)
		}
		// {http.mcp_gateway.method} may reach access logs: clipped.
		rt.method = clipText(gjson.GetBytes(body, "method").String(), translate.MaxMethodLength)
		if rt.method == forward.NoticeSessionReturned {
			return h.takeBack(w, r, body)
		}
		if instanceNotice(r) { // auth.go: without a token, only an instance's notice
			return h.refuseNoToken(w)
		}
		if refused, err := h.refuseOutOfScope(w, r, body); refused { // auth_scope.go
			return err
		}
		if lf := h.filterLists(w, r, body); lf != nil {
			defer lf.finish()
			w = lf
		}
		h.repairQuirks(r, body) // quirks.go: before the headers are read
		// Modern, or unrecognizable: the modern ladder says what is wrong.
		rt.era = eraModern
		if translate.ClassifyRequest(r.Header, body) == translate.EraLegacy {
			rt.era = eraLegacy
		}
		handled, w2, err := h.serveMessage(w, r, face.Message{Method: rt.method, Body: body}) // faces.go
		if handled {
			return err
		}
		w = w2
	case http.MethodGet, http.MethodDelete:
		if r.Header.Get("Mcp-Session-Id") == "" {
			// Only legacy sessions have GET and DELETE.
			w.Header().Set("Allow", http.MethodPost)
			return jsonrpc.WriteError(w, nil, &jsonrpc.RPCError{
				HTTPStatus: http.StatusMethodNotAllowed, Code: jsonrpc.InvalidRequest,
				Message: "Method Not Allowed: " + r.Method + " needs an Mcp-Session-Id",
			})
		}
		if h.life.isStopping() {
			return refuseStopping(w, nil)
		}
		var rerr *jsonrpc.RPCError
		if r, rerr = h.acceptForwarded(r, nil); rerr != nil {
			return jsonrpc.WriteError(w, nil, rerr)
		}
		if lf := h.filterLists(w, r, nil); lf != nil { // auth_scope.go: a resource's updates
			defer lf.finish()
			w = lf
		}
		rt.era = eraLegacy
	default:
		w.Header().Set("Allow", "GET, POST, DELETE")
		return jsonrpc.WriteError(w, nil, &jsonrpc.RPCError{
			HTTPStatus: http.StatusMethodNotAllowed, Code: jsonrpc.InvalidRequest,
			Message: "Method Not Allowed",
		})
	}
	if h.fed != nil && rt.era == eraModern {
		return h.serveFederated(w, r, body) // federation.go
	}
	return h.route(w, r, body)
}

// route serves a request that passed the front door: its era's checks,
// the routing decision and the cell it names. A federated block's servers
// are asked here, their front door being the block's.
func (h *Handler) route(w http.ResponseWriter, r *http.Request, body []byte) error {
	learn := h.learnLegacy
	if routeOf(r).era == eraModern {
		learn = h.learnModern
	}
	l, ok, err := learn(w, r, body)
	if !ok {
		return err
	}
	d := decide(l.in, func(want eraSet) *Upstream { return h.selectUpstream(r, w, want) })
	if handled, err := h.serveRouted(w, r, &l, d); handled { // faces.go
		return err
	}
	return h.serve(w, r, &l, d)
}

// serve serves r as d says.
func (h *Handler) serve(w http.ResponseWriter, r *http.Request, l *learned, d decision) error {
	rt := routeOf(r)
	rt.cell = d.cell
	if d.cell == cellForward || d.cell == cellReverse {
		// The bridges serve from d.up (pass-through: once it answered).
		rt.up = d.up
	}
	if d.refuse != refuseNone {
		return h.refuse(w, l, d.refuse)
	}
	if d.relayTo != nil {
		id := l.id
		if l.in.era == eraLegacy {
			id = nil // an answer: its id is the in-line request's
		}
		fallback := h.storedTask(w, r, l, *d.relayTo)
		if l.in.state == forward.Resumable {
			fallback = h.resumeHere(w, r, l, d.up)
		}
		return h.relay(w, r, l.body, id, *d.relayTo, fallback, false)
	}
	if d.cell == cellForward && l.in.state == forward.ParkedHere {
		if relayed, err := h.relayTaskOwner(w, r, l); relayed {
			return err
		}
	}
	// A requestState the forward bridge cannot open (another principal's,
	// say) is refused there before anything reaches the upstream: no
	// credential is obtained for it.
	if d.cell != cellForward || l.in.state != forward.StateUnopened {
		var rerr *jsonrpc.RPCError
		if r, rerr = h.withUpstreamCredential(r); rerr != nil { // upstream_auth.go
			return jsonrpc.WriteError(w, l.id, rerr)
		}
	}
	switch d.cell {
	case cellModern:
		return h.serveModern(w, r, l, d.up)
	case cellForward:
		return h.serveBridged(w, r, l.breq, d.up)
	case cellPinned:
		if l.in.initialize {
			return h.initializeLegacy(w, r, l.body, d.up)
		}
		return h.servePinned(w, r, l, d.up)
	default: // cellReverse
		if l.in.initialize {
			return h.initializeReverse(w, r, l, d.up)
		}
		return h.serveReverse(w, r, l, d.up)
	}
}

// noUpstream is the answer when none of the handler's upstreams can take a
// request: 503, naming the federated block's server (never an address).
func (h *Handler) noUpstream() *jsonrpc.RPCError {
	msg := "no upstream MCP server is available (the gateway's log says why)"
	if h.serverName != "" {
		msg = "MCP server " + strconv.Quote(h.serverName) + " is not available: none of its upstreams can be reached (the gateway's log says why)"
	}
	return &jsonrpc.RPCError{HTTPStatus: http.StatusServiceUnavailable, Code: jsonrpc.InternalError, Message: msg}
}

// refuse answers a request the gateway refuses itself.
func (h *Handler) refuse(w http.ResponseWriter, l *learned, why refusal) error {
	switch why {
	case refuseNoUpstream:
		return jsonrpc.WriteError(w, l.id, h.noUpstream())
	case refuseNoLegacyUpstream:
		return jsonrpc.WriteError(w, l.id, &jsonrpc.RPCError{
			HTTPStatus: http.StatusServiceUnavailable, Code: jsonrpc.InternalError,
			Message: "no upstream speaking the legacy MCP protocol is available (the gateway's log says why)",
		})
	case refuseNoSession:
		return jsonrpc.WriteError(w, l.id, &jsonrpc.RPCError{
			HTTPStatus: http.StatusBadRequest, Code: codeSessionRequired,
			Message: "Bad Request: Mcp-Session-Id header is required",
		})
	case refuseBatch:
		msg := "Invalid Request: JSON-RPC batches are not supported in front of a modern server"
		if l.in.session == sessionPinned {
			msg = "Invalid Request: JSON-RPC batches exist only in protocol revision " + translate.BatchVersion +
				", not in " + strconv.Quote(clipText(l.batchVersion, 64))
			if l.batchVersion == "" {
				msg = "Invalid Request: a JSON-RPC batch needs one MCP-Protocol-Version header (" + translate.BatchVersion + ") or none"
			}
		}
		return jsonrpc.WriteError(w, nil, &jsonrpc.RPCError{
			HTTPStatus: http.StatusBadRequest, Code: jsonrpc.InvalidRequest, Message: msg,
		})
	case refuseNothingToEnd:
		// The upstream keeps no session: there is nothing to end.
		w.Header().Set("Allow", "GET, POST")
		w.WriteHeader(http.StatusMethodNotAllowed)
		return nil
	}
	// Unknown, forged, sealed under a retired key, another principal's,
	// or naming an upstream no longer configured: the client must
	// initialize again.
	return jsonrpc.WriteError(w, l.id, &jsonrpc.RPCError{
		HTTPStatus: http.StatusNotFound, Code: codeSessionNotFound,
		Message: "Session not found",
	})
}

// bodyPrealloc bounds the buffer readBody makes before any byte of a body
// arrived: a client announcing a large Content-Length and sending nothing
// must not make the gateway hold that much for it.
const bodyPrealloc = 64 << 10

// readBody reads the request body, bounded by limit. The buffer doubles as
// the body arrives, from bodyPrealloc at most, but never beyond the
// announced length (and one byte to see the end): a body of announced
// length ends in a buffer of its size, with what was held at any time
// under twice what arrived.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, *jsonrpc.RPCError) {
	announced := r.ContentLength
	if announced > limit || announced < 0 {
		announced = 0
	}
	body := make([]byte, 0, min(max(announced, 512), bodyPrealloc)+1)
	src := http.MaxBytesReader(w, r.Body, limit)
	var err error
	for {
		if len(body) == cap(body) {
			next := 2 * cap(body)
			if announced > 0 && int64(len(body)) <= announced {
				next = int(min(int64(next), announced+1))
			}
			body = append(make([]byte, 0, next), body...)
		}
		var n int
		n, err = src.Read(body[len(body):cap(body)])
		body = body[:len(body)+n]
		if err != nil {
			if err == io.EOF {
				err = nil
			}
			break
		}
	}
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, &jsonrpc.RPCError{
				HTTPStatus: http.StatusRequestEntityTooLarge, Code: jsonrpc.InvalidRequest,
				Message: "request body too large",
			}
		}
		return nil, &jsonrpc.RPCError{
			HTTPStatus: http.StatusBadRequest, Code: jsonrpc.ParseError,
			Message: "reading request body: " + err.Error(),
		}
	}
	return body, nil
}

// requestID returns the raw JSON-RPC id of body, or nil.
func requestID(body []byte) json.RawMessage {
	id := gjson.GetBytes(body, "id")
	if !id.Exists() || (id.Type != gjson.String && id.Type != gjson.Number) {
		return nil
	}
	return json.RawMessage(id.Raw)
}

// setPlaceholder sets {http.mcp_gateway.<name>} for access logs and later
// handlers.
func setPlaceholder(r *http.Request, name, value string) {
	if repl, ok := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer); ok {
		repl.Set("http.mcp_gateway."+name, value)
	}
}

// placeholder reads {http.mcp_gateway.<name>}: "" when it is unset.
func placeholder(r *http.Request, name string) string {
	repl, ok := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
	if !ok {
		return ""
	}
	v, _ := repl.GetString("http.mcp_gateway." + name)
	return v
}

// asRPCError returns err as an *RPCError, or an internal error.
func asRPCError(err error) *jsonrpc.RPCError {
	var rerr *jsonrpc.RPCError
	if errors.As(err, &rerr) {
		return rerr
	}
	return &jsonrpc.RPCError{HTTPStatus: http.StatusBadRequest, Code: jsonrpc.InvalidRequest, Message: err.Error()}
}
