package caddymodule

import (
	"context"
	"encoding/json"
	"net/http"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/caddymodule/face"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
)

// A graceful stop: Caddy exits (SIGTERM, `caddy stop`), or a reload
// removes the last mcp_gateway handler. From its start, requests arriving
// here are refused with 503 and Retry-After, so that a balancer sends them
// to another instance; the calls in progress are cancelled (each upstream
// is told, as a client leaving would tell it), and the last handler's
// Cleanup waits for them to end, bounded by the http app's grace_period,
// before the bridges are released. A request relayed to the instance that
// owns its call is not cut: the owner would take the broken relay for a
// client that left, and end the call; it ends when the call does there, or
// is cut once the grace period is over. A reload that keeps a handler
// changes none of this: the calls run on, and requests are served.

// lifecycles holds the gateway's life in this process: one value shared by
// every configuration's handlers, released by the last one's Cleanup.
var lifecycles = caddy.NewUsagePool()

const lifecycleKey = "gateway"

// stopWaitEternal bounds how long Cleanup waits for the cancelled calls to
// end when the grace period is eternal (grace_period unset): each of them
// tells its upstream within seconds (the bridges bound that by 5 s).
const stopWaitEternal = 10 * time.Second

// lifecycle is the UsagePool value: the calls no client can pick up again
// (of every configuration, a reload's old one included), and whether the
// instance is stopping.
type lifecycle struct {
	calls    *streamRegistry
	stopping atomic.Bool
}

// Destruct implements caddy.Destructor; the last handler's Cleanup has
// stopped the calls already.
func (*lifecycle) Destruct() error { return nil }

// errStopping is the cause given to the calls a graceful stop cancels.
var errStopping = &closedError{msg: "the gateway instance is stopping: send the request again"}

// provisionLifecycle takes (or makes) the process's lifecycle, and reads
// the grace period of the http app serving this handler.
func (h *Handler) provisionLifecycle(ctx caddy.Context) error {
	val, _, err := lifecycles.LoadOrNew(lifecycleKey, func() (caddy.Destructor, error) {
		return &lifecycle{calls: newStreamRegistry()}, nil
	})
	if err != nil {
		return err
	}
	h.life = val.(*lifecycle)
	h.calls = h.life.calls
	h.stopWait = stopWaitEternal
	if app, err := ctx.AppIfConfigured("http"); err == nil {
		if a, ok := app.(*caddyhttp.App); ok && a.GracePeriod > 0 {
			h.stopWait = time.Duration(a.GracePeriod)
		}
	}
	return nil
}

// stop begins the graceful stop: new requests are refused, and the calls
// in progress are cancelled after delay (stream_close_delay). Only the
// first call counts.
func (l *lifecycle) stop(delay time.Duration) {
	l.stopping.Store(true)
	l.calls.closeAllWith(delay, errStopping)
}

// stopIfLast stops the gateway when this handler is the last one (a
// reload that removes it, or the exit), and waits for the calls in
// progress to end, at most h.stopWait: their upstreams must be told before
// Cleanup releases the bridges they run on.
func (h *Handler) stopIfLast() {
	if h.life == nil {
		return // a partial provisioning
	}
	if n, _ := lifecycles.References(lifecycleKey); n > 1 && !caddy.Exiting() {
		return // a reload: the new configuration goes on serving
	}
	h.life.stop(time.Duration(h.Streams.StreamCloseDelay))
	ctx, cancel := context.WithTimeout(context.Background(), h.stopWait+time.Duration(h.Streams.StreamCloseDelay))
	defer cancel()
	if !h.life.calls.wait(ctx) {
		h.logger.Warn("calls still running when the grace period ended", zap.Int("calls", h.life.calls.count()))
	}
}

// refuseStopping answers a request that arrives while the instance stops:
// 503, with Retry-After, saying so (not that an upstream failed).
func refuseStopping(w http.ResponseWriter, id json.RawMessage) error {
	w.Header().Set("Retry-After", face.StoppingRetryAfter)
	return jsonrpc.WriteError(w, id, &jsonrpc.RPCError{
		HTTPStatus: http.StatusServiceUnavailable, Code: jsonrpc.InternalError,
		Message: "Service Unavailable: " + face.StoppingMessage,
	})
}

// isStopping reports whether the graceful stop has begun (false for a
// handler not provisioned).
func (l *lifecycle) isStopping() bool { return l != nil && l.stopping.Load() }

// abandoned is the error of a request the gateway ended itself (a stop, or
// its configuration unloaded): 503, naming why.
func abandoned(why *closedError) *jsonrpc.RPCError {
	return &jsonrpc.RPCError{HTTPStatus: http.StatusServiceUnavailable, Code: jsonrpc.InternalError,
		Message: "the call was abandoned: " + why.Error()}
}
