package tests

// Traces of the faces and of the reverse bridge: with Caddy's tracing
// directive on, a saga's, a multi-turn call's and a REST call's requests
// are spans named after the tool call they serve, each internal modern
// request the face makes is a span under its request's with the upstream
// exchanges under it, and the later requests of the call (a resumeSaga, a
// turn's answers, a REST poll or advance), on another instance, link to
// the span of its first request, whose context the sagaToken, the turn
// token or the REST record carried sealed; a legacy client's call through
// the reverse bridge has its POSTs to the modern upstream (the call, the
// retry with the in-line answer) as client spans under its request's.

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/tests/support"
)

// Span kinds as the receiver names them.
const (
	spanServer   = "SPAN_KIND_SERVER"
	spanInternal = "SPAN_KIND_INTERNAL"
	spanClient   = "SPAN_KIND_CLIENT"
)

// ourSpan matches the gateway's spans of kind named name.
func ourSpan(kind, name string) func(support.Span) bool {
	return func(s support.Span) bool { return s.Scope == gatewayScope && s.Kind == kind && s.Name == name }
}

// noSecrets reports the spans of rec with an attribute carrying one of
// secrets.
func noSecrets(t *testing.T, rec *support.TraceReceiver, secrets ...string) {
	t.Helper()
	for _, s := range rec.Spans() {
		for k, v := range s.Attrs {
			for _, secret := range secrets {
				if strings.Contains(v, secret) {
					t.Errorf("span %s %s: attribute %s carries %.40q: %.80q", s.Kind, s.Name, k, secret, v)
				}
			}
		}
	}
}

// TestTracesSaga: a saga in front of a legacy server over two instances,
// its first resumeSaga on the other instance. The tools/callSaga is a span
// named after the tool, with its internal tools/call (the forward bridge's
// cell) under it and the upstream exchanges under that; each resumeSaga, a
// trace of its own (the client sent no traceparent), links to the
// callSaga's span, whose context its sagaToken carried sealed. No span
// carries the token, the principal's bearer token or a payload.
func TestTracesSaga(t *testing.T) {
	t.Parallel()
	rec := support.NewTraceReceiver(t)
	up := newResumableServer(t)
	fleet := startTracedFleet(t, 2, "\t\tupstream "+up.url+" {\n\t\t\tera legacy\n\t\t}\n\t\tsaga on", rec)
	const bearer, topic, answer = "Bearer traces-saga-secret", "Oolong Payload", "Answered Payload"
	alice := map[string]string{"Authorization": bearer}

	first := suspended(t, callSaga(t, fleet[0].URL, alice, 1, "ask", map[string]any{"topic": topic}), "elicitation")
	done := []map[string]any{accept(first.Steps[0].StepID, map[string]any{"answer": answer})}
	second := suspended(t, resumeSaga(t, fleet[1].URL, alice, 2, first.SagaToken, done), "elicitation")
	done = append(done, accept(second.Steps[0].StepID, map[string]any{"answer": answer}))
	if x := resumeSaga(t, fleet[0].URL, alice, 3, second.SagaToken, done); x.Resp == nil || x.Resp.Error != nil ||
		!strings.Contains(string(x.Resp.Result), "accept:"+answer) {
		t.Fatalf("final: %s", x)
	}

	call := waitSpan(t, rec, "of the tools/callSaga", ourSpan(spanServer, "tools/callSaga ask"))
	checkAttrs(t, "tools/callSaga", call, map[string]string{
		"mcp.method.name": "tools/callSaga", "gen_ai.tool.name": "ask", "gen_ai.operation.name": "execute_tool",
		"mcp_gateway.face": "saga", "mcp_gateway.cell": "modern-legacy", "jsonrpc.request.id": "1",
	})
	inner := waitSpan(t, rec, "of the saga's internal tools/call", func(s support.Span) bool {
		return ourSpan(spanInternal, "tools/call ask")(s) && s.ParentSpanID == call.SpanID
	})
	checkAttrs(t, "internal tools/call", inner, map[string]string{
		"mcp.method.name": "tools/call", "mcp_gateway.cell": "modern-legacy", "mcp_gateway.round": "0",
		"mcp_gateway.outcome": "input_required", "mcp_gateway.face": "",
	})
	waitSpan(t, rec, "of the upstream tools/call", func(s support.Span) bool {
		return ourSpan(spanClient, "tools/call")(s) && s.ParentSpanID == inner.SpanID && s.TraceID == call.TraceID
	})
	for _, id := range []string{"2", "3"} {
		resume := waitSpan(t, rec, "of resumeSaga "+id, func(s support.Span) bool {
			return ourSpan(spanServer, "tools/resumeSaga ask")(s) && s.Attrs["jsonrpc.request.id"] == id
		})
		checkAttrs(t, "resumeSaga "+id, resume, map[string]string{"gen_ai.tool.name": "ask", "mcp_gateway.face": "saga"})
		if resume.TraceID == call.TraceID || !slices.Contains(resume.Links, call.TraceID) {
			t.Errorf("resumeSaga %s: trace %s, links %q; want a trace of its own linking to the callSaga's %s", id, resume.TraceID, resume.Links, call.TraceID)
		}
		waitSpan(t, rec, "of resumeSaga "+id+"'s internal retry", func(s support.Span) bool {
			return ourSpan(spanInternal, "tools/call ask")(s) && s.ParentSpanID == resume.SpanID
		})
	}
	noSecrets(t, rec, bearer, "traces-saga-secret", topic, answer, first.SagaToken, second.SagaToken)
}

// TestTracesREST: a REST call in front of a legacy server over two
// instances: the PUT that starts it, a poll and the first advance on the
// other instance, the last advance on the first. The PUT is a span named
// after its method and tool, with the internal tools/call it makes under
// it and the upstream exchanges under that; the poll and the advances,
// traces of their own, link to the PUT's span, whose context the call's
// record carried sealed in the shared storage; the advance on the other
// instance relays its internal request to the call's owner, whose span
// joins its trace. No span carries the bearer token or a payload.
func TestTracesREST(t *testing.T) {
	t.Parallel()
	rec := support.NewTraceReceiver(t)
	var slept atomic.Int32
	up := restLegacyServer(t, &slept)
	gw, _ := restFleetTraced(t, t.TempDir(), "\t\tupstream "+up+" {\n\t\t\tera legacy\n\t\t}", "\t\trest_wait 2s\n", rec)
	const bearer, topic, answer = "Bearer traces-rest-secret", "Oolong Payload", "Answered Payload"
	alice := map[string]string{"Authorization": bearer}
	call := func(i int) string { return gw[i] + "/api/tools/ask/calls/a1" }

	first := wantCall(t, restDo(t, "PUT", call(0), withHeaders(alice, "Idempotency-Key", "k"), `{"arguments":{"topic":"`+topic+`"}}`),
		http.StatusCreated, "awaitingElicitationResult")
	wantCall(t, restDo(t, "GET", call(1), alice, ""), http.StatusOK, "awaitingElicitationResult")
	body := `{"action":"accept","content":{"answer":"` + answer + `"}}`
	second := wantCall(t, restDo(t, "POST", call(1)+"/advance", withHeaders(alice, "If-Match", `"`+first.ETag+`"`), body),
		http.StatusOK, "awaitingElicitationResult")
	end := wantCall(t, restDo(t, "POST", call(0)+"/advance", withHeaders(alice, "If-Match", `"`+second.ETag+`"`), body),
		http.StatusOK, "success")
	if !strings.Contains(string(end.Result), "accept:"+answer) {
		t.Fatalf("final: %s", end.Result)
	}

	put := waitSpan(t, rec, "of the PUT", ourSpan(spanServer, "PUT ask"))
	checkAttrs(t, "PUT", put, map[string]string{
		"mcp_gateway.face": "rest", "gen_ai.tool.name": "ask", "gen_ai.operation.name": "execute_tool", "mcp.method.name": "",
	})
	inner := waitSpan(t, rec, "of the PUT's internal tools/call", func(s support.Span) bool {
		return ourSpan(spanInternal, "tools/call ask")(s) && s.ParentSpanID == put.SpanID
	})
	checkAttrs(t, "the PUT's internal tools/call", inner, map[string]string{"mcp.method.name": "tools/call", "mcp_gateway.cell": "modern-legacy"})
	waitSpan(t, rec, "of an upstream exchange of the PUT", func(s support.Span) bool {
		return s.Scope == gatewayScope && s.Kind == spanClient && s.ParentSpanID == inner.SpanID && s.TraceID == put.TraceID
	})
	get := waitSpan(t, rec, "of the poll", ourSpan(spanServer, "GET ask"))
	checkAttrs(t, "the poll", get, map[string]string{"mcp_gateway.face": "rest", "gen_ai.tool.name": "ask"})
	if get.TraceID == put.TraceID || !slices.Contains(get.Links, put.TraceID) {
		t.Errorf("the poll: trace %s, links %q; want a trace of its own linking to the PUT's %s", get.TraceID, get.Links, put.TraceID)
	}
	var advances []support.Span
	poll(notHang, func() bool {
		advances = slices.DeleteFunc(rec.Spans(), func(s support.Span) bool { return !ourSpan(spanServer, "POST ask")(s) })
		return len(advances) == 2
	})
	if len(advances) != 2 {
		t.Fatalf("%d spans of advances, want 2", len(advances))
	}
	for _, adv := range advances {
		if adv.TraceID == put.TraceID || !slices.Contains(adv.Links, put.TraceID) {
			t.Errorf("an advance: trace %s, links %q; want a trace of its own linking to the PUT's %s", adv.TraceID, adv.Links, put.TraceID)
		}
		waitSpan(t, rec, "of an advance's internal request", func(s support.Span) bool {
			return s.Scope == gatewayScope && s.Kind == spanInternal && s.ParentSpanID == adv.SpanID
		})
	}
	// The advance on the other instance: its internal request went to the
	// call's owner (the instance running its task), whose span is in the
	// advance's trace.
	relay := waitSpan(t, rec, "of the relay to the call's owner", func(s support.Span) bool {
		return ourSpan(spanClient, "relay")(s) && s.Attrs["mcp_gateway.owner"] == "gw-0" &&
			slices.ContainsFunc(advances, func(a support.Span) bool { return a.TraceID == s.TraceID })
	})
	waitSpan(t, rec, "of the owner's request", func(s support.Span) bool {
		return s.Scope == gatewayScope && s.Kind == spanServer && s.TraceID == relay.TraceID && s.Attrs["mcp_gateway.cell"] == "modern-legacy" &&
			s.Attrs["mcp_gateway.face"] == ""
	})
	noSecrets(t, rec, bearer, "traces-rest-secret", topic, answer)
}

// TestTracesReverseInline: a legacy client's call through the reverse
// bridge to a modern server whose tool asks once (input_required), the
// question sent to the client in-line on the call's SSE answer and
// answered on a POST of its own: the POST that makes the call and the
// retry carrying the answer are client spans under the span of the
// client's tools/call, rounds 0 and 1, each with its own traceparent for
// the upstream. No span carries the client's bearer token or a payload.
func TestTracesReverseInline(t *testing.T) {
	t.Parallel()
	rec := support.NewTraceReceiver(t)
	m := newModernUpstream(t)
	tap := newTraceContextTap(t, m.url)
	g := startTraced(t, freePort(t), "\t\tupstream "+tap.url+" {\n\t\t\tera modern\n\t\t}", rec)
	const bearer, answer = "Bearer traces-reverse-secret", "Answered Payload"
	auth := map[string]string{"Authorization": bearer}
	sid, _ := initReverse(t, g.URL, "2025-11-25", `{"elicitation":{}}`, auth)
	hdr := legacyHeaders(sid)
	for k, v := range auth {
		hdr[k] = v
	}
	resp := post(t, g.URL, hdr, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"confirm","arguments":{}}}`)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("tools/call confirm: HTTP %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	events := readSSE(resp.Body)
	var q inlineRequest
	if ev := nextData(t, events); json.Unmarshal([]byte(ev.data), &q) != nil || q.Method != "elicitation/create" {
		t.Fatalf("want an in-line elicitation, got %s", ev.data)
	}
	if r := post(t, g.URL, hdr, `{"jsonrpc":"2.0","id":"`+q.ID+`","result":{"action":"accept","content":{"answer":"`+answer+`"}}}`); r.StatusCode != http.StatusAccepted {
		t.Fatalf("answering %s: status %d", q.ID, r.StatusCode)
	}
	if ev := nextData(t, events); !strings.Contains(ev.data, `"id":7`) || !strings.Contains(ev.data, "confirmed: "+answer) {
		t.Fatalf("the call's answer: %s", ev.data)
	}

	outer := waitSpan(t, rec, "of the client's tools/call", func(s support.Span) bool {
		return ourSpan(spanServer, "tools/call confirm")(s) && s.Attrs["mcp_gateway.cell"] == "legacy-modern"
	})
	checkAttrs(t, "the client's tools/call", outer, map[string]string{"mcp_gateway.round": "1", "mcp_gateway.outcome": "complete"})
	var ids []string
	for _, round := range []string{"0", "1"} {
		s := waitSpan(t, rec, "of round "+round+"'s POST upstream", func(s support.Span) bool {
			return ourSpan(spanClient, "tools/call")(s) && s.ParentSpanID == outer.SpanID && s.Attrs["mcp_gateway.round"] == round
		})
		checkAttrs(t, "round "+round+"'s POST", s, map[string]string{
			"mcp.method.name": "tools/call", "mcp.protocol.version": modernVersion, "mcp_gateway.upstream": tap.url,
		})
		if want := "00-" + outer.TraceID + "-" + s.SpanID + "-01"; !sentTraceparent(tap.headers(), want) {
			t.Errorf("the upstream never got round %s's traceparent %s: %v", round, want, tap.headers())
		}
		ids = append(ids, s.SpanID)
	}
	if ids[0] == ids[1] {
		t.Errorf("the two rounds' POSTs are one span %s", ids[0])
	}
	noSecrets(t, rec, bearer, "traces-reverse-secret", answer)
}

// TestTracesMultiTurn: a multi-turn call (SEP-1858) in front of a legacy
// server over two instances, its first turn's answers POSTed to the other
// instance. The client's tools/call is a span of the face, with its
// internal tools/call under it; the POST of each turn's answers, a trace
// of its own, links to it, whose context the turn token (the
// Last-Event-ID) carried sealed. No span carries the token or a payload.
func TestTracesMultiTurn(t *testing.T) {
	t.Parallel()
	rec := support.NewTraceReceiver(t)
	up := newResumableServer(t)
	fleet := startTracedFleet(t, 2, "\t\tupstream "+up.url+" {\n\t\t\tera legacy\n\t\t}\n\t\tmulti_turn_sse on", rec)
	a, b := fleet[0].URL, fleet[1].URL
	const topic, answer = "Oolong Payload", "Answered Payload"
	sid := mtOpen(t, a, mtCaps)
	first := mtTurn(t, mtCall(t, a, sid, "call-7", "ask", map[string]any{"topic": topic}), "About "+topic, "elicitation/create")
	second := mtTurn(t, mtAnswers(t, b, sid, first.token, []map[string]any{mtAccept(first.reqs[0], map[string]any{"answer": answer})}, nil),
		"Sure?", "elicitation/create")
	mtFinal(t, mtAnswers(t, a, sid, second.token, []map[string]any{mtAccept(second.reqs[0], map[string]any{"answer": answer})}, nil),
		`"call-7"`, "accept:"+answer)

	call := waitSpan(t, rec, "of the client's tools/call", func(s support.Span) bool {
		return ourSpan(spanServer, "tools/call ask")(s) && s.Attrs["mcp_gateway.face"] == "multi_turn_sse"
	})
	checkAttrs(t, "the client's tools/call", call, map[string]string{"gen_ai.tool.name": "ask", "jsonrpc.request.id": "call-7"})
	waitSpan(t, rec, "of the face's internal tools/call", func(s support.Span) bool {
		return ourSpan(spanInternal, "tools/call ask")(s) && s.ParentSpanID == call.SpanID && s.Attrs["mcp_gateway.cell"] == "modern-legacy"
	})
	var answers []support.Span
	poll(notHang, func() bool {
		answers = slices.DeleteFunc(rec.Spans(), func(s support.Span) bool {
			return !ourSpan(spanServer, "POST ask")(s) || s.Attrs["mcp_gateway.face"] != "multi_turn_sse"
		})
		return len(answers) == 2
	})
	if len(answers) != 2 {
		t.Fatalf("%d spans of a turn's answers, want 2", len(answers))
	}
	for _, s := range answers {
		if s.TraceID == call.TraceID || !slices.Contains(s.Links, call.TraceID) {
			t.Errorf("a turn's answers: trace %s, links %q; want a trace of its own linking to the call's %s", s.TraceID, s.Links, call.TraceID)
		}
	}
	noSecrets(t, rec, topic, answer, first.token, second.token)
}
