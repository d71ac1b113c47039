package caddymodule

import (
	"bytes"
	"context"
	"encoding/base64"
	"io"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/caddymodule/face"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/caddymodule/face/multiturn"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/caddymodule/face/rest"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/caddymodule/face/saga"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/forward"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/seal"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/traces"
)

// This file is where the faces (package face and the packages below it)
// meet the handler: their configuration, the table of the enabled ones
// the front door asks, and the Gateway they are given.

// FacesConfig is the `faces` object of the handler: the ways to reach
// the MCP servers behind the gateway other than MCP's own endpoint. Each
// is off unless its key is present. docs/faces.md describes them.
type FacesConfig struct {
	// The tool-call saga, the gateway's own extension: with it, the MCP
	// endpoint also answers `tools/callSaga {name, arguments}` and
	// `tools/resumeSaga {sagaToken, completedSteps}` as plain JSON-RPC
	// POSTs, without a session, without `initialize` and without the
	// 2026-07-28 headers: the gateway makes the tool call itself as a
	// modern client would (in front of a legacy server through the parked
	// calls, in front of a modern one passed through), and a call that
	// needs input is answered `{"state":"suspended","sagaToken","steps"}`,
	// one step per elicitation or sampling request. The `sagaToken` is
	// sealed with `state_key` (any instance of the fleet serves the next
	// turn), bound to the principal, usable once (across the fleet: its
	// use is recorded in Caddy's storage, which the instances must
	// share), and valid for `park_ttl`. Without it, both methods get
	// `-32601` as any unknown method. Default: off. Caddyfile:
	// `saga on|off`.
	Saga *saga.Config `json:"saga,omitempty"`

	// Multi-turn SSE (SEP-1858) for legacy (2025-era) clients that opt
	// in. A client opts in with
	// `capabilities.experimental["io.modelcontextprotocol/multi-turn-sse"]`
	// (any object) in its `initialize`; its session id then carries the
	// opt-in (sealed with `state_key`). When a tools/call of such a
	// session needs input, its SSE answer is `event: buffer_input`, the
	// requests (elicitation, sampling, roots) as `message` events, then
	// `event: input_required` whose id holds the call's state (sealed,
	// bound to the principal and the session, usable once across the
	// fleet as the saga's token, valid for `park_ttl`), and the stream
	// ends; the client POSTs its answers as a JSON array with that id as
	// `Last-Event-ID`, to any instance, and gets the result or the next
	// turn. The call itself is made as a
	// modern tools/call (in front of a legacy server through the parked
	// calls, in front of a modern one passed through). Clients that do not
	// opt in are served exactly as without it, and so are all clients
	// without it (a session that opted in keeps working, without turns).
	// Default: off. Caddyfile: `multi_turn_sse on|off`.
	MultiTurn *multiturn.Config `json:"multi_turn_sse,omitempty"`
	// The HTTP REST face of SEP-1597, a non-standard extra (the proposal
	// was closed, not accepted; docs/faces.md): under `base_path`,
	// beside the MCP endpoint, every MCP server behind the gateway as plain
	// HTTP resources (lists, resources, prompts, and tool calls as durable
	// resources whose records live in Caddy's storage). Needs `state_key`.
	// Default: off. Caddyfile: `rest <base>` and the `rest_*` options.
	REST *rest.Config `json:"rest,omitempty"`
}

// faceKind is one face as the handler knows it: its Caddyfile options
// and how to make it from its config.
type faceKind struct {
	// unmarshal parses the Caddyfile option name into the face's config,
	// or reports false when the option is not the face's.
	unmarshal func(d *caddyfile.Dispenser, name string) (bool, error)
	// make makes the face, or nil when it is off (a face may have
	// hooks it keeps while off: see its New).
	make func(ctx caddy.Context, gw face.Gateway) (face.Face, error)
}

// kinds lists the faces: one line each.
func (c *FacesConfig) kinds() []faceKind {
	return []faceKind{
		kindOf(&c.Saga, saga.Options, saga.New),
		kindOf(&c.MultiTurn, multiturn.Options, multiturn.New),
		kindOf(&c.REST, rest.Options, rest.New),
	}
}

// kindOf is the faceKind of a face whose config is *cfg (nil: off),
// whose Caddyfile options are opts and which mk makes.
func kindOf[C any](cfg **C, opts face.Options[C], mk func(caddy.Context, *C, face.Gateway) (face.Face, error)) faceKind {
	return faceKind{
		unmarshal: func(d *caddyfile.Dispenser, name string) (bool, error) {
			parse, ok := opts[name]
			if !ok {
				return false, nil
			}
			return true, parse(d, cfg)
		},
		make: func(ctx caddy.Context, gw face.Gateway) (face.Face, error) { return mk(ctx, *cfg, gw) },
	}
}

// unmarshalFaceOption parses the Caddyfile option name of a face, or
// reports false when no face has it.
func (h *Handler) unmarshalFaceOption(d *caddyfile.Dispenser, name string) (bool, error) {
	for _, k := range h.Faces.kinds() {
		if ok, err := k.unmarshal(d, name); ok {
			return true, err
		}
	}
	return false, nil
}

// provisionFaces makes the table of the enabled faces.
func (h *Handler) provisionFaces(ctx caddy.Context) error {
	h.faces = nil
	gw := faceGateway{h: h, once: newOnceStore(ctx, h)}
	for _, k := range h.Faces.kinds() {
		f, err := k.make(ctx, gw)
		if err != nil {
			return err
		}
		if f != nil {
			h.faces = append(h.faces, f)
		}
	}
	return nil
}

// openSession asks each SessionFace to open r's session id, in turn: it
// returns the writer and request to serve r with.
func (h *Handler) openSession(w http.ResponseWriter, r *http.Request) (http.ResponseWriter, *http.Request) {
	for _, f := range h.faces {
		if sf, ok := f.(face.SessionFace); ok {
			w, r = sf.OpenSession(w, r)
		}
	}
	return w, r
}

// servePath asks each PathFace to serve r, in turn, before the MCP
// endpoint reads it: it reports whether one did, and then ends r's span
// (nil: none). A request another instance forwarded (an internal MCP
// request of a face, relayed to the owner of its call, with the path of
// the client request it was made for) is MCP: no PathFace sees it.
func (h *Handler) servePath(w http.ResponseWriter, r *http.Request, span trace.Span) (bool, error) {
	if r.Header.Get(seal.ForwardedHeader) != "" {
		return false, nil
	}
	rt := routeOf(r)
	rt.detached = true
	// The status is wanted only for the span: without tracing, no writer
	// is wrapped (this runs for every request).
	var sw *face.StatusWriter
	if span != nil {
		sw = &face.StatusWriter{ResponseWriter: w}
		w = sw
	}
	for _, f := range h.faces {
		if pf, ok := f.(face.PathFace); ok {
			if handled, err := pf.ServePath(w, r); handled {
				rt.face = f.Name()
				if sw != nil {
					endPathSpan(span, r, rt, answeredStatus(sw.Status, err)) // traces.go
				}
				return true, err
			}
		}
	}
	rt.detached = false
	return false, nil
}

// serveMessage asks each MessageFace to serve the POSTed message m, in
// turn: it reports whether one did, and returns the writer to serve the
// message with otherwise.
func (h *Handler) serveMessage(w http.ResponseWriter, r *http.Request, m face.Message) (bool, http.ResponseWriter, error) {
	for _, f := range h.faces {
		if mf, ok := f.(face.MessageFace); ok {
			handled, w2, err := mf.ServeMessage(w, r, m)
			if handled {
				routeOf(r).face = f.Name()
				return true, w2, err
			}
			w = w2
		}
	}
	return false, w, nil
}

// serveRouted asks each RouteFace to serve a legacy client's request
// that d routes to its session's upstream, in turn: a single POSTed
// request, neither refused nor relayed, in the pinned or the reverse
// cell. It reports whether one did. The route is modern when the
// upstream speaks 2026-07-28: a modern one (the reverse bridge's), or a
// dual-era one a session is pinned to.
func (h *Handler) serveRouted(w http.ResponseWriter, r *http.Request, l *learned, d decision) (bool, error) {
	if l.in.era != eraLegacy || r.Method != http.MethodPost || l.in.batch || l.msg.Kind != jsonrpc.KindRequest ||
		d.refuse != refuseNone || d.relayTo != nil || (d.cell != cellPinned && d.cell != cellReverse) || d.up == nil {
		return false, nil
	}
	m := face.Message{Method: routeOf(r).method, Body: l.body}
	rt := face.Route{Upstream: d.up.URL, Modern: d.cell == cellReverse || d.up.knownEras().has(speaksModern)}
	for _, f := range h.faces {
		if rf, ok := f.(face.RouteFace); ok {
			if handled, err := rf.ServeRouted(w, r, m, l.msg.ID, rt); handled {
				routeOf(r).face = f.Name()
				return true, err
			}
		}
	}
	return false, nil
}

// faceGateway is the face.Gateway of a handler.
type faceGateway struct {
	h    *Handler
	once *onceStore // nil without state_key (once.go)
}

func (g faceGateway) Principal(r *http.Request) [16]byte { return g.h.principal(r) }
func (g faceGateway) Keyring() *seal.Keyring             { return g.h.keyring }
func (g faceGateway) Instance() string                   { return g.h.fleet.instance }
func (g faceGateway) Logger() *zap.Logger                { return g.h.logger }

func (g faceGateway) Track(cancel context.CancelCauseFunc) func() { return g.h.calls.add(cancel) }

func (g faceGateway) Stopping() bool { return g.h.life.isStopping() }

func (g faceGateway) CheckRequest(r *http.Request) *jsonrpc.RPCError {
	if rerr := checkOriginForm(r); rerr != nil {
		return rerr
	}
	return g.h.checkOrigin(r)
}

func (g faceGateway) ReadBody(w http.ResponseWriter, r *http.Request) ([]byte, *jsonrpc.RPCError) {
	return readBody(w, r, g.h.Security.MaxRequestBody)
}

func (g faceGateway) Limits() face.Limits {
	h := g.h
	return face.Limits{
		MaxRounds:      h.Parking.MaxRounds,
		ParkTTL:        time.Duration(h.Parking.ParkTTL),
		Lease:          time.Duration(h.Tasks.Lease),
		MaxResult:      h.Tasks.MaxResult,
		MaxRequestBody: h.Security.MaxRequestBody,
		WriteTimeout:   time.Duration(h.Streams.WriteTimeout),
		SharedKey:      len(h.Fleet.StateKeys) > 0,
		DurableTasks:   h.taskStorage != nil,
	}
}

// Request makes a face's internal request: built on r's behalf (r's
// principal, authorization and origin; none of its MCP, conditional or
// encoding headers), served by dispatch, or on in.On's upstream as
// decide would route a modern request there. The outer request's route
// (its placeholders, its log line) takes the inner one's cell, upstream
// and owner.
func (g faceGateway) Request(ctx context.Context, r *http.Request, in face.Internal, rec http.ResponseWriter) (string, *face.Failure) {
	h := g.h
	serve := h.dispatch
	if in.On != nil {
		up := h.upstreamByURL(r, in.On.Upstream)
		if up == nil {
			return "", &face.Failure{Status: http.StatusBadGateway, Detail: "the call's upstream is no longer configured: call the tool again"}
		}
		cell := cellForward
		if in.On.Modern {
			cell = cellModern
		}
		serve = h.servedBy(cell, up)
	}
	body, err := jsonrpc.Marshal(jsonrpc.NewRequest(face.RequestID, in.Method, in.Params))
	if err != nil {
		h.logger.Debug("internal request not encoded", zap.String("method", in.Method), zap.Error(err))
		return "", &face.Failure{Status: http.StatusInternalServerError, Detail: "the request could not be encoded"}
	}
	ctx, span := traces.Start(ctx, "mcp", trace.SpanKindInternal) // nil without tracing
	inner, irt := withRoute(r.Clone(ctx))
	irt.hostTask = in.Task
	inner.Method = http.MethodPost
	inner.Body = io.NopCloser(bytes.NewReader(body))
	inner.ContentLength = int64(len(body))
	for _, hdr := range []string{seal.ForwardedHeader, "Mcp-Session-Id", "Last-Event-ID", translate.HeaderMethod, translate.HeaderName,
		"If-Match", "If-None-Match", "Idempotency-Key", "Expect", "Content-Encoding"} {
		inner.Header.Del(hdr)
	}
	inner.Header.Set("Content-Type", "application/json")
	inner.Header.Set("Accept", "application/json, text/event-stream")
	inner.Header.Set(translate.HeaderProtocolVersion, translate.ModernVersion)
	inner.Header.Set(translate.HeaderMethod, in.Method)
	if in.Name != "" {
		inner.Header.Set(translate.HeaderName, headerValue(in.Name))
	}
	var seen []byte
	if span == nil {
		err = serve(rec, inner, &seen)
	} else {
		sw := &face.StatusWriter{ResponseWriter: rec} // the status, for the span
		err = serve(sw, inner, &seen)
		h.endSpan(span, inner, irt, internalStatus(sw.Status, err), seen)
	}
	if err != nil {
		h.logger.Debug("internal request failed", zap.String("method", in.Method), zap.Error(err))
		return "", &face.Failure{Status: internalStatus(0, err), Detail: "the upstream request failed (the gateway's log says why)"}
	}
	if outer := routeOf(r); !outer.detached {
		outer.cell, outer.up, outer.owner = irt.cell, irt.up, irt.owner
	}
	upstream := ""
	if irt.up != nil {
		upstream = irt.up.URL
	}
	return upstream, nil
}

// internalStatus is the HTTP status of an internal request whose answer
// was written with status (0: none) and whose serving returned err: a
// failure's is the status of Caddy's error, 502 by default.
func internalStatus(status int, err error) int {
	if s := answeredStatus(status, err); s != 0 || err == nil {
		return s
	}
	return http.StatusBadGateway
}

// Traced names the tool call r serves for r's span, and links the span
// to the call's first request's (face.Gateway).
func (g faceGateway) Traced(r *http.Request, tool string, first seal.TraceRef) seal.TraceRef {
	if rt, ok := r.Context().Value(routeKey{}).(*route); ok {
		rt.tool = clipLogged(tool) // as a tools/call's name is
	}
	traces.Link(r.Context(), traces.Ref(first), traces.FirstRound)
	if first == (seal.TraceRef{}) {
		return seal.TraceRef(traces.RefOf(r.Context()))
	}
	return first
}

// servedBy serves an internal request in cell on up, as decide would have
// routed a modern request there.
func (h *Handler) servedBy(cell string, up *Upstream) func(w http.ResponseWriter, in *http.Request, seen *[]byte) error {
	return func(w http.ResponseWriter, in *http.Request, seen *[]byte) error {
		body, err := io.ReadAll(in.Body)
		if err != nil {
			return err
		}
		*seen = body
		if refused, err := h.refuseOutOfScope(w, in, body); refused { // auth_scope.go
			return err
		}
		rt := routeOf(in)
		rt.era, rt.method = eraModern, "tools/call"
		l, ok, err := h.learnModern(w, in, body)
		if !ok {
			return err
		}
		l.in.state = forward.NotRetry // a first call, or a modern server's own requestState
		return h.serve(w, in, &l, decision{cell: cell, up: up})
	}
}

// headerValue encodes v for an Mcp-Name header: as is when it is visible
// ASCII (and space), else as a Base64 sentinel.
func headerValue(v string) string {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < 0x20 || c > 0x7e || (c == ' ' && (i == 0 || i == len(v)-1)) {
			return translate.SentinelPrefix + base64.StdEncoding.EncodeToString([]byte(v)) + translate.SentinelSuffix
		}
	}
	return v
}

var _ face.Gateway = faceGateway{}
