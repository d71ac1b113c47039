package tests

// Traces: with Caddy's tracing directive on and its exporter pointed (by the
// OTEL_* environment) at an OTLP/HTTP receiver built on the OTLP messages
// (support.TraceReceiver: no Collector or Jaeger to build or install in CI),
// the gateway's spans of a bridged call — each round's request, the
// upstream exchanges, the relay to the owner of the call — reach the
// receiver with the MCP attributes, and the owner's spans of a relayed
// retry join the relaying instance's trace.

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/tests/support"
)

// gatewayScope is the instrumentation scope of the gateway's spans.
const gatewayScope = "github.com/caddy-mcp-gateway/caddy-mcp-gateway"

// traceContextTap is a reverse proxy in front of an upstream that keeps the
// trace context headers of every POST it passes on.
type traceContextTap struct {
	url string
	mu  sync.Mutex
	got []http.Header // Traceparent and Tracestate of each POST
}

func newTraceContextTap(t *testing.T, upstream string) *traceContextTap {
	t.Helper()
	target, err := url.Parse(upstream)
	if err != nil {
		t.Fatal(err)
	}
	hr := &traceContextTap{}
	proxy := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) { pr.SetURL(target); pr.Out.URL.Path = target.Path }}
	hr.url = support.Serve(t, fullDuplex(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			hr.mu.Lock()
			hr.got = append(hr.got, http.Header{"Traceparent": r.Header.Values("Traceparent"), "Tracestate": r.Header.Values("Tracestate")})
			hr.mu.Unlock()
		}
		proxy.ServeHTTP(w, r)
	})))
	return hr
}

// headers returns the trace context headers of every POST so far.
func (hr *traceContextTap) headers() []http.Header {
	hr.mu.Lock()
	defer hr.mu.Unlock()
	return append([]http.Header(nil), hr.got...)
}

// startTracedFleet runs n instances of a fleet (form "peer") in front of
// upstream with Caddy's tracing directive on, exporting to rec.
func startTracedFleet(t *testing.T, n int, upstream string, rec *support.TraceReceiver) []*gateway {
	t.Helper()
	ports := make([]int, n)
	for i := range ports {
		ports[i] = freePort(t)
	}
	fleet := make([]*gateway, n)
	for i, port := range ports {
		fleet[i] = startTraced(t, port, fleetBlock(t, upstream, "peer", ports, i), rec)
	}
	return fleet
}

// startTraced runs a gateway on port with block and Caddy's tracing
// directive on, exporting to rec.
func startTraced(t *testing.T, port int, block string, rec *support.TraceReceiver) *gateway {
	t.Helper()
	g := newGateway(t, port, fmt.Sprintf("127.0.0.1:%d", freePort(t)))
	g.site = "\ttracing"
	g.writeConfig(t, block)
	g.run(t, rec.Env()...)
	return g
}

// findSpan returns the first span of rec's that match accepts.
func findSpan(rec *support.TraceReceiver, match func(support.Span) bool) (support.Span, bool) {
	for _, s := range rec.Spans() {
		if match(s) {
			return s, true
		}
	}
	return support.Span{}, false
}

// waitSpan waits for a span match accepts.
func waitSpan(t *testing.T, rec *support.TraceReceiver, what string, match func(support.Span) bool) support.Span {
	t.Helper()
	var s support.Span
	if !poll(notHang, func() (ok bool) { s, ok = findSpan(rec, match); return ok }) {
		for _, s := range rec.Spans() {
			t.Logf("span %s %s trace %s id %s parent %s scope %s %v", s.Kind, s.Name, s.TraceID, s.SpanID, s.ParentSpanID, s.Scope, s.Attrs)
		}
		t.Fatalf("no span %s among %d received", what, len(rec.Spans()))
	}
	return s
}

// checkAttrs reports the attributes of s that differ from want ("" wants
// the attribute absent).
func checkAttrs(t *testing.T, what string, s support.Span, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if got, ok := s.Attrs[k]; got != v || v == "" && ok {
			t.Errorf("%s: attribute %s = %q, want %q", what, k, got, v)
		}
	}
}

// TestTracesForwardBridgeFleet: a modern client's call in front of a legacy
// server, its input_required round answered on another instance. Round 1,
// under the client's own traceparent: the gateway's span of the request,
// with the MCP attributes, and its upstream exchanges (the session's
// initialize, the tools/call) as children, the upstream getting the
// tools/call span's traceparent. Round 2 carries a traceparent that is too
// long (naming round 1's trace) and a huge tracestate: ignored, as W3C Trace
// Context says, never passed upstream; the relaying instance's span, its
// relay span and the owner's spans (the request, the answer sent upstream)
// are one trace, the owner's span of the round linking to round 1's. Last, a legacy client's initialize passed through: its
// span, and the POST's, whose traceparent alone the upstream gets.
func TestTracesForwardBridgeFleet(t *testing.T) {
	t.Parallel()
	rec := support.NewTraceReceiver(t)
	rs := newRecordingServer(t)
	hr := newTraceContextTap(t, rs.url)
	fleet := startTracedFleet(t, 2, "\t\tupstream "+hr.url+" {\n\t\t\tera legacy\n\t\t}", rec)

	const clientTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	first := map[string]string{"Authorization": "Bearer alice", "Traceparent": "00-" + clientTrace + "-00f067aa0ba902b7-01"}
	ir := parseInputRequired(t, askCall(t, fleet[0].URL, 1, "tea", nil, first))

	ours := func(kind, name string) func(support.Span) bool {
		return func(s support.Span) bool { return s.Scope == gatewayScope && s.Kind == kind && s.Name == name }
	}
	round1 := waitSpan(t, rec, "of round 1", func(s support.Span) bool {
		return ours("SPAN_KIND_SERVER", "tools/call ask")(s) && s.Attrs["mcp_gateway.round"] == "0"
	})
	if round1.TraceID != clientTrace {
		t.Errorf("round 1's span is in trace %s, want the client's %s", round1.TraceID, clientTrace)
	}
	checkAttrs(t, "round 1", round1, map[string]string{
		"mcp.method.name": "tools/call", "gen_ai.tool.name": "ask", "gen_ai.operation.name": "execute_tool",
		"jsonrpc.request.id": "1", "mcp.protocol.version": modernVersion, "mcp_gateway.cell": "modern-legacy",
		"mcp_gateway.outcome": "input_required", "error.type": "", "mcp.session.id": "", "mcp_gateway.owner": "",
	})
	var upCall support.Span
	for _, name := range []string{"initialize", "tools/call"} {
		s := waitSpan(t, rec, name+" upstream", func(s support.Span) bool {
			return ours("SPAN_KIND_CLIENT", name)(s) && s.TraceID == clientTrace
		})
		if s.ParentSpanID != round1.SpanID {
			t.Errorf("upstream %s span's parent is %s, want round 1's span %s", name, s.ParentSpanID, round1.SpanID)
		}
		checkAttrs(t, "upstream "+name, s, map[string]string{"mcp.method.name": name, "mcp_gateway.upstream": hr.url})
		upCall = s
	}
	if want := "00-" + clientTrace + "-" + upCall.SpanID + "-01"; !sentTraceparent(hr.headers(), want) {
		t.Errorf("the upstream never got the tools/call span's traceparent %s: %v", want, hr.headers())
	}

	hdr, body := retryRequest(t, 2, "tea", ir)
	hdr["Traceparent"] = "00-" + clientTrace + "-00f067aa0ba902b7-01" + strings.Repeat("-00", 2000)
	huge := "evil=" + strings.Repeat("x", 200) + strings.Repeat(",k=v", 1000)
	hdr["Tracestate"] = huge
	if text := checkToolResult(t, postRPC(t, fleet[1].URL, hdr, body, 2), 2); text != "answer: yes" {
		t.Fatalf("the retry on the other instance: %q", text)
	}
	relaying := waitSpan(t, rec, "of the relaying instance", func(s support.Span) bool {
		return ours("SPAN_KIND_SERVER", "tools/call ask")(s) && s.Attrs["mcp_gateway.owner"] == "gw-0"
	})
	if relaying.TraceID == clientTrace {
		t.Errorf("a malformed traceparent was taken: round 2 is in the client's trace %s", clientTrace)
	}
	trace2 := relaying.TraceID
	relay := waitSpan(t, rec, "relay", func(s support.Span) bool { return ours("SPAN_KIND_CLIENT", "relay")(s) && s.TraceID == trace2 })
	if relay.ParentSpanID != relaying.SpanID {
		t.Errorf("the relay span's parent is %s, want the relaying request's span %s", relay.ParentSpanID, relaying.SpanID)
	}
	checkAttrs(t, "relay", relay, map[string]string{"mcp_gateway.owner": "gw-0"})
	owner := waitSpan(t, rec, "of round 2 on the owner", func(s support.Span) bool {
		return ours("SPAN_KIND_SERVER", "tools/call ask")(s) && s.Attrs["mcp_gateway.round"] == "1"
	})
	if owner.TraceID != trace2 {
		t.Errorf("the owner's span of round 2 is in trace %s, want the relaying instance's %s", owner.TraceID, trace2)
	}
	if !slices.Contains(owner.Links, clientTrace) {
		t.Errorf("the owner's span of round 2 links to traces %q, want round 1's %s", owner.Links, clientTrace)
	}
	checkAttrs(t, "round 2 on the owner", owner, map[string]string{
		"mcp.method.name": "tools/call", "gen_ai.tool.name": "ask", "jsonrpc.request.id": "2",
		"mcp_gateway.cell": "modern-legacy", "mcp_gateway.outcome": "complete", "mcp_gateway.owner": "",
	})
	answer := waitSpan(t, rec, "the answer sent upstream", func(s support.Span) bool {
		return ours("SPAN_KIND_CLIENT", "response")(s) && s.TraceID == trace2
	})
	if answer.ParentSpanID != owner.SpanID {
		t.Errorf("the upstream answer's span's parent is %s, want the owner's span %s", answer.ParentSpanID, owner.SpanID)
	}
	if want := "00-" + trace2 + "-" + answer.SpanID + "-01"; !sentTraceparent(hr.headers(), want) {
		t.Errorf("the upstream never got the answer span's traceparent %s", want)
	}

	// Pass-through (a legacy client's session pinned to the legacy
	// upstream), under a malformed traceparent and the huge tracestate:
	// the upstream gets the POST span's traceparent, and no tracestate.
	resp := post(t, fleet[1].URL, map[string]string{"Traceparent": "00-zz-nonsense", "Tracestate": huge}, legacyInit)
	_, _ = io.Copy(io.Discard, resp.Body) // the whole answer: closed early, the request would be cancelled
	resp.Body.Close()
	pinned := waitSpan(t, rec, "of a pinned initialize", func(s support.Span) bool {
		return ours("SPAN_KIND_SERVER", "initialize")(s) && s.Attrs["mcp_gateway.cell"] == "legacy-legacy"
	})
	checkAttrs(t, "pinned initialize", pinned, map[string]string{
		"mcp.method.name": "initialize", "mcp.protocol.version": "2025-11-25", "jsonrpc.request.id": "1", "mcp_gateway.outcome": "ok",
	})
	exchange := waitSpan(t, rec, "of the pinned POST", func(s support.Span) bool {
		return ours("SPAN_KIND_CLIENT", "POST")(s) && s.ParentSpanID == pinned.SpanID
	})
	checkAttrs(t, "pinned POST", exchange, map[string]string{"mcp_gateway.upstream": hr.url})
	if want := "00-" + pinned.TraceID + "-" + exchange.SpanID + "-01"; !sentTraceparent(hr.headers(), want) {
		t.Errorf("the upstream never got the pass-through POST span's traceparent %s", want)
	}
	for _, h := range hr.headers() {
		if strings.Contains(h.Get("Tracestate"), "evil") || strings.Contains(h.Get("Traceparent"), "-00-00") || strings.Contains(h.Get("Traceparent"), "zz") {
			t.Errorf("the client's ignored trace context reached the upstream: %.80q %.80q", h.Get("Traceparent"), h.Get("Tracestate"))
		}
	}

	// Another principal's call under round 1's very traceparent (a trace
	// already used): taken for correlation only, as W3C Trace Context
	// says. Its span joins that trace, but it is a call of its own: round 0, no link to alice's call, a fresh
	// span's traceparent upstream, and alice's parked state is no more
	// reachable than without it (the call asks its own question).
	mallory := map[string]string{"Authorization": "Bearer mallory", "Traceparent": first["Traceparent"]}
	parseInputRequired(t, askCall(t, fleet[0].URL, 3, "tea", nil, mallory))
	reused := waitSpan(t, rec, "of a call under a used trace", func(s support.Span) bool {
		return ours("SPAN_KIND_SERVER", "tools/call ask")(s) && s.Attrs["jsonrpc.request.id"] == "3"
	})
	if reused.TraceID != clientTrace || reused.ParentSpanID == round1.SpanID || len(reused.Links) != 0 {
		t.Errorf("a call under a used traceparent: trace %s parent %s links %q, want trace %s, under Caddy's span, no link",
			reused.TraceID, reused.ParentSpanID, reused.Links, clientTrace)
	}
	checkAttrs(t, "a call under a used trace", reused, map[string]string{"mcp_gateway.round": "0", "mcp_gateway.outcome": "input_required"})
}

// sentTraceparent reports whether one of the recorded requests carried
// want as its only traceparent.
func sentTraceparent(got []http.Header, want string) bool {
	for _, h := range got {
		if v := h.Values("Traceparent"); len(v) == 1 && v[0] == want {
			return true
		}
	}
	return false
}

// TestTracesResumableAfterInstanceLoss: a call parked without holding in
// front of a resumable upstream, its first round under the client's
// traceparent on an instance that is then killed; another instance (the
// state_key shared, nothing else) serves its later rounds from the sealed
// requestState: their spans link to the first round's, though no instance
// holds anything of the call, and the stream reopened upstream is a span
// of the round that reopened it.
func TestTracesResumableAfterInstanceLoss(t *testing.T) {
	t.Parallel()
	rec := support.NewTraceReceiver(t)
	up := newResumableServer(t)
	block := "\t\tupstream " + up.url + " {\n\t\t\tera legacy\n\t\t}\n\t\tstate_key " + testKey(0x34)
	g0, g1 := startTraced(t, freePort(t), block, rec), startTraced(t, freePort(t), block, rec)
	const clientTrace = "0af7651916cd43dd8448eb211c80319c"
	alice := map[string]string{"Authorization": "Bearer alice", "Traceparent": "00-" + clientTrace + "-b7ad6b7169203331-01"}

	first := parseInputRequired(t, askCall(t, g0.URL, 1, "tea", nil, alice))
	ours := func(round string) func(support.Span) bool {
		return func(s support.Span) bool {
			return s.Scope == gatewayScope && s.Name == "tools/call ask" && s.Attrs["mcp_gateway.round"] == round
		}
	}
	round0 := waitSpan(t, rec, "of round 0", ours("0"))
	g0.kill(t)
	delete(alice, "Traceparent") // later rounds: traces of their own
	second := parseInputRequired(t, askCall(t, g1.URL, 2, "tea", answerWith(t, first, "yes"), alice))
	x := askCall(t, g1.URL, 3, "tea", answerWith(t, second, "sure"), alice)
	if x.Resp == nil || x.Resp.Error != nil || !strings.Contains(string(x.Resp.Result), `"accept:yes,accept:sure"`) {
		t.Fatalf("final: %s", x)
	}
	for _, round := range []string{"1", "2"} {
		s := waitSpan(t, rec, "of round "+round, ours(round))
		if s.TraceID == round0.TraceID {
			t.Errorf("round %s is in round 0's trace, the client having sent no traceparent", round)
		}
		if !slices.Contains(s.Links, round0.TraceID) {
			t.Errorf("round %s's span links to %q, want round 0's trace %s", round, s.Links, round0.TraceID)
		}
		reopened := waitSpan(t, rec, "of the stream reopened in round "+round, func(r support.Span) bool {
			return r.Scope == gatewayScope && r.Name == "resume" && r.TraceID == s.TraceID
		})
		if reopened.ParentSpanID != s.SpanID {
			t.Errorf("round %s: the reopened stream's span's parent is %s, want the round's %s", round, reopened.ParentSpanID, s.SpanID)
		}
	}
}
