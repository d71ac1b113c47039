package tests

// Health parity with reverse_proxy: passive health with
// max_fails, fail_duration, unhealthy_status and unhealthy_latency; active
// checks with health_passes and health_fails thresholds; era probes off the
// request path.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// faultyLegacy is a hostile fixture written for the health tests: a real
// go-sdk legacy server (as newInProcessLegacy's: its tool `whoami` names it)
// behind a handler that misbehaves on demand. With status set it answers
// every `tools/call` with that HTTP status and a JSON-RPC error; with delay
// set it holds every `tools/call` that long before the server sees it (its
// response headers come that much later); with hangProbes it never answers
// the gateway's era probes and health checks (requests whose clientInfo is
// the gateway's `probe`) until the test ends; with gated it announces each
// probe `initialize` on probes and answers it as the test says on
// verdicts (false: HTTP 500, not JSON-RPC). It records every
// Mcp-Session-Id it receives in sessions.
type faultyLegacy struct {
	*inProcessLegacy
	status     atomic.Int32
	delay      atomic.Int64 // nanoseconds
	hangProbes atomic.Bool
	hanging    atomic.Int32 // probe requests held now
	gated      atomic.Bool
	probes     chan struct{}
	verdicts   chan bool
	done       chan struct{} // closed when the test ends: held requests end
	sessions   sync.Map      // Mcp-Session-Id values received
}

func newFaultyLegacy(t *testing.T, name string) *faultyLegacy {
	t.Helper()
	server := mcp.NewServer(&mcp.Implementation{Name: name, Version: "1"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "whoami", Description: "Names the server."},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: name}}}, nil, nil
		})
	inner := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
	f := &faultyLegacy{inProcessLegacy: &inProcessLegacy{addr: fmt.Sprintf("127.0.0.1:%d", freePort(t)), server: server},
		probes: make(chan struct{}, 64), verdicts: make(chan bool), done: make(chan struct{})}
	f.handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if sid := r.Header.Get("Mcp-Session-Id"); sid != "" {
			f.sessions.Store(sid, true)
		}
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		probe := bytes.Contains(body, []byte(`"version":"probe"`))
		switch {
		case probe && f.hangProbes.Load():
			f.hanging.Add(1)
			defer f.hanging.Add(-1)
			select {
			case <-f.done:
			case <-r.Context().Done():
			}
			return
		case probe && f.gated.Load() && bytes.Contains(body, []byte(`"method":"initialize"`)):
			f.probes <- struct{}{}
			var pass bool
			select {
			case pass = <-f.verdicts:
			case <-f.done:
			case <-r.Context().Done():
			}
			if !pass {
				http.Error(w, "failing on purpose", http.StatusInternalServerError)
				return
			}
		case bytes.Contains(body, []byte(`"method":"tools/call"`)):
			if d := time.Duration(f.delay.Load()); d > 0 {
				select {
				case <-time.After(d):
				case <-r.Context().Done():
					return
				}
			}
			if s := int(f.status.Load()); s != 0 {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(s)
				_, _ = fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32603,"message":"failing on purpose"}}`, idOf(body))
				return
			}
		}
		inner.ServeHTTP(w, r)
	})
	f.start(t)
	t.Cleanup(f.stop)
	t.Cleanup(func() { close(f.done) })
	return f
}

// idOf is the raw JSON-RPC id of body ("null" if none).
func idOf(body []byte) string {
	var m struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(body, &m) != nil || m.ID == nil {
		return "null"
	}
	return string(m.ID)
}

// tryWhoami calls `whoami` on cs within 10s.
func tryWhoami(cs *mcp.ClientSession) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "whoami", Arguments: map[string]any{}})
	if err != nil {
		return "", err
	}
	if res.IsError {
		return "", fmt.Errorf("tool error: %s", toolText(res))
	}
	return toolText(res), nil
}

// newSessionOn opens a legacy session through the gateway and says which
// upstream it landed on (the server name its initialize answered with).
func newSessionOn(t *testing.T, g *gateway) string {
	t.Helper()
	cs := connectGo(t, g.URL, "2025-11-25", nil)
	defer cs.Close()
	return cs.InitializeResult().ServerInfo.Name
}

// failOnce opens a session, which must land on want, and makes one call
// on it that fails.
func failOnce(t *testing.T, g *gateway, want string) {
	t.Helper()
	cs := connectGo(t, g.URL, "2025-11-25", nil)
	defer cs.Close()
	if got := cs.InitializeResult().ServerInfo.Name; got != want {
		t.Fatalf("the session went to %q, want %s", got, want)
	}
	if got, err := tryWhoami(cs); err == nil {
		t.Fatalf("a call on %s succeeded (%q); want it to fail", want, got)
	}
}

// awaitBack opens sessions until one lands on want again, for at most 20s.
func awaitBack(t *testing.T, g *gateway, want string) {
	t.Helper()
	waitForWithin(t, 20*time.Second, "a new session to reach "+want+" again", func() bool { return newSessionOn(t, g) == want })
}

// passiveBlock is a gateway with upstreams a then b (both legacy, `first`
// policy: a while it is healthy) and the given passive-health options.
func passiveBlock(a, b *faultyLegacy, opts string) string {
	return fmt.Sprintf("\t\tupstream %s {\n\t\t\tera legacy\n\t\t}\n\t\tupstream %s {\n\t\t\tera legacy\n\t\t}\n"+
		"\t\tlb_policy first\n%s", a.url(), b.url(), opts)
}

// TestPassiveMaxFailsAndStatus: answers with an `unhealthy_status` count as
// failures (a status not listed does not); an upstream is skipped only
// once `max_fails` are counted within `fail_duration`, then for
// `fail_duration`, and then takes new sessions again.
func TestPassiveMaxFailsAndStatus(t *testing.T) {
	t.Parallel()
	a, b := newFaultyLegacy(t, "a"), newFaultyLegacy(t, "b")
	g := startGateway(t, passiveBlock(a, b, "\t\tmax_fails 2\n\t\tfail_duration 5s\n\t\tunhealthy_status 503 429"))
	if got := newSessionOn(t, g); got != "a" {
		t.Fatalf("first session on %q, want a (policy first)", got)
	}

	a.status.Store(500) // not listed: no failure counted
	failOnce(t, g, "a")
	failOnce(t, g, "a")
	if got := newSessionOn(t, g); got != "a" {
		t.Fatalf("after two 500s (not an unhealthy_status) a new session went to %q, want a", got)
	}

	a.status.Store(503)
	failOnce(t, g, "a")
	if got := newSessionOn(t, g); got != "a" {
		t.Fatalf("after one 503 (max_fails 2) a new session went to %q, want a", got)
	}
	failOnce(t, g, "a") // the second counted failure
	for i := range 3 {
		if got := newSessionOn(t, g); got != "b" {
			t.Fatalf("session %d after a reached max_fails went to %q, want b", i, got)
		}
	}
	a.status.Store(0)
	awaitBack(t, g, "a") // after fail_duration
	if !strings.Contains(g.Log(), `"failure":"unhealthy_status"`) {
		t.Fatal("no log line names unhealthy_status as the failure")
	}
}

// TestPassiveUnhealthyLatency: a passed-through answer slower than
// `unhealthy_latency` still reaches the client, and counts as a failure
// of its upstream (max_fails 1: skipped for fail_duration).
func TestPassiveUnhealthyLatency(t *testing.T) {
	// Not in parallel: a fast answer must stay under unhealthy_latency (300ms).
	a, b := newFaultyLegacy(t, "a"), newFaultyLegacy(t, "b")
	// fail_duration 2s (not 5s): the test runs alone (see above) and
	// waits it out in awaitBack.
	g := startGateway(t, passiveBlock(a, b, "\t\tfail_duration 2s\n\t\tunhealthy_latency 300ms"))
	cs := connectGo(t, g.URL, "2025-11-25", nil)
	if got := whoami(t, cs); got != "a" {
		t.Fatalf("first session on %q, want a", got)
	}
	if got := newSessionOn(t, g); got != "a" {
		t.Fatalf("a fast answer counted as a failure: next session on %q, want a", got)
	}
	a.delay.Store(int64(time.Second))
	if got := whoami(t, cs); got != "a" {
		t.Fatalf("the slow answer was %q, want a's", got)
	}
	a.delay.Store(0)
	if got := newSessionOn(t, g); got != "b" {
		t.Fatalf("after a slow answer a new session went to %q, want b", got)
	}
	awaitBack(t, g, "a")
	if !strings.Contains(g.Log(), `"failure":"unhealthy_latency"`) {
		t.Fatal("no log line names unhealthy_latency as the failure")
	}
}

// TestActiveHealthThresholds: an upstream is marked down only after
// `health_fails` failed checks in a row, and taken back only after
// `health_passes` passing ones in a row. The fixture holds each check
// until the test gives its verdict, so the test steps through the checks
// one by one: when the next check arrives, the last verdict is recorded.
func TestActiveHealthThresholds(t *testing.T) {
	t.Parallel()
	f := newFaultyLegacy(t, "f")
	f.gated.Store(true)
	g := startGateway(t, fmt.Sprintf("\t\tupstream %s {\n\t\t\tera legacy\n\t\t}\n"+
		"\t\thealth_interval 50ms\n\t\thealth_timeout 1m\n\t\thealth_fails 3\n\t\thealth_passes 2", f.url()))
	healthy := func() bool {
		var ups []map[string]any
		adminGET(t, g, "/mcp_gateway/upstreams", &ups)
		for _, u := range ups {
			if u["url"] == f.url() {
				return u["healthy"] == true
			}
		}
		t.Fatalf("upstream %s not listed: %v", f.url(), ups)
		return false
	}
	arrive := func() {
		t.Helper()
		select {
		case <-f.probes:
		case <-time.After(notHang):
			t.Fatal("no health check arrived")
		}
	}
	verdict := func(pass bool) {
		t.Helper()
		select {
		case f.verdicts <- pass:
		case <-time.After(notHang):
			t.Fatal("the health check did not take its verdict")
		}
	}
	arrive()
	for i, step := range []struct {
		pass    bool
		healthy bool
	}{
		{false, true}, {false, true}, {false, false}, // health_fails 3
		{true, false}, {true, true}, // health_passes 2
		{false, true}, {true, true}, {false, true}, // not in a row
	} {
		verdict(step.pass)
		arrive() // the verdict is recorded
		if got := healthy(); got != step.healthy {
			t.Fatalf("after check %d (pass=%v) healthy=%v, want %v", i+1, step.pass, got, step.healthy)
		}
	}
}

// TestProbeOffRequestPath: an `auto` upstream whose era probe hangs does
// not hold up a request that another upstream can serve. b (first in
// order, `first` policy) never answers its probes; a answers. A new
// session completes through a while b's probe is still held. On main the
// request probed the upstreams itself, one after the other under a lock,
// and waited 5s for b's probe: more than the request's 4s deadline.
func TestProbeOffRequestPath(t *testing.T) {
	// Not in parallel: the request must complete within 4s while b's probe is held for its 5s.
	a, b := newFaultyLegacy(t, "a"), newFaultyLegacy(t, "b")
	b.hangProbes.Store(true)
	g := startGateway(t, fmt.Sprintf("\t\tupstream %s\n\t\tupstream %s\n\t\tlb_policy first", b.url(), a.url()))

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	resp, err := tryPostContext(ctx, g.URL, nil, legacyInit)
	if err != nil {
		t.Fatalf("initialize while b's probe hangs: %v", err)
	}
	x := readRPC(t, resp, 1)
	if x.Status != http.StatusOK || x.Resp == nil || x.Resp.Error != nil {
		t.Fatalf("initialize while b's probe hangs: %s", x)
	}
	// The request started both probes; on a busy machine b's may reach b
	// only after a's answered and the request went on.
	waitForWithin(t, 2*time.Second, "b's probe held (else the test proves nothing)", func() bool { return b.hanging.Load() > 0 })
	sid := x.Header.Get("Mcp-Session-Id")
	r, err := tryPostContext(ctx, g.URL, legacyHeaders(sid), `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	if err != nil || r.StatusCode != http.StatusAccepted {
		t.Fatalf("notifications/initialized: %v %v", r, err)
	}
	r.Body.Close()
	call := rpcBody(t, 2, "tools/call", map[string]any{"name": "whoami", "arguments": map[string]any{}})
	resp, err = tryPostContext(ctx, g.URL, legacyHeaders(sid), call)
	if err != nil {
		t.Fatalf("whoami: %v", err)
	}
	if got := checkToolResult(t, readRPC(t, resp, 2), 2); got != "a" {
		t.Fatalf("the session is on %q, want a", got)
	}
	if b.hanging.Load() == 0 {
		t.Fatal("b's probe ended before the request completed: the test proves nothing")
	}
}

// healthEventLogged waits (up to notHang) for the debug line Caddy's
// events app writes when the event name is emitted, by mcp_gateway, for
// the upstream url.
func healthEventLogged(t *testing.T, g *gateway, name, url string) {
	t.Helper()
	waitForWithin(t, notHang, "the "+name+" event for "+url+" in the log", func() bool {
		for line := range strings.SplitSeq(g.Log(), "\n") {
			if strings.Contains(line, `"msg":"event"`) && strings.Contains(line, `"name":"`+name+`"`) &&
				strings.Contains(line, `"origin":"http.handlers.mcp_gateway"`) && strings.Contains(line, `"data":{"host":"`+url+`"}`) {
				return true
			}
		}
		return false
	})
}

// TestHealthEvents: when health takes an upstream out of selection or
// back, mcp_gateway emits reverse_proxy's `unhealthy` and `healthy` events
// through Caddy's events app, with the upstream's URL as the data's host:
// the events app's debug log line shows each (a subscribed handler would
// get the same event). Active checks emit both; a passive mark emits
// `unhealthy`.
func TestHealthEvents(t *testing.T) {
	t.Parallel()
	t.Run("active", func(t *testing.T) {
		f := newFaultyLegacy(t, "f")
		f.gated.Store(true)
		g := startGatewayWith(t, "\tdebug", "", fmt.Sprintf("\t\tupstream %s {\n\t\t\tera legacy\n\t\t}\n"+
			"\t\thealth_interval 50ms\n\t\thealth_timeout 1m", f.url()))
		step := func(pass bool) {
			t.Helper()
			select {
			case <-f.probes:
			case <-time.After(notHang):
				t.Fatal("no health check arrived")
			}
			select {
			case f.verdicts <- pass:
			case <-time.After(notHang):
				t.Fatal("the health check did not take its verdict")
			}
		}
		step(false)
		healthEventLogged(t, g, "unhealthy", f.url())
		if strings.Contains(g.Log(), `"name":"healthy"`) {
			t.Fatal("a healthy event before any check passed")
		}
		step(true)
		healthEventLogged(t, g, "healthy", f.url())
	})
	t.Run("passive", func(t *testing.T) {
		a, b := newFaultyLegacy(t, "a"), newFaultyLegacy(t, "b")
		g := startGatewayWith(t, "\tdebug", "", passiveBlock(a, b, "\t\tfail_duration 5s\n\t\tunhealthy_status 503"))
		a.status.Store(503)
		failOnce(t, g, "a")
		healthEventLogged(t, g, "unhealthy", a.url())
		if got := newSessionOn(t, g); got != "b" {
			t.Fatalf("after the unhealthy event a new session went to %q, want b", got)
		}
	})
}
