package caddymodule

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net"
	"net/http"
	"strings"
	"syscall"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/caddymodule/face"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/legacy"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/sse"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/seal"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/traces"
)

// hopHeaders are never forwarded in either direction (RFC 9110 §7.6.1).
var hopHeaders = []string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

// exchange is one request to an upstream whose answer is relayed to the
// client.
type exchange struct {
	up     *Upstream
	method string
	header http.Header
	body   []byte
	// answerSession maps the upstream's Mcp-Session-Id answer header (""
	// when absent) of a successful answer to the value the client gets; nil,
	// or a "" result, drops the header.
	answerSession func(up *Upstream, upstreamValue string) string
	// failover, if set, moves the request to another upstream when up
	// could not take it: it refused the connection (nothing was
	// delivered), or, for an idempotent request, dropped it without an
	// answer. A new session or a modern request is then not lost to a dead
	// or restarting upstream.
	failover *failover
	// idempotent requests may be sent again after a connection dropped
	// without an answer.
	idempotent bool
	// failID, if set, is the id of a modern request: a 2026-07-28 stream
	// cannot be resumed, so when its upstream stream fails mid-answer (or
	// Caddy stops) the client gets a JSON-RPC error for it on the stream,
	// not a broken stream; and a reload lets it finish.
	failID json.RawMessage
	// listen marks a long-lived stream the client opens again
	// (subscriptions/listen): a reload closes it even when failID is set.
	listen bool
}

// upstreamHeader builds the headers of an upstream request from the
// client's: end-to-end headers pass (Authorization, Accept,
// MCP-Protocol-Version, Mcp-Method, Mcp-Name, Mcp-Param-*, Last-Event-ID,
// trace context), the gateway's own concerns do not. X-Forwarded-For,
// -Proto and -Host are the gateway's (setForwarded). A legacy request's
// go through legacyUpstreamHeader, which drops the 2026-07-28 ones.
func (h *Handler) upstreamHeader(r *http.Request) http.Header {
	hdr := r.Header.Clone()
	for _, k := range hopHeaders {
		hdr.Del(k)
	}
	for _, k := range []string{"Origin", "Mcp-Session-Id", "Content-Length", "Accept-Encoding", "Host"} {
		hdr.Del(k)
	}
	setForwarded(hdr, r)
	h.setUpstreamAuthorization(hdr, r) // upstream_auth.go
	return hdr
}

// forward sends ex upstream and relays the answer to w: JSON is copied, SSE
// is relayed event by event with keep-alives. The exchange is registered so
// that unloading the config ends it.
func (h *Handler) forward(w http.ResponseWriter, r *http.Request, ex exchange) error {
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	if ex.failID != nil && !ex.listen {
		defer h.calls.add(cancel)() // it cannot be resumed: let a reload finish it
	} else {
		defer h.streams.add(cancel)()
	}

	resp, err := h.send(ctx, ex)
	for err != nil && ex.failover != nil && ctx.Err() == nil && (refused(err) || ex.idempotent && dropped(err)) {
		if ex.up = ex.failover.next(ex.up, err); ex.up == nil {
			break
		}
		resp, err = h.send(ctx, ex)
	}
	if err != nil {
		return h.upstreamFailed(w, r, ctx, ex, err)
	}
	defer resp.Body.Close()
	routeOf(r).up = ex.up

	out := w.Header()
	for k, v := range resp.Header {
		out[k] = v
	}
	for _, k := range hopHeaders {
		out.Del(k)
	}
	out.Del("Mcp-Session-Id")
	if ex.answerSession != nil && resp.StatusCode/100 == 2 {
		if mapped := ex.answerSession(ex.up, resp.Header.Get("Mcp-Session-Id")); mapped != "" {
			out.Set("Mcp-Session-Id", mapped)
		}
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if mt != "text/event-stream" {
		w.WriteHeader(resp.StatusCode)
		if _, err := io.Copy(newDeadlineWriter(w, time.Duration(h.Streams.WriteTimeout)), resp.Body); err != nil {
			h.endedEarly(r, ctx, "copying upstream answer", err)
		}
		return nil
	}
	out.Del("Content-Length")
	sse.SetHeaders(out)
	w.WriteHeader(resp.StatusCode)
	return h.relaySSE(w, r, ctx, resp.Body, ex.failID, ex.listen)
}

// send makes the upstream request of ex, and counts the passive-health
// failures its answer shows (observeAnswer).
func (h *Handler) send(ctx context.Context, ex exchange) (*http.Response, error) {
	var body io.Reader
	if ex.body != nil {
		body = bytes.NewReader(ex.body)
	}
	req, err := http.NewRequestWithContext(ctx, ex.method, ex.up.URL, body)
	if err != nil {
		return nil, err
	}
	req.Header = ex.header
	ctx, span := traces.Start(ctx, ex.method, trace.SpanKindClient)
	if span != nil {
		span.SetAttributes(traces.Upstream.String(ex.up.URL))
	}
	traces.Inject(ctx, req.Header) // the client's own trace context, replaced by this span's
	start := time.Now()
	resp, err := h.client.Do(req)
	if span != nil {
		traces.End(span, traces.ExchangeError(resp, err)) // at the answer's headers: the stream is the request's span's
	}
	if err == nil {
		h.observeAnswer(ex.up, resp, time.Since(start))
	}
	return resp, err
}

// refused reports whether err means the upstream could not be reached at
// all (the request was not delivered).
func refused(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// dropped reports whether the connection broke before any answer came.
func dropped(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET)
}

// relaySSE copies an upstream event stream to the client, event by event.
// If the upstream fails mid-stream and failID is set, the stream ends with
// a JSON-RPC error for failID; a subscription (listen) the gateway closes
// itself (a reload, a stop) ends with its graceful completion instead, as
// the upstream would end it when it stops. The upstream's own completion
// is relayed as any other event.
func (h *Handler) relaySSE(w http.ResponseWriter, r *http.Request, ctx context.Context, upstream io.Reader, failID json.RawMessage, listen bool) error {
	sw := sse.NewWriter(w)
	sw.WriteTimeout(time.Duration(h.Streams.WriteTimeout))
	defer sw.Close()
	if err := http.NewResponseController(w).Flush(); err != nil {
		return nil // client gone
	}
	sw.KeepAlive(time.Duration(h.Streams.KeepAliveInterval))
	rd := sse.NewReader(upstream, 0)
	for {
		ev, err := rd.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			if failID != nil && r.Context().Err() == nil {
				closed := closedBy(ctx)
				if listen && closed != nil {
					_ = sw.WriteEvent(sse.Event{Data: translate.ListenCompletion(failID, nil), HasData: true})
					return nil
				}
				rerr := &jsonrpc.RPCError{HTTPStatus: http.StatusBadGateway, Code: jsonrpc.InternalError,
					Message: "the upstream MCP server failed mid-answer"}
				if closed != nil {
					rerr = abandoned(closed)
				} else {
					h.logger.Warn("upstream event stream failed", zap.Error(err))
				}
				_ = sw.WriteEvent(sse.Event{Data: jsonrpc.ErrorResponse(failID, rerr), HasData: true})
				return nil
			}
			h.endedEarly(r, ctx, "reading upstream event stream", err)
			return nil
		}
		if err := sw.WriteEvent(ev); err != nil {
			return nil // client gone; the deferred cancel ends the upstream request
		}
	}
}

// endedEarly handles a relay that stopped before the upstream finished. If
// the gateway closed it (unload) or the client left, the response just ends.
// Otherwise the upstream failed mid-answer: the client's response is aborted
// so that it sees a broken stream, not a complete one (a legacy client then
// resumes with Last-Event-ID).
func (h *Handler) endedEarly(r *http.Request, ctx context.Context, what string, err error) {
	if closedBy(ctx) != nil || r.Context().Err() != nil {
		return
	}
	if c := h.logger.Check(zapcore.WarnLevel, "aborting with incomplete response"); c != nil {
		c.Write(zap.String("while", what), zap.Error(err))
	}
	panic(http.ErrAbortHandler)
}

// upstreamFailed answers the client when the upstream request got no
// response at all.
func (h *Handler) upstreamFailed(w http.ResponseWriter, r *http.Request, ctx context.Context, ex exchange, err error) error {
	switch {
	case r.Context().Err() != nil:
		return caddyhttp.Error(499, err)
	case closedBy(ctx) != nil:
		w.Header().Set("Retry-After", face.StoppingRetryAfter)
		return jsonrpc.WriteError(w, requestID(ex.body), abandoned(closedBy(ctx)))
	}
	if ex.up == nil {
		return jsonrpc.WriteError(w, requestID(ex.body), h.noUpstream())
	}
	h.countFailure(ex.up, "connection", err)
	h.logger.Warn("upstream unavailable", zap.String("upstream", ex.up.URL), zap.Error(err))
	return jsonrpc.WriteError(w, requestID(ex.body), &jsonrpc.RPCError{
		HTTPStatus: http.StatusBadGateway, Code: jsonrpc.InternalError,
		Message: "upstream MCP server unavailable",
	})
}

// deadlineWriter bounds each write to the client by timeout (write_timeout),
// so that a client that stops reading fails the write instead of blocking it
// for good. Event streams get the same from sse.Writer.WriteTimeout.
type deadlineWriter struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
}

func newDeadlineWriter(w http.ResponseWriter, timeout time.Duration) deadlineWriter {
	return deadlineWriter{w: w, rc: http.NewResponseController(w), timeout: timeout}
}

func (d deadlineWriter) Write(p []byte) (int, error) {
	if d.timeout > 0 && d.rc.SetWriteDeadline(time.Now().Add(d.timeout)) == nil {
		defer func() { _ = d.rc.SetWriteDeadline(time.Time{}) }()
	}
	return d.w.Write(p)
}

// The two pass-through cells, where client and upstream speak the same
// era: a legacy client's session pinned to its upstream (servePinned,
// initializeLegacy), and a modern request sent statelessly to a modern
// upstream (serveModern). Both go through forward (proxy.go).

// JSON-RPC codes the legacy transport uses for session problems (the values
// the TypeScript SDK answers with, which legacy clients recognize).
const (
	codeSessionRequired = -32000
	codeSessionNotFound = -32001
)

// servePinned serves a request of a legacy client's pinned session (POST,
// the GET stream, DELETE) on up, the upstream its session id names, with
// the upstream's own session id. l.body is nil for GET and DELETE.
func (h *Handler) servePinned(w http.ResponseWriter, r *http.Request, l *learned, up *Upstream) error {
	hdr := h.legacyUpstreamHeader(r)
	if l.pin.Session != "" {
		hdr.Set("Mcp-Session-Id", string(l.pin.Session))
	}
	return h.forward(w, r, exchange{
		up: up, method: r.Method, header: hdr, body: l.body,
		answerSession: func(*Upstream, string) string { return l.sid },
	})
}

// initializeLegacy opens a new pinned session on up, chosen by the
// selection policy (or on another legacy upstream when up cannot take it:
// forward's failover). The pin is made from the initialize *response*, so
// the gateway id names the upstream session that really exists.
func (h *Handler) initializeLegacy(w http.ResponseWriter, r *http.Request, body []byte, up *Upstream) error {
	return h.forward(w, r, exchange{
		up: up, method: http.MethodPost, header: h.legacyUpstreamHeader(r), body: body,
		failover:   h.newFailover(w, r, speaksLegacy, "take the request", false),
		idempotent: true, // at worst an unused upstream session is left to expire
		answerSession: func(up *Upstream, upstreamSession string) string {
			return string(seal.SealPin(h.keyring, seal.Pin{
				Upstream:  up.URL,
				Session:   legacy.UpstreamSessionID(upstreamSession),
				Principal: h.principal(r),
				Issued:    time.Now(),
			}))
		},
	})
}

// legacyUpstreamHeader is upstreamHeader for a legacy request: without the
// 2026-07-28 routing headers (SEP-2243: Mcp-Method, Mcp-Name, Mcp-Param-*).
// Legacy has none, so the gateway checks nothing of what a legacy client
// sends in them; passed on, they would let it show a router or policy in
// front of the upstream that trusts them another method or tool than the
// body's.
func (h *Handler) legacyUpstreamHeader(r *http.Request) http.Header {
	hdr := h.upstreamHeader(r)
	for k := range hdr {
		if isRoutingHeader(k) {
			delete(hdr, k)
		}
	}
	return hdr
}

// isRoutingHeader reports whether the header named k is one of SEP-2243's:
// Mcp-Method, Mcp-Name or Mcp-Param-<name>, in any case.
func isRoutingHeader(k string) bool {
	const param = "mcp-param-"
	return strings.EqualFold(k, translate.HeaderMethod) || strings.EqualFold(k, translate.HeaderName) ||
		len(k) >= len(param) && strings.EqualFold(k[:len(param)], param)
}

// supportedModern lists the modern protocol versions the gateway serves.
var supportedModern = []string{translate.ModernVersion}

// readOnly lists the modern methods that change nothing upstream, so that
// sending one again after a dropped connection is safe.
var readOnly = map[string]bool{
	"server/discover": true, "tools/list": true, "prompts/list": true, "resources/list": true,
	"resources/templates/list": true, "completion/complete": true,
}

// serveModern forwards a modern (2026-07-28) request, validated already,
// statelessly to the modern upstream up, or to another modern one when up
// cannot take it (forward's failover).
func (h *Handler) serveModern(w http.ResponseWriter, r *http.Request, l *learned, up *Upstream) error {
	hdr := h.upstreamHeader(r)
	h.fillParamHeaders(r, hdr, l, up) // quirks.go
	return h.forward(w, r, exchange{
		up: up, method: http.MethodPost, header: hdr, body: l.body,
		failover:   h.newFailover(w, r, speaksModern, "take the request", false),
		idempotent: readOnly[l.breq.Method],
		failID:     l.breq.ID,
		listen:     l.breq.Method == "subscriptions/listen",
	})
}
