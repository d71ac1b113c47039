package tests

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/tidwall/gjson"
)

// terminate sends SIGTERM to the gateway (a graceful stop, as a process
// manager or a rolling deploy does).
func (g *gateway) terminate(t *testing.T) {
	t.Helper()
	if err := syscall.Kill(g.cmd.Process.Pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
}

// awaitExit waits until the gateway's process has exited.
func (g *gateway) awaitExit(t *testing.T) {
	t.Helper()
	waitForWithin(t, notHang, "caddy to exit", func() bool {
		select {
		case <-g.done:
			return true
		default:
			return false
		}
	})
}

// wrongCauses are the messages a stopping instance must not answer with:
// they name a cause that is not the one (the upstream is fine, the client
// is connected).
var wrongCauses = []string{"upstream MCP server unavailable", "client disconnected", "ended the call without a result"}

// checkStopAnswer fails unless what names the stop as the cause, and none
// of wrongCauses.
func checkStopAnswer(t *testing.T, what, answer string) {
	t.Helper()
	for _, wrong := range wrongCauses {
		if strings.Contains(answer, wrong) {
			t.Fatalf("%s: %q names a wrong cause (%q)", what, answer, wrong)
		}
	}
	if !strings.Contains(answer, "stopping") {
		t.Fatalf("%s: %q does not say the instance is stopping", what, answer)
	}
}

// TestStopGraceful: SIGTERM with three calls in progress, in front of a
// legacy server (the go-sdk; failingLegacy reports how each tool handler
// ended). Every upstream handler is cancelled (notifications/cancelled:
// a legacy server does not take a dropped connection for one) before the
// process exits; each client is told the instance is stopping, not that
// the upstream failed or that it left; and a request arriving during the
// stop (shutdown_delay keeps the listener open, as it does behind a
// balancer that needs time to notice), a POST or a GET, gets 503 with
// Retry-After.
func TestStopGraceful(t *testing.T) {
	t.Parallel()
	up := newFailingLegacy(t)
	g := startGatewayWith(t, "\tshutdown_delay 2s", "", up.block())
	streams := make([]<-chan sseMsg, 3)
	for i := range streams {
		streams[i] = readSSE(modernCall(t, g.URL, i+1, "hold", map[string]any{}, nil).Body)
		nextData(t, streams[i]) // the tool is running upstream
	}
	g.terminate(t)

	// A new request: served until the stop begins, refused from then on.
	var refused *http.Response
	waitFor(t, "a new request refused while stopping", func() bool {
		resp, err := tryPost(g.URL, modernHeaders(modernVersion, "tools/list", ""),
			rpcBody(t, 9, "tools/list", map[string]any{"_meta": meta(modernVersion)}))
		if err != nil {
			t.Fatalf("new request during the stop: %v", err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		switch resp.StatusCode {
		case http.StatusOK:
			return false
		case http.StatusServiceUnavailable:
			refused = resp
			checkStopAnswer(t, "new request", string(body))
			return true
		}
		t.Fatalf("new request during the stop: %d %s", resp.StatusCode, body)
		return false
	})
	if refused.Header.Get("Retry-After") == "" {
		t.Fatal("503 while stopping without Retry-After")
	}
	// A legacy client's GET stream, reopened here: refused before its
	// session is looked at.
	get := send(t, http.MethodGet, g.URL, map[string]string{"Mcp-Session-Id": "any"}, "")
	body, _ := io.ReadAll(get.Body)
	if get.StatusCode != http.StatusServiceUnavailable || get.Header.Get("Retry-After") == "" {
		t.Fatalf("GET while stopping: %d %s, want 503 with Retry-After", get.StatusCode, body)
	}
	checkStopAnswer(t, "GET", string(body))

	for i, events := range streams {
		final := awaitResponse(t, events, i+1)
		checkStopAnswer(t, "call in progress", final)
		if !strings.Contains(final, `"code":-32603`) {
			t.Fatalf("call in progress ended with %q, want a -32603 error", final)
		}
	}
	for range streams {
		if got := wait(t, up.ended, notHang, "end of a tool handler"); got != "hold: cancelled" {
			t.Fatalf("a tool handler %s, want it cancelled", got)
		}
	}
	g.awaitExit(t)
	if log := g.Log(); strings.Contains(log, "upstream unavailable") || strings.Contains(log, `"upstream failed"`) {
		t.Fatalf("the stop was logged as an upstream failure:\n%s", log)
	}
}

// TestRefusalUpstreamDown: with max_parked_per_principal 2, a principal's
// two calls park holding no stream (the upstream, the go-sdk, holds their
// sessions), then the upstream goes down. The principal's next call is
// refused 503, naming the upstream: whether the parked
// calls are over (finished on another instance) cannot be checked while
// the upstream is unreachable, and the real cause is the upstream, not
// 429 max_parked_per_principal.
func TestRefusalUpstreamDown(t *testing.T) {
	t.Parallel()
	up := newFailingLegacy(t)
	g := startGateway(t, "\t\tupstream "+up.url+" {\n\t\t\tera legacy\n\t\t}\n\t\tmax_parked_per_principal 2\n\t\tstate_key "+testKey(0x38))
	who := map[string]string{"Authorization": "Bearer alice"}
	for i := range 2 {
		parseInputRequired(t, elicitingCall(t, g.URL, i+1, "ask", map[string]any{}, nil, who))
	}
	up.kill()
	x := elicitingCall(t, g.URL, 3, "ask", map[string]any{}, nil, who)
	if x.Status != http.StatusServiceUnavailable || x.Resp == nil || x.Resp.Error == nil ||
		!strings.Contains(x.Resp.Error.Message, "upstream MCP server unavailable") {
		t.Fatalf("a new call with the upstream down: %s, want 503 upstream MCP server unavailable", x)
	}
}

// silentInitialize is a legacy upstream (a fixture: no real server can be
// told to hold its answer) that never answers initialize: it holds each
// one until the gateway gives up on it, and reports it on opened.
func silentInitialize(t *testing.T) (url string, opened <-chan struct{}) {
	t.Helper()
	ch := make(chan struct{}, 4)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if gjson.GetBytes(body, "method").String() == "initialize" {
			ch <- struct{}{}
			<-r.Context().Done()
			return
		}
		w.WriteHeader(http.StatusNotFound)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String() + "/mcp", ch
}

// TestClientCancelNotUpstreamFailure: a client that cancels its
// subscriptions/listen while the gateway opens its upstream session is
// counted as cancelled, not as a request that failed (outcome error, a
// 502), and nothing logs an upstream failure: the upstream did nothing
// wrong.
func TestClientCancelNotUpstreamFailure(t *testing.T) {
	t.Parallel()
	up, opened := silentInitialize(t)
	g := startGateway(t, "\t\tupstream "+up+" {\n\t\t\tera legacy\n\t\t}")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		resp, err := tryPostContext(ctx, g.URL, modernHeaders(modernVersion, "subscriptions/listen", ""),
			rpcBody(t, 1, "subscriptions/listen", map[string]any{"_meta": meta(modernVersion),
				"notifications": map[string]any{"toolsListChanged": true}}))
		if err == nil {
			resp.Body.Close()
		}
	}()
	wait(t, signalled(opened), notHang, "the upstream session opening")
	cancel()
	<-ended
	const series = `caddy_mcp_gateway_requests_total{cell="modern-legacy",method="subscriptions/listen",outcome="%s"}`
	waitMetrics(t, g, map[string]float64{strings.Replace(series, "%s", "cancelled", 1): 1})
	if v := metricValue(scrape(t, g), strings.Replace(series, "%s", "error", 1)); v > 0 {
		t.Fatalf("the client's cancel was counted as an error (%v)", v)
	}
	if log := g.Log(); strings.Contains(log, `"upstream failed"`) || strings.Contains(log, "upstream unavailable") {
		t.Fatalf("the client's cancel was logged as an upstream failure:\n%s", log)
	}
}

// signalled turns a channel of events into one of strings, for wait.
func signalled(ch <-chan struct{}) <-chan string {
	out := make(chan string, 1)
	go func() {
		<-ch
		out <- "signalled"
	}()
	return out
}

// TestStopParkedRetry: a call parked holding its stream (resume off) when
// its instance stops gracefully is lost with it; the retry, on the same
// instance restarted (same instance_id, as in a rolling restart), gets 502
// "start the call again", as it does after a crash, not 400 -32602 (which
// tells the client its requestState was bad).
func TestStopParkedRetry(t *testing.T) {
	t.Parallel()
	up := newFailingLegacy(t)
	block := up.block() + "\n\t\tinstance_id gw-stop\n\t\tstate_key " + testKey(0x39)
	g := startGateway(t, block)
	ir := parseInputRequired(t, elicitingCall(t, g.URL, 1, "ask", map[string]any{}, nil, nil))
	g.terminate(t)
	g.awaitExit(t)
	again := startGatewayOn(t, g.Port, block)
	x := elicitingCall(t, again.URL, 2, "ask", map[string]any{},
		map[string]any{"requestState": ir.RequestState, "inputResponses": map[string]any{"elicitation-1": acceptAnswer}}, nil)
	if x.Status != http.StatusBadGateway || x.Resp == nil || x.Resp.Error == nil ||
		!strings.Contains(x.Resp.Error.Message, "start the call again") {
		t.Fatalf("retry after a graceful stop: %s, want 502 start the call again", x)
	}
}

// TestStopByReload: a reload whose configuration has no mcp_gateway left
// is a graceful stop of the gateway: the call in progress is cancelled
// upstream and its client told the instance is stopping, where the old
// handler's cleanup used to drop the upstream request unannounced (the
// go-sdk's tool went on) and the client got 502.
func TestStopByReload(t *testing.T) {
	t.Parallel()
	up := newFailingLegacy(t)
	g := startGateway(t, up.block())
	events := readSSE(modernCall(t, g.URL, 1, "hold", map[string]any{}, nil).Body)
	nextData(t, events) // the tool is running upstream
	without := fmt.Sprintf("{\n\tadmin %s\n\tgrace_period 10s\n\tpersist_config off\n}\n\n:%d {\n\tbind 127.0.0.1\n\trespond 404\n}\n", g.AdminAddr, g.Port)
	if err := os.WriteFile(g.config, []byte(without), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(caddyBinary(t), "reload", "--config", g.config, "--adapter", "caddyfile", "--address", g.AdminAddr, "--force").CombinedOutput(); err != nil {
		t.Fatalf("caddy reload: %v\n%s", err, out)
	}
	final := awaitResponse(t, events, 1)
	checkStopAnswer(t, "call in progress", final)
	if got := wait(t, up.ended, notHang, "end of the tool handler"); got != "hold: cancelled" {
		t.Fatalf("the tool handler %s, want it cancelled", got)
	}
}

// TestStopMidResume: a call parked holding no stream (resume on, the
// go-sdk's event store) is resumed on instance B; B is stopped (SIGTERM)
// after it sent the answers upstream and while it reopens the call's
// stream. B tells the client it is stopping (503), not that the upstream
// is unavailable, and leaves the upstream session alone: the same retry,
// sent again to A, resumes the call and gets the tool's result, where it
// got "the upstream no longer knows the call" once B had ended the
// session.
func TestStopMidResume(t *testing.T) {
	t.Parallel()
	up := newFailingLegacy(t)
	fleet := startFleetOf(t, 2, "\t\tupstream "+up.url+" {\n\t\t\tera legacy\n\t\t}\n\t\tresume_linger -1", "advertise")
	ir := parseInputRequired(t, elicitingCall(t, fleet[0].URL, 1, "ask", map[string]any{}, nil, nil))
	retry := map[string]any{"requestState": ir.RequestState, "inputResponses": map[string]any{"elicitation-1": acceptAnswer}}
	up.holdResume.Store(true)
	stopped := make(chan rpcExchange, 1)
	go func() { stopped <- elicitingCall(t, fleet[1].URL, 2, "ask", map[string]any{}, retry, nil) }()
	wait(t, signalled(up.resumeHeld), notHang, "instance B reopening the call's stream")
	fleet[1].terminate(t)
	x := <-stopped
	if x.Resp == nil || x.Resp.Error == nil {
		t.Fatalf("the retry on the stopping instance: %s, want an error", x)
	}
	checkStopAnswer(t, "the retry on the stopping instance", x.Resp.Error.Message)
	if got := wait(t, up.ended, notHang, "end of the tool handler"); got != "ask: accept" {
		t.Fatalf("the tool %s, want it answered", got)
	}
	again := elicitingCall(t, fleet[0].URL, 3, "ask", map[string]any{}, retry, nil)
	if again.Resp == nil || again.Resp.Error != nil || !strings.Contains(string(again.Resp.Result), "answer:") {
		t.Fatalf("the retry sent again to instance A: %s, want the tool's result", again)
	}
}

// TestStopRESTRefused: the REST face refuses a new call while its instance
// stops, as the MCP endpoint does — 503 with Retry-After, saying so — and
// records nothing (the call is free to start elsewhere).
func TestStopRESTRefused(t *testing.T) {
	t.Parallel()
	up := restLegacyServer(t, nil)
	block := "\t\tupstream " + up + " {\n\t\t\tera legacy\n\t\t}\n\t\trest /api\n\t\tstate_key " + testKey(fleetKeyByte)
	site := "\troute /api/* {\n\t\tmcp_gateway {\n" + block + "\n\t\t}\n\t}"
	g := launchGateway(t, freePort(t), "\tshutdown_delay 2s", site, block)
	call := fmt.Sprintf("http://127.0.0.1:%d/api/tools/hello/calls/", g.Port)
	alice := map[string]string{"Authorization": "Bearer alice", "Idempotency-Key": "k1"}
	wantCall(t, restDo(t, http.MethodPut, call+"c1", alice, `{"arguments":{"name":"Ada"}}`), http.StatusCreated, "success")
	g.terminate(t)
	var refused restResp
	waitFor(t, "a REST call refused while stopping", func() bool {
		refused = restDo(t, http.MethodPut, call+"c2", alice, `{"arguments":{"name":"Bob"}}`)
		return refused.Status != http.StatusCreated
	})
	if refused.Status != http.StatusServiceUnavailable || refused.Header.Get("Retry-After") == "" {
		t.Fatalf("a REST call while stopping: %s, want 503 with Retry-After", refused)
	}
	checkStopAnswer(t, "REST call", string(refused.Body))
	g.awaitExit(t)
}
