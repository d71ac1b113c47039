package caddymodule

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/http/httputil"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/seal"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/traces"
)

// Forwarding between the instances of a fleet (fleet.go): the instance a
// client reached sends the request on to the owner of its call, signed
// (seal.ForwardAuth), and relays the owner's answer, JSON or SSE,
// unchanged as it comes. The owner verifies the signature before anything
// reaches an upstream, and never forwards a forwarded request again.

// forwardedKey marks, in a request's context, a request another instance
// forwarded here (its header verified): the value is true.
type forwardedKey struct{}

// forwardedFromKey holds, in the context of a request marked forwardedKey,
// what its forwarding header established (a forwardedFrom).
type forwardedFromKey struct{}

// forwardedFrom is what a verified forwarding header established.
type forwardedFrom struct {
	// principal is the hash of the principal the forwarding instance
	// evaluated: the request is served as it (principal).
	principal [16]byte
}

// forwardedOf returns what the forwarding header of r established, if r
// was forwarded here.
func forwardedOf(r *http.Request) (forwardedFrom, bool) {
	f, ok := r.Context().Value(forwardedFromKey{}).(forwardedFrom)
	return f, ok
}

// acceptForwarded verifies the forwarding header of r, if it has one: a
// request carrying one that does not verify is refused, whatever else it
// is. A verified request is returned marked (and without the header, so
// that nothing passes it on). The basic_auth recipe (docs/configuration.md) lets requests
// carrying the header skip authentication on the gateway's path: that is
// safe only because every one of them is verified here, before anything
// reaches an upstream.
func (h *Handler) acceptForwarded(r *http.Request, body []byte) (*http.Request, *jsonrpc.RPCError) {
	v := r.Header.Get(seal.ForwardedHeader)
	if v == "" && len(r.Header.Values(seal.ForwardedHeader)) == 0 {
		return r, nil
	}
	err := errors.New("more than one forwarding header")
	var principal [16]byte
	if len(r.Header.Values(seal.ForwardedHeader)) == 1 {
		principal, err = h.fleet.auth.Verify(v, forwardedRequest(r, body, [16]byte{}), time.Now())
	}
	if err != nil {
		h.logger.Warn("refused a forwarded request", zap.String("remote", r.RemoteAddr), zap.Error(err))
		status, msg := http.StatusForbidden, "Forbidden: forwarded request refused: "+err.Error()
		switch {
		case errors.Is(err, seal.ErrForwardBusy):
			// Possibly a replay, possibly a header held up during a
			// flood of forwarded requests: a fresh one passes.
			status, msg = http.StatusServiceUnavailable, "Service Unavailable: forwarded request refused: "+err.Error()+": send the request again"
		case errors.Is(err, seal.ErrForwardTarget):
			// Behind an advertised address, a restarted instance has a
			// new id: the call the client wants is gone with the old one.
			msg += " (that instance may have restarted: start the call again)"
		}
		h.metrics.Forwarded("received", "error")
		return r, &jsonrpc.RPCError{HTTPStatus: status, Code: jsonrpc.InvalidRequest, Message: msg}
	}
	r.Header.Del(seal.ForwardedHeader)
	ctx := context.WithValue(r.Context(), forwardedKey{}, true)
	r = r.WithContext(context.WithValue(ctx, forwardedFromKey{}, forwardedFrom{principal: principal}))
	if h.forwardedTokenMismatch(r) { // upstream_auth.go
		h.logger.Warn("refused a forwarded request: its access token is not the principal's it was forwarded for",
			zap.String("server", h.serverName), zap.String("remote", r.RemoteAddr))
		h.metrics.Forwarded("received", "error")
		return r, &jsonrpc.RPCError{HTTPStatus: http.StatusForbidden, Code: jsonrpc.InvalidRequest,
			Message: "Forbidden: forwarded request refused: its access token is not the principal's it was forwarded for"}
	}
	h.metrics.Forwarded("received", "ok")
	return r, nil
}

// forwardedRequest is what the forwarding header of r signs, for principal.
func forwardedRequest(r *http.Request, body []byte, principal [16]byte) seal.ForwardedRequest {
	return seal.ForwardedRequest{
		Method: r.Method, URI: originalURI(r), Body: body,
		Authorization: r.Header.Get("Authorization"), SessionID: r.Header.Get("Mcp-Session-Id"),
		Principal: principal,
	}
}

// originalURI is the request target as the client sent it, before any
// Caddy rewrite (handle_path, uri strip_prefix): the owner sees the same
// request, and rewrites it the same way.
func originalURI(r *http.Request) string {
	return originalRequest(r).URL.RequestURI()
}

// forwardFirstByteTimeout bounds how long a forwarded request waits for
// the first byte of the owner's answer: its "100 Continue" (the request
// says Expect: 100-continue, and the owner reads the body at once), or
// its answer. Once that came, the answer may take as long as the call
// does.
const forwardFirstByteTimeout = 10 * time.Second

// errOwnerSilent cancels a forwarded request whose owner did not answer
// within forwardFirstByteTimeout.
var errOwnerSilent = errors.New("the owner instance did not answer in time")

// relay forwards r, whose body was read into body, to owner and relays its
// answer. id is the JSON-RPC id for errors of the gateway's own. When the
// owner cannot be reached (or does not answer in time), unreachable, if
// set, may answer instead of the gateway's error (a task served from its
// record: storedTask; a lingering call resumed here: resumeHere); it
// reports whether it did. A request another instance
// forwarded is forwarded again only when again is set: a task's record
// names its owner now (relayTaskOwner), who serves it itself.
func (h *Handler) relay(w http.ResponseWriter, r *http.Request, body []byte, id json.RawMessage, owner translate.Owner, unreachable func() bool, again bool) error {
	routeOf(r).owner = owner.Instance
	block, federated := blockRequestOf(r)
	if federated {
		// A server's part of a federated block's request: the owner gets
		// the block's request, which it routes to the same server.
		r, body = block.r.WithContext(r.Context()), block.body
	}
	if _, forwarded := forwardedOf(r); forwarded && !again {
		// Never forward twice: the fleet disagrees on who is where.
		return jsonrpc.WriteError(w, id, &jsonrpc.RPCError{HTTPStatus: http.StatusBadGateway, Code: jsonrpc.InternalError,
			Message: "the call belongs to gateway instance " + owner.Instance + ", but " + h.fleet.instance +
				" received it forwarded already: check advertise and peer across the fleet"})
	}
	base := h.fleet.ownerAddress(owner)
	if base == "" {
		return jsonrpc.WriteError(w, id, &jsonrpc.RPCError{HTTPStatus: http.StatusMisdirectedRequest, Code: jsonrpc.InvalidRequest,
			Message: "the call belongs to gateway instance " + owner.Instance + ", whose address this instance does not know: " +
				"set advertise on every instance, or list it with peer"})
	}
	target, err := translate.ForwardURL(base, originalRequest(r).URL)
	if err != nil {
		// The front door (checkOriginForm) refuses what could get here.
		h.logger.Warn("refused to forward a request", zap.String("owner", owner.Instance), zap.Error(err))
		return jsonrpc.WriteError(w, id, &jsonrpc.RPCError{HTTPStatus: http.StatusBadRequest, Code: jsonrpc.InvalidRequest,
			Message: "Bad Request: the request cannot be forwarded to gateway instance " + owner.Instance + " (its target is not a plain path)"})
	}
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	defer h.relays.add(cancel)() // a stop lets it finish (stop.go)
	sig := h.fleet.auth.Sign(owner.Instance, forwardedRequest(r, body, h.principal(r)), time.Now())
	silent := time.AfterFunc(forwardFirstByteTimeout, func() { cancel(errOwnerSilent) })
	defer silent.Stop()
	// read: the owner answered something (its "100 Continue": it read the
	// request), so the call may have gone on there before it failed.
	var read atomic.Bool
	ctx, span := traces.Start(ctx, "relay", trace.SpanKindClient)
	if span != nil {
		span.SetAttributes(traces.Owner.String(owner.Instance))
		defer traces.End(span, "")
	}
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotFirstResponseByte: func() { read.Store(true); silent.Stop() }})
	out := r.WithContext(ctx)
	out.Body = io.NopCloser(bytes.NewReader(body))
	out.ContentLength = int64(len(body))
	// Built only to log: zap's With costs a relay more than its signature.
	logger := func() *zap.Logger {
		return h.logger.With(zap.String("owner", owner.Instance), zap.String("address", base))
	}
	if ce := h.logger.Check(zapcore.DebugLevel, "forwarding to the owner instance"); ce != nil {
		ce.Write(zap.String("owner", owner.Instance), zap.String("address", base))
	}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL = target
			pr.Out.Host = ""
			setForwarded(pr.Out.Header, pr.In) // the client's own only from a trusted proxy
			pr.Out.Header.Del("Origin")        // checked here; the owner's Host differs
			pr.Out.Header.Set(seal.ForwardedHeader, sig)
			// The owner's spans join this one's trace (with tracing on;
			// otherwise the client's trace context passes as it came).
			traces.Inject(ctx, pr.Out.Header)
			// The owner answers "100 Continue" as soon as it reads the
			// body, which stops the first-byte timer of a call that
			// may then run long.
			pr.Out.Header.Set("Expect", "100-continue")
		},
		Transport:     h.fleet.client.Transport,
		BufferPool:    relayBuffers{},
		FlushInterval: 0, // at once for SSE and chunked answers (ReverseProxy), at the end for a sized one
		ModifyResponse: func(resp *http.Response) error {
			resp.Header.Del("Server") // this instance's own is set already
			outcome := "ok"
			if resp.StatusCode == http.StatusForbidden || resp.StatusCode >= 500 {
				outcome = "error"
			}
			h.metrics.Forwarded("sent", outcome)
			if federated && block.ids != nil {
				// The owner answered the block's request: its taskIds
				// are in the block's namespace already.
				block.ids.asIs = true
			}
			if resp.StatusCode == http.StatusForbidden {
				// Different keys, a Host or Origin check on the owner, or a
				// clock far off: the client sees the owner's reason.
				logger().Warn("the owner instance refused a forwarded request (HTTP 403)")
			}
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			h.metrics.Forwarded("sent", "error")
			if unreachable != nil && r.Context().Err() == nil && unreachable() {
				logger().Warn("the owner instance is unreachable: the request was served here", zap.Error(err))
				return
			}
			if errors.Is(context.Cause(ctx), errOwnerSilent) {
				logger().Warn("the owner instance did not answer", zap.Duration("waited", forwardFirstByteTimeout))
				_ = jsonrpc.WriteError(w, id, &jsonrpc.RPCError{HTTPStatus: http.StatusGatewayTimeout, Code: jsonrpc.InternalError,
					Message: "the call belongs to gateway instance " + owner.Instance + ", which did not answer within " +
						forwardFirstByteTimeout.String() + ": start the call again"})
				return
			}
			if ctx.Err() != nil {
				return // the client left, or the config was unloaded
			}
			// The error names the owner's address: logged, not told.
			logger().Warn("the owner instance is unreachable", zap.Error(err))
			msg := "the call belongs to gateway instance " + owner.Instance + ", which is unreachable: start the call again"
			if read.Load() {
				// Its answers may have reached the upstream: the tool may
				// have run. Starting the call again would run it twice.
				msg = "the call belongs to gateway instance " + owner.Instance + ", which failed after it read this request: " +
					"the call may have run upstream, and its answer is lost with that instance; starting the call again may run it twice"
			}
			_ = jsonrpc.WriteError(w, id, &jsonrpc.RPCError{HTTPStatus: http.StatusBadGateway, Code: jsonrpc.InternalError, Message: msg})
		},
		ErrorLog: h.fleet.errorLog,
	}
	proxy.ServeHTTP(relayWriter{w, newDeadlineWriter(w, time.Duration(h.Streams.WriteTimeout)), w.Header().Clone()}, out)
	return nil
}

// relayBuffers lends the proxy its copy buffers: without a pool, it
// allocates 32 KiB for every relayed answer.
type relayBuffers struct{}

var relayBufferPool = sync.Pool{New: func() any { return new([32 << 10]byte) }}

func (relayBuffers) Get() []byte { return relayBufferPool.Get().(*[32 << 10]byte)[:] }

func (relayBuffers) Put(b []byte) {
	if len(b) == 32<<10 {
		relayBufferPool.Put((*[32 << 10]byte)(b))
	}
}

// relayWriter bounds each write of a relayed answer by write_timeout, so
// that a client that stops reading ends the relay (and so the call on the
// owner) instead of blocking it; Unwrap lets the proxy flush. It keeps the
// owner's informational answers (its "100 Continue") from the client, which
// sent its body already, and the headers this instance had set (preset)
// on the answer, which the proxy clears after a 1xx.
type relayWriter struct {
	http.ResponseWriter
	d      deadlineWriter
	preset http.Header
}

func (r relayWriter) Write(p []byte) (int, error) { return r.d.Write(p) }
func (r relayWriter) Unwrap() http.ResponseWriter { return r.ResponseWriter }

func (r relayWriter) WriteHeader(code int) {
	if code >= 100 && code < 200 && code != http.StatusSwitchingProtocols {
		return
	}
	h := r.Header()
	for k, v := range r.preset {
		if _, ok := h[k]; !ok {
			h[k] = v
		}
	}
	r.ResponseWriter.WriteHeader(code)
}

// storedTask is what answers a tasks/get, tasks/update or tasks/cancel
// whose owner (the instance its taskId names) cannot be reached, when the
// gateway keeps task records (task_store) and the task has one: the
// instance the record names as the task's owner now, if another one holds
// the task (it took it over), else this instance, from the record
// (forward.Request.OwnerGone: it takes the task over once the owner's lease
// lapsed). When that other owner cannot be reached either, this instance
// answers from the record too (fromRecord). Nil for other requests and
// without records; false without a record (the storage is not shared, or
// the task ended long ago): the client then gets the relay's error.
func (h *Handler) storedTask(w http.ResponseWriter, r *http.Request, l *learned, owner translate.Owner) func() bool {
	if h.bridgeOpts == nil || h.bridgeOpts.Tasks.Store == nil || l.in.era != eraModern || !strings.HasPrefix(l.breq.Method, "tasks/") {
		return nil
	}
	return func() bool {
		now, found := h.bridge.StoredOwner(r.Context(), &l.breq)
		switch {
		case !found:
			return false
		case now.Instance != "" && now.Instance != owner.Instance:
			_ = h.relay(w, r, l.body, l.id, now, h.fromRecord(w, r, l), false)
		default:
			h.fromRecord(w, r, l)()
		}
		return true
	}
}

// fromRecord is what answers a tasks/* request from the task's record on
// this instance, when the instance the record names as the task's owner
// cannot be reached (forward.Request.OwnerGone): tasks/get shows the
// record while that owner's lease holds, and the task is taken over here
// once it lapsed. It always answers.
func (h *Handler) fromRecord(w http.ResponseWriter, r *http.Request, l *learned) func() bool {
	return func() bool {
		l.breq.OwnerGone = true
		_ = h.serveBridgedHere(w, r, l, nil)
		return true
	}
}

// resumeHere is what serves the retry of a resumable call relayed to its
// home while it lingers there, when the home cannot be reached: this
// instance resumes the call itself, as it would have without the relay.
// It does so even when the home had read the retry (it may have posted
// the answers upstream, and the tool may have finished since): the
// upstream takes the first answer to a question and drops the others, and
// the call's stream, reopened after the state's event, replays the result
// if there is one. The tool runs once either way; telling the client to
// start the call again would run it twice.
func (h *Handler) resumeHere(w http.ResponseWriter, r *http.Request, l *learned, up *Upstream) func() bool {
	return func() bool {
		_ = h.serveBridgedHere(w, r, l, up)
		return true
	}
}

// serveBridgedHere serves, on this instance, a request it meant to relay
// to an owner that cannot be reached (resumeHere, fromRecord): with the
// upstream credential upstream_auth gives its client, obtained here, as
// for any request served here (serve); the relay left that to the owner.
func (h *Handler) serveBridgedHere(w http.ResponseWriter, r *http.Request, l *learned, up *Upstream) error {
	r, rerr := h.withUpstreamCredential(r) // upstream_auth.go
	if rerr != nil {
		return jsonrpc.WriteError(w, l.id, rerr)
	}
	return h.serveBridged(w, r, l.breq, up)
}

// relayTaskOwner relays a tasks/* request that names this instance's task,
// when this instance does not hold it (it restarted, or handed it over at a
// stop) and the task's record names another instance that holds it now
// (it took it over): that owner serves it from memory, or, when it cannot
// be reached, this instance from the record (fromRecord). A request another
// instance forwarded here is forwarded this once more: the owner the record
// names never forwards it again. It reports false, answering nothing, when
// there is no such owner: the bridge then serves the task from its record.
func (h *Handler) relayTaskOwner(w http.ResponseWriter, r *http.Request, l *learned) (bool, error) {
	if h.bridgeOpts == nil || h.bridgeOpts.Tasks.Store == nil || !strings.HasPrefix(l.breq.Method, "tasks/") || h.bridge.HoldsTask(&l.breq) {
		return false, nil
	}
	owner, found := h.bridge.StoredOwner(r.Context(), &l.breq)
	if !found || owner.Instance == "" {
		return false, nil
	}
	return true, h.relay(w, r, l.body, l.id, owner, h.fromRecord(w, r, l), true)
}
