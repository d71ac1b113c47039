package caddymodule

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyevents"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/legacy"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/forward"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/seal"
)

// processKey is the sealing key made at start when no state_key is
// configured: one per process, so that sessions survive config reloads.
var processKey = sync.OnceValue(seal.NewRandomKey)

// Provision sets up the handler: first the defaults of the options left
// unset (setDefaults, the only place they are set), then the rest.
func (h *Handler) Provision(ctx caddy.Context) error {
	if err := h.checkServers(); err != nil { // servers_check.go
		return err
	}
	if len(h.Servers) > 0 {
		if err := h.provisionServers(ctx); err != nil { // federation.go
			return err
		}
	}
	fwdBase, revBase := h.setDefaults()
	h.logger = ctx.Logger()
	if h.serverName != "" {
		h.logger = h.logger.With(zap.String("server", h.serverName))
	}
	h.ctx = ctx
	if err := h.provisionAuth(); err != nil { // auth.go
		return err
	}
	creds, err := provisionUpstreamAuth(h.UpstreamAuth) // upstream_auth.go
	if err != nil {
		return err
	}
	h.upstreamCreds = creds
	h.streams, h.relays = newStreamRegistry(), newStreamRegistry()
	if err := h.provisionLifecycle(ctx); err != nil { // stop.go
		return err
	}

	for i, u := range h.Upstreams {
		if u == nil {
			return fmt.Errorf("upstream %d: empty", i)
		}
		if err := u.provision(h.serverName); err != nil {
			return err
		}
	}

	if err := h.provisionDynamic(ctx); err != nil {
		return err
	}

	sel, _, err := loadAs[reverseproxy.Selector](ctx, h, "SelectionPolicyRaw", "selection policy")
	if err != nil {
		return err
	}
	h.selector = sel

	if err := h.provisionTransport(ctx); err != nil {
		return err
	}
	for _, u := range h.Upstreams {
		h.upstreamTarget(u)
	}
	if err := h.provisionPeerTransport(ctx); err != nil {
		return err
	}

	h.metrics = newGatewayMetrics(ctx.GetMetricsRegistry())
	loadMetrics(ctx.Done(), h.metrics)
	h.observer = callObserver{metrics: h.metrics, logger: h.logger, done: ctx.Done()}
	if h.Security.LogUnsafeDetails {
		h.logger.Warn("log_unsafe_details is on: debug logs will carry session ids, principals (tokens) and request bodies")
	}
	if err := h.provisionKeys(); err != nil {
		return err
	}
	if err := h.provisionFleet(); err != nil {
		return err
	}
	if err := h.provisionTaskStore(ctx); err != nil {
		return err
	}
	if err := h.provisionBridge(fwdBase); err != nil {
		return err
	}
	if err := h.provisionReverse(revBase); err != nil {
		return err
	}
	if err := h.provisionFaces(ctx); err != nil { // faces.go
		return err
	}

	h.allowedOrigin = make(map[string]bool, len(h.Security.AllowedOrigins))
	for _, o := range h.Security.AllowedOrigins {
		h.allowedOrigin[strings.ToLower(strings.TrimSuffix(o, "/"))] = true
	}
	if err := h.provisionHosts(); err != nil {
		return err
	}
	h.quirks = newQuirkSet(h.Security.AcceptClientQuirks) // checked in Validate

	// End our own streams when this config is unloaded (reload) and, earlier,
	// when the server begins to stop: Caddy's grace period never ends SSE
	// streams, and on exit it waits for them. Calls their clients cannot
	// pick up again (h.calls) finish on the old configuration after a
	// reload (the bridges' state is shared with the new one); they are
	// ended when the gateway stops (stop.go).
	delay := time.Duration(h.Streams.StreamCloseDelay)
	context.AfterFunc(ctx, func() {
		h.streams.closeAll(delay)
		h.relays.closeAll(delay)
	})
	if events, err := ctx.App("events"); err == nil {
		if app, ok := events.(*caddyevents.App); ok {
			_ = app.On("stopping", stoppingHandler{h.streams, h.relays, h.life, delay, h.stopWait})
			h.events = healthEvents{app: app, ctx: ctx}
		}
	}
	h.startHealthChecks(ctx)
	return nil
}

// provisionKeys builds the keyring from state_keys, or from the process key.
func (h *Handler) provisionKeys() error {
	if len(h.Fleet.StateKeys) == 0 {
		h.logger.Warn("no state_key configured: sealing with a random key made at start; " +
			"sessions will not survive a restart and no other instance can serve them")
		kr, err := seal.NewKeyring(processKey())
		if err != nil {
			return err
		}
		return h.setKeyring(kr)
	}
	repl := caddy.NewReplacer()
	keys := make([][]byte, 0, len(h.Fleet.StateKeys))
	for i, s := range h.Fleet.StateKeys {
		k, err := parseStateKey(i+1, repl.ReplaceAll(s, ""))
		if err != nil {
			return err
		}
		keys = append(keys, k)
	}
	kr, err := seal.NewKeyring(keys...)
	if err != nil {
		return fmt.Errorf("state_key: %w", err)
	}
	return h.setKeyring(kr)
}

// setKeyring sets the block's keyring, and the handler's own: a server's
// of a federated block, derived from the block's.
func (h *Handler) setKeyring(kr *seal.Keyring) error {
	h.blockKeyring, h.keyring = kr, kr
	if h.serverName != "" {
		own, err := kr.ForServer(h.serverName)
		if err != nil {
			return err
		}
		h.keyring = own
	}
	return nil
}

// makeKeyHint says how to make a state_key.
const makeKeyHint = "make one with `openssl rand -base64 32` and give every instance the same"

// parseStateKey decodes the n-th (from 1) state_key, placeholders expanded.
// An empty key is most often an environment variable left unset: say so,
// rather than that it decodes to 0 bytes.
func parseStateKey(n int, s string) ([]byte, error) {
	if s == "" {
		return nil, fmt.Errorf("state_key %d is empty (an unset environment variable?): %s", n, makeKeyHint)
	}
	k, err := seal.ParseKey(s)
	if err != nil {
		return nil, fmt.Errorf("state_key %d: %w: %s", n, err, makeKeyHint)
	}
	return k, nil
}

// Validate checks the configuration Provision completed, and changes
// nothing. Each error names the option that is wrong.
func (h *Handler) Validate() error {
	if len(h.Upstreams) == 0 && h.dynamic == nil {
		return errNoUpstream
	}
	seen := make(map[string]bool, len(h.Upstreams))
	for _, u := range h.Upstreams {
		if seen[u.URL] {
			return fmt.Errorf("upstream %q is listed twice", u.URL)
		}
		seen[u.URL] = true
	}
	for _, c := range []struct {
		name string
		n    int64
	}{
		{"max_request_body", h.Security.MaxRequestBody},
		{"max_parked", int64(h.Parking.MaxParked)},
		{"max_parked_per_principal", int64(h.Parking.MaxParkedPerPrincipal)},
		{"max_rounds", int64(h.Parking.MaxRounds)},
		{"max_inputs_per_round", int64(h.Parking.MaxInputsPerRound)},
		{"max_buffered_notifications", int64(h.Parking.MaxBufferedNotifications)},
		{"max_sessions_per_principal", int64(h.Sessions.MaxSessionsPerPrincipal)},
		{"max_get_streams", int64(h.Sessions.MaxGetStreams)},
		{"max_get_streams_per_principal", int64(h.Sessions.MaxGetStreamsPerPrincipal)},
		{"max_fails", int64(h.Health.Passive.MaxFails)},
		{"health_passes", int64(h.Health.Active.Passes)},
		{"health_fails", int64(h.Health.Active.Fails)},
		{"max_tasks", int64(h.Tasks.MaxTasks)},
		{"max_tasks_per_principal", int64(h.Tasks.MaxTasksPerPrincipal)},
		{"max_task_result", h.Tasks.MaxResult},
		{"max_listen_task_ids", int64(h.Tasks.MaxListenTaskIDs)},
		{"max_task_listeners_per_principal", int64(h.Tasks.MaxTaskListenersPerPrincipal)},
	} {
		if c.n < 1 {
			return fmt.Errorf("%s: must be at least 1, got %d", c.name, c.n)
		}
	}
	if err := checkTasks(h.Tasks.Rules); err != nil {
		return err
	}
	if err := checkClientQuirks(h.Security.AcceptClientQuirks); err != nil {
		return err
	}
	if err := checkTaskStore(h.Tasks.Store); err != nil {
		return err
	}
	if err := checkTaskLease(h.Tasks.Lease); err != nil {
		return err
	}
	if err := checkMaxTaskResult(h.Tasks.MaxResult); err != nil {
		return err
	}
	if h.Parking.MaxBufferedNotifications > maxBufferedNotifications {
		return fmt.Errorf("max_buffered_notifications: must be at most %d (each call holds a buffer this large), got %d",
			maxBufferedNotifications, h.Parking.MaxBufferedNotifications)
	}
	// Durations that cannot be turned off (keepalive_interval,
	// write_timeout, gather_window and health_interval take any value:
	// negative means off). Zero stream_close_delay closes at once.
	if h.Health.Passive.UnhealthyLatency < 0 {
		return fmt.Errorf("unhealthy_latency: must not be negative, got %v", time.Duration(h.Health.Passive.UnhealthyLatency))
	}
	for _, code := range h.Health.Passive.UnhealthyStatus {
		if code < 1 || code > 5 && code < 100 || code > 599 {
			return fmt.Errorf("unhealthy_status: %d is neither a status (100-599) nor a class (1-5)", code)
		}
	}
	if time.Duration(h.Parking.ResumeLinger) > forward.MaxResumeLinger {
		return fmt.Errorf("resume_linger: must be at most %v, got %v", forward.MaxResumeLinger, time.Duration(h.Parking.ResumeLinger))
	}
	if h.Streams.StreamCloseDelay < 0 {
		return fmt.Errorf("stream_close_delay: must not be negative, got %v", time.Duration(h.Streams.StreamCloseDelay))
	}
	for _, c := range []struct {
		name string
		d    caddy.Duration
	}{
		{"fail_duration", h.Health.Passive.FailDuration},
		{"park_ttl", h.Parking.ParkTTL},
		{"session_lifetime", h.Sessions.SessionLifetime},
		{"max_task_wait", h.Tasks.MaxTaskWait},
		{"health_timeout", h.Health.Active.Timeout},
		{"task_ttl", h.Tasks.TTL},
		{"task_listen_poll", h.Tasks.ListenPoll},
	} {
		if c.d <= 0 {
			return fmt.Errorf("%s: must be positive, got %v", c.name, time.Duration(c.d))
		}
	}
	return nil
}

// Cleanup releases what this configuration held. Streams are closed by the
// context hook set in Provision; shared upstream state is released here.
// The last handler first stops the calls in progress, and waits for them
// (stop.go).
func (h *Handler) Cleanup() error {
	if h.fed != nil {
		for _, s := range h.fed.servers {
			_ = s.Cleanup()
		}
	}
	h.stopIfLast()
	for _, u := range h.Upstreams {
		if u != nil && u.state != nil {
			_, _ = upstreamStates.Delete(u.URL)
		}
	}
	if h.dynamic != nil {
		h.dynamic.release()
	}
	if h.client != nil {
		h.client.CloseIdleConnections()
	}
	if c, ok := h.bridgeClient.(*legacy.ConnClient); ok {
		c.CloseIdleConnections()
	}
	if h.fleet.client != nil {
		h.fleet.client.CloseIdleConnections()
	}
	if h.bridge != nil {
		_, _ = bridges.Delete(bridgeKey)
	}
	if h.reverse != nil {
		_, _ = reverses.Delete(reverseKey)
	}
	if h.life != nil {
		_, _ = lifecycles.Delete(lifecycleKey)
	}
	return nil
}

// stoppingHandler ends the streams when Caddy emits "stopping", which comes
// before the HTTP servers wait for open connections; and, when the process
// is exiting (a reload emits "stopping" too), begins the graceful stop, in
// which the relays end only once its wait is over (stop.go).
type stoppingHandler struct {
	streams, relays *streamRegistry
	life            *lifecycle
	delay, wait     time.Duration
}

// Handle implements caddyevents.Handler.
func (s stoppingHandler) Handle(context.Context, caddy.Event) error {
	s.streams.closeAll(s.delay)
	if !caddy.Exiting() {
		s.relays.closeAll(s.delay)
		return nil
	}
	s.life.stop(s.delay)
	s.relays.closeAllWith(s.wait, errStopping)
	return nil
}

var _ caddyevents.Handler = stoppingHandler{}

// loadAs loads the module configured in field of the struct that
// structPtr points to (h, or one of its groups; what names it in errors)
// and returns it as a T, and as loaded.
func loadAs[T any](ctx caddy.Context, structPtr any, field, what string) (T, any, error) {
	var zero T
	mod, err := ctx.LoadModule(structPtr, field)
	if err != nil {
		return zero, nil, fmt.Errorf("loading %s: %w", what, err)
	}
	t, ok := mod.(T)
	if !ok {
		return zero, nil, fmt.Errorf("%s: module %T is not a %s", what, mod, reflect.TypeFor[T]())
	}
	return t, mod, nil
}

// streamRegistry tracks every upstream exchange in flight (SSE streams and
// pending JSON answers) so that the handler can end them itself on config
// unload and on shutdown: Caddy's grace period does not end SSE streams, and
// an open stream would hang `caddy stop`. An exchange stays registered until
// its handler is done with it, cancelled or not, so that a stop can wait
// for it (wait).
type streamRegistry struct {
	mu        sync.Mutex
	closed    bool
	cancelled bool
	cause     error // given to the exchanges closeAll ends
	next      uint64
	open      map[uint64]context.CancelCauseFunc
	timer     *time.Timer
	drained   chan struct{} // closed once closed and nothing is open
}

// errStreamsClosed is the cause given to exchanges the gateway ends itself
// when its configuration is unloaded.
var errStreamsClosed = &closedError{msg: "mcp_gateway is unloading: stream closed"}

// closedError is why the gateway ended an exchange itself.
type closedError struct{ msg string }

func (e *closedError) Error() string { return e.msg }

// closedBy returns the closedError that ended ctx, or nil.
func closedBy(ctx context.Context) *closedError {
	var e *closedError
	if errors.As(context.Cause(ctx), &e) {
		return e
	}
	return nil
}

func newStreamRegistry() *streamRegistry {
	return &streamRegistry{open: make(map[uint64]context.CancelCauseFunc), drained: make(chan struct{})}
}

// add registers an exchange. The returned func removes it; it must be
// called when the exchange ends. If the registry has already ended its
// exchanges, cancel is called at once (and the exchange is still
// registered until it ends).
func (s *streamRegistry) add(cancel context.CancelCauseFunc) (del func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cancelled {
		cancel(s.cause)
	}
	id := s.next
	s.next++
	s.open[id] = cancel
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.open, id)
		if len(s.open) > 0 || !s.closed {
			return
		}
		if s.timer != nil {
			// Nothing is left to close: release the timer (and through it
			// the handler) now; later exchanges are cancelled at once.
			s.timer.Stop()
			s.timer = nil
			s.cancelled = true
		}
		s.drain()
	}
}

// closeAll ends every exchange after delay (at once if delay <= 0), with
// errStreamsClosed. Only the first call of closeAll or closeAllWith counts.
func (s *streamRegistry) closeAll(delay time.Duration) {
	s.closeAllWith(delay, errStreamsClosed)
}

// closeAllWith is closeAll with the cause the exchanges get.
func (s *streamRegistry) closeAllWith(delay time.Duration, cause error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.closed, s.cause = true, cause
	if delay <= 0 || len(s.open) == 0 {
		s.cancelLocked()
		return
	}
	s.timer = time.AfterFunc(delay, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.timer = nil
		s.cancelLocked()
	})
}

func (s *streamRegistry) cancelLocked() {
	s.cancelled = true
	for _, cancel := range s.open {
		cancel(s.cause)
	}
	if len(s.open) == 0 {
		s.drain()
	}
}

// drain closes drained once; s.mu is held.
func (s *streamRegistry) drain() {
	select {
	case <-s.drained:
	default:
		close(s.drained)
	}
}

// wait waits until the registry is closed and every exchange has ended,
// or ctx ends; it reports whether they all ended.
func (s *streamRegistry) wait(ctx context.Context) bool {
	select {
	case <-s.drained:
		return true
	case <-ctx.Done():
		return false
	}
}

// count returns how many exchanges are open.
func (s *streamRegistry) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.open)
}
