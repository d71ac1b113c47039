package tests

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// scrape returns the gateway's Prometheus text from the admin /metrics.
func scrape(t *testing.T, g *gateway) string {
	t.Helper()
	resp, err := http.Get("http://" + g.AdminAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %d %v", resp.StatusCode, err)
	}
	return string(b)
}

// metricValue returns the value of one series (name and labels exactly as
// Prometheus renders them, labels sorted), or -1 when it is absent.
func metricValue(text, series string) float64 {
	for _, line := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err == nil {
				return f
			}
		}
	}
	return -1
}

func metricsMatch(text string, want map[string]float64) bool {
	for series, v := range want {
		if metricValue(text, series) != v {
			return false
		}
	}
	return true
}

// checkMetrics fails the test unless every series has the wanted value.
func checkMetrics(t *testing.T, text string, want map[string]float64) {
	t.Helper()
	for series, v := range want {
		if got := metricValue(text, series); got != v {
			t.Errorf("%s = %v, want %v", series, got, v)
		}
	}
	if t.Failed() {
		var ours []string
		for _, line := range strings.Split(text, "\n") {
			if strings.HasPrefix(line, "caddy_mcp_gateway_") {
				ours = append(ours, line)
			}
		}
		t.Fatalf("caddy_mcp_gateway_* series:\n%s", strings.Join(ours, "\n"))
	}
}

// logLines returns Caddy's JSON log lines whose "msg" is msg.
func logLines(g *gateway, msg string) []map[string]any {
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(g.Log()))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil && m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

// accessLogSite appends the gateway's placeholders to JSON access logs.
const accessLogSite = `	log {
		output stderr
		format json
	}
	log_append mcp_era {http.mcp_gateway.era}
	log_append mcp_cell {http.mcp_gateway.cell}
	log_append mcp_method {http.mcp_gateway.method}
	log_append mcp_upstream {http.mcp_gateway.upstream}
	log_append mcp_round {http.mcp_gateway.round}
	log_append mcp_outcome {http.mcp_gateway.outcome}`

// TestMetricsLogsPlaceholders: one MRTR round through the forward bridge in
// front of a go-sdk legacy server, then the retry. While the call is parked,
// /mcp_gateway/parked lists it and /metrics shows it; once it ends it
// leaves both, and the call's series, its one info log line and the access
// log's placeholders say how it went. Debug logging is on, and neither the
// bearer token nor the requestState appears anywhere in the log until
// log_unsafe_details is set.
func TestMetricsLogsPlaceholders(t *testing.T) {
	t.Parallel()
	rs := newRecordingServer(t)
	block := "\t\tupstream " + rs.url
	g := startGatewayWith(t, "\tdebug", accessLogSite, block)
	auth := map[string]string{"Authorization": "Bearer secret-token"}
	up := `{upstream="` + rs.url + `"}`
	const fwd = `cell="modern-legacy",method="tools/call"`

	ir := parseInputRequired(t, askCall(t, g.URL, 1, "metrics", nil, auth))
	var parked []map[string]any
	adminGET(t, g, "/mcp_gateway/parked", &parked)
	if len(parked) != 1 || parked[0]["name"] != "ask" || parked[0]["round"] != float64(1) {
		t.Fatalf("parked = %v, want the ask call in round 1", parked)
	}
	waitMetrics(t, g, map[string]float64{
		"caddy_mcp_gateway_parked_calls":                                         1,
		"caddy_mcp_gateway_requests_total{" + fwd + `,outcome="input_required"}`: 1,
		"caddy_mcp_gateway_upstream_sessions" + up:                               1,
		"caddy_mcp_gateway_upstream_session_initializations_total" + up:          1,
		"caddy_mcp_gateway_upstream_healthy" + up:                                1,
		"caddy_mcp_gateway_bridged_calls_total{" + fwd + `,outcome="complete"}`:  -1, // not ended yet
	})

	retry := map[string]any{"inputResponses": map[string]any{"elicitation-1": acceptAnswer}, "requestState": ir.RequestState}
	checkToolResult(t, askCall(t, g.URL, 2, "metrics", retry, auth), 2)
	adminGET(t, g, "/mcp_gateway/parked", &parked)
	if len(parked) != 0 {
		t.Fatalf("parked after the call = %v", parked)
	}
	waitMetrics(t, g, map[string]float64{
		"caddy_mcp_gateway_parked_calls":                                             0,
		`caddy_mcp_gateway_parked_calls_ended_total{reason="answered"}`:              1,
		"caddy_mcp_gateway_requests_total{" + fwd + `,outcome="input_required"}`:     1,
		"caddy_mcp_gateway_requests_total{" + fwd + `,outcome="complete"}`:           1,
		"caddy_mcp_gateway_bridged_calls_total{" + fwd + `,outcome="complete"}`:      1,
		`caddy_mcp_gateway_call_rounds_count{cell="modern-legacy"}`:                  1,
		`caddy_mcp_gateway_call_rounds_sum{cell="modern-legacy"}`:                    1,
		`caddy_mcp_gateway_call_rounds_bucket{cell="modern-legacy",le="0"}`:          0,
		`caddy_mcp_gateway_call_rounds_bucket{cell="modern-legacy",le="1"}`:          1,
		`caddy_mcp_gateway_translation_overhead_seconds_count{cell="modern-legacy"}`: 1,
		"caddy_mcp_gateway_upstream_sessions" + up:                                   1, // idle, kept for reuse
	})
	if v := metricValue(scrape(t, g), `caddy_mcp_gateway_translation_overhead_seconds_sum{cell="modern-legacy"}`); v <= 0 || v > 1 {
		t.Errorf("translation overhead of the call = %vs, want a positive figure under a second", v)
	}

	calls := waitLogLines(t, g, "bridged call", 1)
	if len(calls) != 1 {
		t.Fatalf("%d bridged call lines, want 1: %v", len(calls), calls)
	}
	c := calls[0]
	if c["logger"] != "http.handlers.mcp_gateway" || c["level"] != "info" || c["method"] != "tools/call" ||
		c["cell"] != "modern-legacy" || c["rounds"] != float64(1) || c["outcome"] != "complete" || c["upstream"] != rs.url {
		t.Fatalf("bridged call line = %v", c)
	}
	if d, ok := c["duration"].(float64); !ok || d <= 0 {
		t.Fatalf("bridged call duration = %v, want seconds > 0", c["duration"])
	}
	if len(waitLogLines(t, g, "mcp request", 2)) < 2 {
		t.Fatal("no debug line per request")
	}

	access := waitLogLines(t, g, "handled request", 2)
	var got []string
	for _, a := range access {
		got = append(got, fmt.Sprintf("%v %v %v %v", a["mcp_cell"], a["mcp_method"], a["mcp_round"], a["mcp_outcome"]))
	}
	want := []string{"modern-legacy tools/call 0 input_required", "modern-legacy tools/call 1 complete"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("access log placeholders = %q, want %q", got, want)
	}

	log := g.Log()
	for _, secret := range []string{"secret-token", ir.RequestState, "inputResponses"} {
		if strings.Contains(log, secret) {
			t.Fatalf("the log carries %q:\n%s", secret, log)
		}
	}

	// The unsafe option puts them in the debug lines. The reload gives the
	// new configuration a registry of its own: counters start again, gauges
	// read the live state.
	g.reload(t, block+"\n\t\tlog_unsafe_details")
	parseInputRequired(t, askCall(t, g.URL, 3, "unsafe", nil, auth))
	waitMetrics(t, g, map[string]float64{
		"caddy_mcp_gateway_parked_calls":                                         1,
		"caddy_mcp_gateway_requests_total{" + fwd + `,outcome="input_required"}`: 1,
		"caddy_mcp_gateway_requests_total{" + fwd + `,outcome="complete"}`:       -1,
		"caddy_mcp_gateway_upstream_session_initializations_total" + up:          1, // the idle session, reused
	})
	waitFor(t, "log_unsafe_details to log the principal", func() bool {
		return strings.Contains(g.Log(), `"unsafe_principal":"Bearer secret-token"`)
	})
}

// TestActiveHealthChecks: with health_interval, an upstream that stops is
// marked down by the checks alone (no client request touches it), new
// sessions avoid it without any client seeing an error, and when it comes
// back the checks take it back at once, although fail_duration would keep a
// passively failed upstream out for an hour. Legacy upstreams are checked
// with initialize and ping and keep no probe session (a, era auto, is probed
// first); a modern one (go-sdk, stateless) is checked with server/discover.
func TestActiveHealthChecks(t *testing.T) {
	t.Parallel()
	a, b := newInProcessLegacy(t, "a"), newInProcessLegacy(t, "b")
	m := newInProcess(t, "m", &mcp.StreamableHTTPOptions{Stateless: true})
	g := startGateway(t, fmt.Sprintf("\t\tupstream %s\n\t\tupstream %s {\n\t\t\tera legacy\n\t\t}\n"+
		"\t\tupstream %s {\n\t\t\tera modern\n\t\t}\n"+
		"\t\tlb_policy round_robin\n\t\tfail_duration 1h\n\t\thealth_interval 200ms\n\t\thealth_timeout 2s", a.url(), b.url(), m.url()))

	eras := map[string]string{a.url(): "legacy", b.url(): "legacy", m.url(): "modern"}
	healthOf := func(url string) bool {
		var ups []map[string]any
		adminGET(t, g, "/mcp_gateway/upstreams", &ups)
		for _, u := range ups {
			if u["url"] == url {
				if u["era"] != eras[url] {
					t.Fatalf("/mcp_gateway/upstreams says %v, want era %s", u, eras[url])
				}
				return u["healthy"] == true
			}
		}
		t.Fatalf("upstream %s not listed: %v", url, ups)
		return false
	}
	waitHealth := func(url string, want bool) {
		t.Helper()
		waitForWithin(t, 15*time.Second, fmt.Sprintf("%s healthy=%v", url, want), func() bool { return healthOf(url) == want })
	}

	// Five rounds of checks (one may be under way) leave no session behind.
	waitFor(t, "5 healthy checks of a", func() bool {
		return metricValue(scrape(t, g), `caddy_mcp_gateway_health_checks_total{result="healthy",upstream="`+a.url()+`"}`) >= 5
	})
	if n := sessionsOf(a.server); n > 1 {
		t.Fatalf("%d sessions open on a after its health checks, want at most the one under way", n)
	}

	m.stop()
	waitHealth(m.url(), false)
	m.start(t)
	waitHealth(m.url(), true)

	b.stop()
	waitHealth(b.url(), false)
	text := scrape(t, g)
	if v := metricValue(text, `caddy_mcp_gateway_health_checks_total{result="unhealthy",upstream="`+b.url()+`"}`); v < 1 {
		t.Fatalf("unhealthy checks of b = %v, want at least 1", v)
	}
	if v := metricValue(text, `caddy_mcp_gateway_upstream_healthy{upstream="`+b.url()+`"}`); v != 0 {
		t.Fatalf("upstream_healthy of b = %v, want 0", v)
	}
	for i := range 4 {
		if name := whoami(t, connectGo(t, g.URL, "2025-11-25", nil)); name != "a" {
			t.Fatalf("session %d went to %q while b is down", i, name)
		}
	}

	b.start(t)
	waitHealth(b.url(), true)
	seen := map[string]int{}
	for range 4 {
		seen[whoami(t, connectGo(t, g.URL, "2025-11-25", nil))]++
	}
	if seen["a"] != 2 || seen["b"] != 2 {
		t.Fatalf("after b came back round_robin spread sessions as %v, want 2 and 2", seen)
	}
	if !strings.Contains(g.Log(), "upstream passed its health check") {
		t.Fatal("no log line for b coming back")
	}
}

// sessionsOf counts the sessions open on a go-sdk server.
func sessionsOf(s *mcp.Server) int {
	n := 0
	for range s.Sessions() {
		n++
	}
	return n
}

// TestBasicAuthInFront: the basic_auth setup of docs/configuration.md. Without valid
// credentials Caddy answers 401 and the gateway is not reached; with them,
// a modern request goes through the forward bridge on an upstream session
// of the user (principal {http.auth.user.id}), and the upstream never sees
// the password.
func TestBasicAuthInFront(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var seen []string
	server := mcp.NewServer(&mcp.Implementation{Name: "auth", Version: "1"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "whoami", Description: "Names the server."},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "auth"}}}, nil, nil
		})
	inner := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("Authorization"))
		mu.Unlock()
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	const hash = "$2a$14$tq7zHmbcazkNyRGLzRoi9u7pZ00.TdNlf1.TpXe0RMuTKDmtnf.zW" // change-me
	site := "\tbasic_auth /mcp* {\n\t\talice " + hash + "\n\t}\n\trequest_header /mcp* -Authorization"
	g := startGatewayWith(t, "", site, "\t\tupstream "+ts.URL+"/mcp\n\t\tprincipal {http.auth.user.id}")

	call := func(id int, user, pass string) rpcExchange {
		t.Helper()
		h := modernHeaders(modernVersion, "tools/call", "whoami")
		if user != "" {
			h["Authorization"] = "Basic " + base64Std([]byte(user+":"+pass))
		}
		params := map[string]any{"name": "whoami", "arguments": map[string]any{}, "_meta": meta(modernVersion)}
		return postRPC(t, g.URL, h, rpcBody(t, id, "tools/call", params), id)
	}
	if x := call(1, "", ""); x.Status != http.StatusUnauthorized {
		t.Fatalf("without credentials: %s, want 401", x)
	}
	if x := call(2, "alice", "wrong"); x.Status != http.StatusUnauthorized {
		t.Fatalf("with a wrong password: %s, want 401", x)
	}
	if got := checkToolResult(t, call(3, "alice", "change-me"), 3); got != "auth" {
		t.Fatalf("whoami = %q", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) == 0 {
		t.Fatal("the upstream saw no request")
	}
	for _, a := range seen {
		if a != "" {
			t.Fatalf("the upstream received Authorization %q", a)
		}
	}
}
