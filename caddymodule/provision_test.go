package caddymodule

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/forward"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/reverse"
	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
)

// runningCaddy starts, once per test binary, a Caddy with an empty
// configuration (no admin endpoint, nothing persisted), so that contexts
// made from its active context can load apps as Provision does
// (ctx.App("events") needs a configuration behind the context).
var runningCaddy = sync.OnceValue(func() error {
	off := false
	return caddy.Run(&caddy.Config{Admin: &caddy.AdminConfig{Disabled: true, Config: &caddy.ConfigSettings{Persist: &off}}})
})

// provisioned provisions h in a new caddy.Context, as Caddy does before
// Validate, and releases it (Cleanup, then the context) when the test ends.
func provisioned(t *testing.T, h *Handler) error {
	t.Helper()
	if err := runningCaddy(); err != nil {
		t.Fatalf("starting caddy: %v", err)
	}
	ctx, cancel := caddy.NewContext(caddy.ActiveContext())
	t.Cleanup(func() {
		_ = h.Cleanup()
		cancel()
	})
	return h.Provision(ctx)
}

// oneUpstream is a handler with one legacy upstream and nothing else set.
func oneUpstream() *Handler {
	return &Handler{Upstreams: []*Upstream{{URL: "http://127.0.0.1:9/mcp", Era: eraLegacy}}}
}

// TestProvisionDefaults: every option left unset gets the default its doc
// comment (module.go, config.go) states, the bridges' options are built from them, and
// the result passes Validate.
func TestProvisionDefaults(t *testing.T) {
	h := oneUpstream()
	if err := provisioned(t, h); err != nil {
		t.Fatal(err)
	}
	durations := []struct {
		name string
		got  caddy.Duration
		want time.Duration
	}{
		{"keepalive_interval", h.Streams.KeepAliveInterval, 15 * time.Second},
		{"stream_close_delay", h.Streams.StreamCloseDelay, 0},
		{"fail_duration", h.Health.Passive.FailDuration, 10 * time.Second},
		{"park_ttl", h.Parking.ParkTTL, 5 * time.Minute},
		{"gather_window", h.Parking.GatherWindow, 2 * time.Millisecond},
		{"resume_linger", h.Parking.ResumeLinger, 250 * time.Millisecond},
		{"write_timeout", h.Streams.WriteTimeout, 30 * time.Second},
		{"session_lifetime", h.Sessions.SessionLifetime, 24 * time.Hour},
		{"max_task_wait", h.Tasks.MaxTaskWait, time.Hour},
		{"health_interval", h.Health.Active.Interval, 0},
		{"health_timeout", h.Health.Active.Timeout, 5 * time.Second},
	}
	for _, d := range durations {
		if time.Duration(d.got) != d.want {
			t.Errorf("%s: got %v, want the documented default %v", d.name, time.Duration(d.got), d.want)
		}
	}
	ints := []struct {
		name      string
		got, want int64
	}{
		{"max_request_body", h.Security.MaxRequestBody, 4 << 20},
		{"max_parked", int64(h.Parking.MaxParked), 10000},
		{"max_parked_per_principal", int64(h.Parking.MaxParkedPerPrincipal), 100},
		{"max_rounds", int64(h.Parking.MaxRounds), 8},
		{"max_inputs_per_round", int64(h.Parking.MaxInputsPerRound), 16},
		{"max_buffered_notifications", int64(h.Parking.MaxBufferedNotifications), 32},
		{"max_sessions_per_principal", int64(h.Sessions.MaxSessionsPerPrincipal), 1000},
		{"max_get_streams", int64(h.Sessions.MaxGetStreams), 10000},
		{"max_get_streams_per_principal", int64(h.Sessions.MaxGetStreamsPerPrincipal), 100},
	}
	for _, n := range ints {
		if n.got != n.want {
			t.Errorf("%s: got %d, want the documented default %d", n.name, n.got, n.want)
		}
	}
	if h.Security.Principal != "{http.request.header.Authorization}" {
		t.Errorf("principal: got %q", h.Security.Principal)
	}
	if _, ok := h.selector.(*reverseproxy.RandomSelection); !ok {
		t.Errorf("selection_policy: got %T, want random", h.selector)
	}

	b, r := h.bridgeOpts, h.reverseOpts
	if b.ParkTTL != 5*time.Minute || b.MaxParked != 10000 || b.MaxParkedPerPrincipal != 100 || b.GatherWindow != 2*time.Millisecond || b.ResumeLinger != 250*time.Millisecond ||
		b.MaxRounds != 8 || b.MaxInputsPerRound != 16 || b.Lease.CallBuffer != 32 || b.Lease.MaxPerPrincipal != 1000 || b.Keyring == nil {
		t.Errorf("forward bridge options %+v", *b)
	}
	if r.RoundTimeout != 5*time.Minute || r.SessionLifetime != 24*time.Hour || r.MaxRounds != 8 || r.MaxInputsPerRound != 16 ||
		r.RetryPause != reverse.DefaultOptions().RetryPause || r.Keyring == nil {
		t.Errorf("reverse bridge options %+v", *r)
	}
	if err := h.Validate(); err != nil {
		t.Fatalf("the defaults do not validate: %v", err)
	}
}

// TestProvisionKeepsSetValues: Provision changes only what was left unset.
func TestProvisionKeepsSetValues(t *testing.T) {
	h := oneUpstream()
	h.Streams.KeepAliveInterval = caddy.Duration(time.Second)
	h.Parking.ParkTTL = caddy.Duration(time.Minute)
	h.Parking.GatherWindow = caddy.Duration(50 * time.Millisecond)
	h.Parking.ResumeLinger = caddy.Duration(time.Second)
	h.Parking.MaxRounds = 3
	h.Parking.MaxBufferedNotifications = 7
	h.Security.Principal = "{http.auth.user.id}"
	if err := provisioned(t, h); err != nil {
		t.Fatal(err)
	}
	if h.Streams.KeepAliveInterval != caddy.Duration(time.Second) || h.Parking.ParkTTL != caddy.Duration(time.Minute) || h.Parking.MaxRounds != 3 ||
		h.Parking.MaxBufferedNotifications != 7 || h.Security.Principal != "{http.auth.user.id}" {
		t.Fatalf("a set value changed: %+v", h)
	}
	b, r := h.bridgeOpts, h.reverseOpts
	if b.ParkTTL != time.Minute || b.GatherWindow != 50*time.Millisecond || b.ResumeLinger != time.Second || b.MaxRounds != 3 || b.Lease.CallBuffer != 7 ||
		r.RoundTimeout != time.Minute || r.MaxRounds != 3 {
		t.Fatalf("bridge options %+v, reverse options %+v", *b, *r)
	}
}

// TestProvisionNegativeMeansOff: a negative keepalive_interval,
// write_timeout, gather_window, resume_linger or health_interval is kept (not defaulted)
// and means off where it is used; it validates.
func TestProvisionNegativeMeansOff(t *testing.T) {
	h := oneUpstream()
	off := caddy.Duration(-1)
	h.Streams.KeepAliveInterval, h.Streams.WriteTimeout, h.Parking.GatherWindow, h.Health.Active.Interval, h.Parking.ResumeLinger = off, off, off, off, off
	if err := provisioned(t, h); err != nil {
		t.Fatal(err)
	}
	if h.Streams.KeepAliveInterval != off || h.Streams.WriteTimeout != off || h.Parking.GatherWindow != off || h.Health.Active.Interval != off || h.Parking.ResumeLinger != off {
		t.Fatalf("an off value was defaulted: keepalive %v, write_timeout %v, gather_window %v, health_interval %v",
			h.Streams.KeepAliveInterval, h.Streams.WriteTimeout, h.Parking.GatherWindow, h.Health.Active.Interval)
	}
	if err := h.Validate(); err != nil {
		t.Fatalf("off does not validate: %v", err)
	}
	if s := h.newSink(nil, context.Background()); s.keepAlive > 0 || s.writeTimeout > 0 {
		t.Fatalf("a bridged answer's stream has keep-alive %v and write timeout %v, want both off", s.keepAlive, s.writeTimeout)
	}
	if h.bridgeOpts.GatherWindow != 0 {
		t.Fatalf("the forward bridge waits %v for sibling questions, want no wait", h.bridgeOpts.GatherWindow)
	}
	if h.bridgeOpts.ResumeLinger != 0 {
		t.Fatalf("a call parked holding no stream lingers %v, want not at all", h.bridgeOpts.ResumeLinger)
	}
}

// TestValidateNamesTheField: each invalid option is named in the error,
// with the value it got; Validate changes nothing.
func TestValidateNamesTheField(t *testing.T) {
	base := oneUpstream()
	if err := provisioned(t, base); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		want string
		set  func(h *Handler)
	}{
		{"max_request_body: must be at least 1, got -1", func(h *Handler) { h.Security.MaxRequestBody = -1 }},
		{"max_parked: must be at least 1, got 0", func(h *Handler) { h.Parking.MaxParked = 0 }},
		{"max_parked_per_principal: must be at least 1, got -2", func(h *Handler) { h.Parking.MaxParkedPerPrincipal = -2 }},
		{"max_rounds: must be at least 1, got 0", func(h *Handler) { h.Parking.MaxRounds = 0 }},
		{"max_inputs_per_round: must be at least 1, got -1", func(h *Handler) { h.Parking.MaxInputsPerRound = -1 }},
		{"max_buffered_notifications: must be at least 1, got -1", func(h *Handler) { h.Parking.MaxBufferedNotifications = -1 }},
		{"max_buffered_notifications: must be at most 4096", func(h *Handler) { h.Parking.MaxBufferedNotifications = 4097 }},
		{"resume_linger: must be at most 1s, got 1.001s", func(h *Handler) { h.Parking.ResumeLinger = caddy.Duration(1001 * time.Millisecond) }},
		{"max_sessions_per_principal: must be at least 1, got 0", func(h *Handler) { h.Sessions.MaxSessionsPerPrincipal = 0 }},
		{"max_get_streams_per_principal: must be at least 1, got -1", func(h *Handler) { h.Sessions.MaxGetStreamsPerPrincipal = -1 }},
		{"stream_close_delay: must not be negative, got -1s", func(h *Handler) { h.Streams.StreamCloseDelay = caddy.Duration(-time.Second) }},
		{"fail_duration: must be positive, got -1ns", func(h *Handler) { h.Health.Passive.FailDuration = -1 }},
		{"park_ttl: must be positive, got -1ns", func(h *Handler) { h.Parking.ParkTTL = -1 }},
		{"session_lifetime: must be positive, got 0s", func(h *Handler) { h.Sessions.SessionLifetime = 0 }},
		{"max_task_wait: must be positive, got -1ns", func(h *Handler) { h.Tasks.MaxTaskWait = -1 }},
		{"health_timeout: must be positive, got -5s", func(h *Handler) { h.Health.Active.Timeout = caddy.Duration(-5 * time.Second) }},
		{`task_store: unknown value "redis" (want storage or off)`, func(h *Handler) { h.Tasks.Store = "redis" }},
		{"task_lease: must be at least 1s, got 0s", func(h *Handler) { h.Tasks.Lease = 0 }},
		{"task_lease: must be at least 1s, got 999ms", func(h *Handler) { h.Tasks.Lease = caddy.Duration(999 * time.Millisecond) }},
		{"max_task_result: must be at least 1, got 0", func(h *Handler) { h.Tasks.MaxResult = 0 }},
		{"max_task_result: must be at most 67108864 (64MiB, what a task record holds), got 67108865", func(h *Handler) { h.Tasks.MaxResult = 64<<20 + 1 }},
		{"at least one upstream (or a dynamic upstream source) is required", func(h *Handler) { h.Upstreams = nil }},
		{`upstream "http://127.0.0.1:9/mcp" is listed twice`, func(h *Handler) { h.Upstreams = append(h.Upstreams, h.Upstreams[0]) }},
	}
	for _, c := range cases {
		h := *base
		c.set(&h)
		before, _ := json.Marshal(&h)
		err := h.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Validate() = %v, want %q", err, c.want)
		}
		if after, _ := json.Marshal(&h); string(after) != string(before) {
			t.Errorf("Validate changed the configuration:\n%s\n%s", before, after)
		}
	}
}

// TestCaddyfileOff: a duration option takes `-1` (as reverse_proxy's
// `flush_interval -1`) or any negative duration for off; 0 is the default.
func TestCaddyfileOff(t *testing.T) {
	for _, c := range []struct {
		arg  string
		want caddy.Duration
	}{
		{"-1", -1},
		{"-1s", caddy.Duration(-time.Second)},
		{"0", 0},
		{"250ms", caddy.Duration(250 * time.Millisecond)},
	} {
		var h Handler
		d := caddyfile.NewTestDispenser("mcp_gateway {\n upstream http://127.0.0.1:9/mcp\n keepalive_interval " + c.arg + "\n write_timeout " + c.arg + "\n}")
		if err := h.UnmarshalCaddyfile(d); err != nil {
			t.Fatalf("%s: %v", c.arg, err)
		}
		if h.Streams.KeepAliveInterval != c.want || h.Streams.WriteTimeout != c.want {
			t.Errorf("%s: keepalive_interval %d, write_timeout %d, want %d", c.arg, h.Streams.KeepAliveInterval, h.Streams.WriteTimeout, c.want)
		}
	}
	var h Handler
	d := caddyfile.NewTestDispenser("mcp_gateway {\n upstream http://127.0.0.1:9/mcp\n keepalive_interval 5\n}")
	if err := h.UnmarshalCaddyfile(d); err == nil || !strings.Contains(err.Error(), "invalid keepalive_interval") {
		t.Fatalf("keepalive_interval 5 (no unit): %v", err)
	}
}

// TestProvisionEmptyStateKey: state_key {env.X} with X unset says the key
// is empty, maybe an unset variable, and how to make one, rather than
// that it decodes to 0 bytes.
func TestProvisionEmptyStateKey(t *testing.T) {
	t.Setenv("MCP_GATEWAY_TEST_UNSET_KEY", "")
	h := oneUpstream()
	h.Fleet.StateKeys = []string{"{env.MCP_GATEWAY_TEST_UNSET_KEY}"}
	err := provisioned(t, h)
	want := "state_key 1 is empty (an unset environment variable?): make one with `openssl rand -base64 32` and give every instance the same"
	if err == nil || err.Error() != want {
		t.Fatalf("Provision() = %v, want %q", err, want)
	}
	h = oneUpstream()
	h.Fleet.StateKeys = []string{"c2hvcnQ="}
	if err := provisioned(t, h); err == nil || !strings.Contains(err.Error(), "state_key 1: key decodes to 5 bytes, want 32: make one with `openssl rand -base64 32`") {
		t.Fatalf("Provision() = %v, want a short key named with the way to make one", err)
	}
}

// TestProvisionTaskStore: with a state_key, by default (task_store unset,
// or `storage`) the forward bridge keeps its task records in Caddy's
// configured storage (ctx.Storage()), with the default lease and result
// bound; without one the default is off, and `storage` is refused (no
// other process could open the records); `off` leaves
// TaskOptions.Store nil (tasks in memory only); task_lease and
// max_task_result reach TaskOptions; an unknown task_store is a
// provisioning error naming the option.
func TestProvisionTaskStore(t *testing.T) {
	for _, store := range []string{"", "storage"} {
		h := oneUpstream()
		h.Tasks.Store = store
		h.Fleet.StateKeys = []string{testStateKey}
		if err := provisioned(t, h); err != nil {
			t.Fatal(err)
		}
		if h.Tasks.Store != "storage" {
			t.Errorf("task_store %q: defaulted to %q, want storage", store, h.Tasks.Store)
		}
		if h.taskStorage == nil || h.bridgeOpts.Tasks.Store == nil {
			t.Fatalf("task_store %q: no storage (handler %v, bridge options %v), want Caddy's", store, h.taskStorage, h.bridgeOpts.Tasks.Store)
		}
		if h.bridgeOpts.Tasks.Store != forward.Storage(caddy.ActiveContext().Storage()) {
			t.Errorf("task_store %q: the bridge stores in %T, not Caddy's configured storage", store, h.bridgeOpts.Tasks.Store)
		}
		if time.Duration(h.Tasks.Lease) != 15*time.Second || h.bridgeOpts.Tasks.Lease != 15*time.Second {
			t.Errorf("task_lease: got %v (bridge %v), want the documented default 15s", time.Duration(h.Tasks.Lease), h.bridgeOpts.Tasks.Lease)
		}
		if h.Tasks.MaxResult != 4<<20 || h.bridgeOpts.Tasks.MaxResult != 4<<20 {
			t.Errorf("max_task_result: got %d (bridge %d), want the documented default 4194304", h.Tasks.MaxResult, h.bridgeOpts.Tasks.MaxResult)
		}
		if err := h.Validate(); err != nil {
			t.Fatalf("task_store %q does not validate: %v", store, err)
		}
	}

	h := oneUpstream()
	if err := provisioned(t, h); err != nil || h.Tasks.Store != "off" || h.bridgeOpts.Tasks.Store != nil {
		t.Fatalf("no state_key: task_store %q, store %v (%v), want off", h.Tasks.Store, h.bridgeOpts.Tasks.Store, err)
	}
	h = oneUpstream()
	h.Tasks.Store = "storage"
	if err := provisioned(t, h); err == nil || !strings.Contains(err.Error(), "task_store storage needs state_key") {
		t.Fatalf("task_store storage without state_key: %v", err)
	}
	h = oneUpstream()
	h.Tasks.Store = "off"
	h.Tasks.Lease = caddy.Duration(time.Minute)
	h.Tasks.MaxResult = 1 << 20
	if err := provisioned(t, h); err != nil {
		t.Fatal(err)
	}
	if h.taskStorage != nil || h.bridgeOpts.Tasks.Store != nil {
		t.Fatalf("task_store off: storage %v (bridge options %v), want none: tasks in memory only", h.taskStorage, h.bridgeOpts.Tasks.Store)
	}
	if h.Tasks.Store != "off" || h.bridgeOpts.Tasks.Lease != time.Minute || h.bridgeOpts.Tasks.MaxResult != 1<<20 {
		t.Errorf("task_store %q, bridge lease %v, max result %d: want off, 1m, 1048576", h.Tasks.Store, h.bridgeOpts.Tasks.Lease, h.bridgeOpts.Tasks.MaxResult)
	}
	if err := h.Validate(); err != nil {
		t.Fatalf("task_store off does not validate: %v", err)
	}

	h = oneUpstream()
	h.Tasks.Store = "redis"
	want := `task_store: unknown value "redis" (want storage or off)`
	if err := provisioned(t, h); err == nil || err.Error() != want {
		t.Fatalf("Provision() = %v, want %q", err, want)
	}
}

// testStateKey is a valid state_key (32 bytes, base64).
const testStateKey = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="
