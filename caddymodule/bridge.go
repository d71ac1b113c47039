package caddymodule

import (
	"context"
	"encoding/hex"
	"net"
	"net/http"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/caddyserver/caddy/v2"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/caddymodule/face"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/legacy"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/sse"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/forward"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/seal"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/traces"
)

// Pool limits of the upstream sessions the forward bridge opens. Every
// parked call holds one, so the bound is well above the default max_parked:
// a call parked holding no stream (resume on) costs the gateway about 5 KiB
// and no connection, and 100,000 of them fit on one instance (BENCHMARKS.md);
// calls parked holding their streams are bounded first by max_parked and
// the open-file limit (two connections each).
//
// A session is retired (ended upstream, a new one opened for the next call)
// after sessionMaxCalls calls: the servers' event stores keep each session's
// streams until it ends (legacy.PoolOptions.MaxUses), and a new session
// costs about three upstream requests, about 1 % of a hundred calls' own.
//
// A call parked holding no stream closes its call stream's connection (the
// upstream is still writing it); up to upstreamSpares such connections per
// upstream are replaced at once in the background (legacy.ConnOptions.Spares),
// so an instance whose calls resume elsewhere does not dial on each call's
// path.
const (
	maxUpstreamSessions = 200_000
	sessionIdleTimeout  = 2 * time.Minute
	sessionMaxCalls     = 100
	reapInterval        = 30 * time.Second
	upstreamSpares      = 16
)

// bridges holds the forward bridge: its parked calls and upstream sessions
// outlive a config reload, and end when the last config using them is
// unloaded (at shutdown).
var bridges = caddy.NewUsagePool()

const bridgeKey = "forward"

// bridgeState is the UsagePool value: the bridge and the goroutine that
// reaps idle upstream sessions.
type bridgeState struct {
	bridge *forward.Bridge
	pool   *legacy.Pool
	client *legacy.ConnClient
	stop   chan struct{}
	once   sync.Once
}

func newBridgeState(logger *zap.Logger) *bridgeState {
	// The upstream sessions' own HTTP/1.1 client: a parked call's two open
	// streams cost a goroutine each, not three (see legacy.ConnClient).
	client := legacy.NewConnClient(legacy.ConnOptions{MaxIdlePerHost: 128, Spares: upstreamSpares,
		Dial: guardDial((&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext)})
	pool := legacy.NewPool(legacy.PoolOptions{MaxSessions: maxUpstreamSessions, IdleTimeout: sessionIdleTimeout,
		MaxUses: sessionMaxCalls, Client: client})
	s := &bridgeState{bridge: forward.New(pool, forward.DefaultOptions()), pool: pool, client: client, stop: make(chan struct{})}
	go s.reap(logger)
	return s
}

func (s *bridgeState) reap(logger *zap.Logger) {
	defer func() {
		if err := recover(); err != nil {
			logger.Error("upstream session reaper panicked", zap.Any("error", err), zap.ByteString("stack", debug.Stack()))
		}
	}()
	ticker := time.NewTicker(reapInterval)
	defer ticker.Stop()
	for {
		select {
		case now := <-ticker.C:
			s.pool.Reap(now)
		case <-s.stop:
			return
		}
	}
}

// Destruct implements caddy.Destructor: parked calls are abandoned (their
// upstream requests answered and cancelled) and idle sessions closed.
func (s *bridgeState) Destruct() error {
	s.once.Do(func() {
		close(s.stop)
		s.bridge.Close()
		s.pool.Close()
		s.client.CloseIdleConnections()
	})
	return nil
}

// provisionBridge takes (or makes) the shared bridge and builds this
// handler's options from base (setDefaults), which its requests carry: each
// mcp_gateway block's options apply to the calls it serves.
func (h *Handler) provisionBridge(base forward.Options) error {
	val, _, err := bridges.LoadOrNew(bridgeKey, func() (caddy.Destructor, error) {
		return newBridgeState(h.logger.Named("bridge")), nil
	})
	if err != nil {
		return err
	}
	st := val.(*bridgeState)
	h.bridge = st.bridge
	h.bridgeOpts = h.bridgeOptions(base)
	return nil
}

// serveBridged serves a modern request from the legacy upstream up (for a
// new call, or another one if up cannot open a session: bridgeFailover);
// breq has the request and its principal. A retry goes to the call it
// resumes, whichever upstream that runs on: up is then that upstream, or
// nil when the call is no longer parked here (or its upstream left the
// configuration), and the bridge answers.
func (h *Handler) serveBridged(w http.ResponseWriter, r *http.Request, breq forward.Request, up *Upstream) error {
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	if breq.Method == "subscriptions/listen" {
		defer h.streams.add(cancel)() // the client listens again after a reload
	} else {
		defer h.calls.add(cancel)() // a call survives a reload
	}
	sink := h.newSink(w, ctx)
	defer sink.close()
	// What the call sends upstream names this request's trace (its span,
	// or without tracing the client's traceparent), not its session's.
	ctx = traces.Extract(ctx, r.Header)
	breq.Header = h.bridgedHeader(r)
	breq.TargetOf = func(url string) (translate.Target, bool) {
		// A task taken over resumes only on an upstream still configured.
		if u := h.upstreamByURL(r, url); u != nil {
			return u.target, true
		}
		return translate.Target{}, false
	}
	if up != nil {
		breq.Target = up.target
		breq.Failover = h.bridgeFailover(w, r, &up)
	}
	s := h.bridge.Serve(ctx, breq, sink)
	served(r, s)
	if s.Refused != "" {
		// The client's refusal says the same whatever the reason.
		h.logger.Debug("requestState or taskId refused", zap.String("why", s.Refused), zap.String("method", breq.Method))
		if s.Refused == forward.RefusedUnknownKey {
			kind := foreignRequestState
			if strings.HasPrefix(breq.Method, "tasks/") {
				kind = foreignTaskID
			}
			h.warnForeignKey(kind)
		}
	}
	if up != nil {
		h.logUpstreamCause(up.URL, s.Cause)
	}
	return nil
}

// httpSink writes the bridge's answer: one JSON message, or an SSE stream
// once a notification (progress, log) has to go before the result. A write
// that blocks longer than writeTimeout fails. ctx is the request's, as the
// bridge got it: a 503 answered because the gateway ended it (a stop)
// carries Retry-After.
type httpSink struct {
	w            http.ResponseWriter
	ctx          context.Context
	keepAlive    time.Duration
	writeTimeout time.Duration
	sw           *sse.Writer
}

func (h *Handler) newSink(w http.ResponseWriter, ctx context.Context) *httpSink {
	return &httpSink{w: w, ctx: ctx, keepAlive: time.Duration(h.Streams.KeepAliveInterval), writeTimeout: time.Duration(h.Streams.WriteTimeout)}
}

// Header is the headers of the answer, until it is written.
func (s *httpSink) Header() http.Header { return s.w.Header() }

func (s *httpSink) Notify(msg []byte) error {
	if s.sw == nil {
		sse.SetHeaders(s.w.Header())
		s.w.WriteHeader(http.StatusOK)
		s.sw = sse.NewWriter(s.w)
		s.sw.WriteTimeout(s.writeTimeout)
		s.sw.KeepAlive(s.keepAlive)
	}
	return s.sw.WriteEvent(sse.Event{Data: msg, HasData: true})
}

func (s *httpSink) Respond(status int, msg []byte) error {
	if s.sw != nil {
		if msg == nil {
			return nil
		}
		return s.sw.WriteEvent(sse.Event{Data: msg, HasData: true})
	}
	if msg == nil {
		s.w.WriteHeader(status)
		return nil
	}
	s.w.Header().Set("Content-Type", "application/json")
	if status == http.StatusServiceUnavailable && closedBy(s.ctx) != nil {
		s.w.Header().Set("Retry-After", face.StoppingRetryAfter)
	}
	s.w.WriteHeader(status)
	_, err := newDeadlineWriter(s.w, s.writeTimeout).Write(msg)
	return err
}

func (s *httpSink) close() {
	if s.sw != nil {
		s.sw.Close()
	}
}

// processInstance names this process in the request state it seals.
var processInstance = sync.OnceValue(func() string {
	return hex.EncodeToString(seal.NewRandomKey()[:8])
})

// bridgedHeader is what a client's request passes to an upstream of the
// other era (both bridges): credentials (as upstream_auth says) and trace
// context, nothing of the client's session.
func (h *Handler) bridgedHeader(r *http.Request) http.Header {
	hdr := http.Header{}
	for _, k := range []string{"Authorization", "Traceparent", "Tracestate", "Baggage"} {
		if v := r.Header.Values(k); len(v) > 0 {
			hdr[k] = v
		}
	}
	h.setUpstreamAuthorization(hdr, r) // upstream_auth.go
	return hdr
}
