package caddymodule

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyevents"
)

// testUpstream is a provisioned upstream whose state no other test shares.
func testUpstream(t *testing.T, url string) *Upstream {
	t.Helper()
	u := &Upstream{URL: url, Era: eraLegacy}
	if err := u.provision(""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = upstreamStates.Delete(url) })
	return u
}

func TestCountFailureMaxFails(t *testing.T) {
	h := &Handler{Health: HealthChecks{Passive: PassiveHealthChecks{MaxFails: 3, FailDuration: caddy.Duration(time.Hour)}}, logger: zap.NewNop()}
	u := testUpstream(t, "http://127.0.0.1:9/count-failure")
	u.state.eras.Store(uint32(speaksLegacy))
	for i := range 2 {
		h.countFailure(u, "test", nil)
		if !u.available(time.Now()) {
			t.Fatalf("unavailable after %d failures, max_fails 3", i+1)
		}
	}
	h.countFailure(u, "test", nil)
	if u.available(time.Now()) {
		t.Fatal("available after 3 failures, max_fails 3")
	}
	if !u.available(time.Now().Add(time.Hour + time.Second)) {
		t.Fatal("still unavailable after fail_duration")
	}
	if len(u.state.failures) != 0 {
		t.Fatalf("%d failures still counted after the upstream was marked down", len(u.state.failures))
	}
}

func TestCountFailureWindow(t *testing.T) {
	h := &Handler{Health: HealthChecks{Passive: PassiveHealthChecks{MaxFails: 2, FailDuration: caddy.Duration(time.Hour)}}, logger: zap.NewNop()}
	u := testUpstream(t, "http://127.0.0.1:9/count-window")
	// A failure older than fail_duration no longer counts.
	u.state.failures = []int64{time.Now().Add(-2 * time.Hour).UnixNano()}
	h.countFailure(u, "test", nil)
	if !u.available(time.Now()) {
		t.Fatal("an expired failure counted towards max_fails")
	}
	h.countFailure(u, "test", nil)
	if u.available(time.Now()) {
		t.Fatal("two failures within fail_duration did not reach max_fails 2")
	}
}

// eventRecorder is an events app handler that records what it gets.
type eventRecorder struct {
	mu  sync.Mutex
	got []string
}

func (r *eventRecorder) Handle(_ context.Context, e caddy.Event) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, e.Name()+" "+e.Data["host"].(string))
	return nil
}

func (r *eventRecorder) events() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

// TestHealthEventsEmitted: a passive mark at max_fails emits `unhealthy`
// to a handler subscribed in Caddy's events app, once: a mark made while
// the upstream is down emits nothing. (tests/health_test.go's
// TestHealthEvents runs the active checker's through Caddy.)
func TestHealthEventsEmitted(t *testing.T) {
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	defer cancel()
	app := new(caddyevents.App)
	if err := app.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	rec := new(eventRecorder)
	if err := app.Subscribe(&caddyevents.Subscription{Events: []string{upstreamHealthy, upstreamUnhealthy}, Handlers: []caddyevents.Handler{rec}}); err != nil {
		t.Fatal(err)
	}
	if err := app.Start(); err != nil {
		t.Fatal(err)
	}
	h := &Handler{Health: HealthChecks{Passive: PassiveHealthChecks{MaxFails: 1, FailDuration: caddy.Duration(time.Hour)}}, logger: zap.NewNop(), events: healthEvents{app: app, ctx: ctx}}
	u := testUpstream(t, "http://127.0.0.1:9/health-events")
	h.countFailure(u, "test", nil)
	h.countFailure(u, "test", nil) // already down: no second event
	if got, want := rec.events(), []string{"unhealthy " + u.URL}; !slices.Equal(got, want) {
		t.Fatalf("events %q, want %q", got, want)
	}
	if u.markDown(time.Now(), time.Minute) {
		t.Fatal("markDown of an upstream already down took it down")
	}
}

func TestParseStatusArg(t *testing.T) {
	for in, want := range map[string]int{"503": 503, "5xx": 5, "4xx": 4, "100": 100, "599": 599} {
		if got, err := parseStatusArg(in); err != nil || got != want {
			t.Errorf("parseStatusArg(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"6xx", "0xx", "99", "600", "5XX", "abc", ""} {
		if _, err := parseStatusArg(in); err == nil {
			t.Errorf("parseStatusArg(%q) accepted", in)
		}
	}
}

// TestNeitherEraError: an upstream answering neither era probe is named
// with the statuses it answered; 404 to both with the hint to check the
// path.
func TestNeitherEraError(t *testing.T) {
	for _, c := range []struct {
		discover, initialize int
		want                 string
	}{
		{404, 404, "(HTTP 404 to both): check the MCP endpoint's path in the upstream URL (such as /mcp)"},
		{500, 500, "(HTTP 500 to both)"},
		{405, 404, "(HTTP 405 to server/discover, 404 to initialize)"},
	} {
		got := neitherEraError(c.discover, c.initialize).Error()
		if got != "the upstream answered neither server/discover nor initialize "+c.want {
			t.Errorf("%d, %d: %q", c.discover, c.initialize, got)
		}
	}
}
