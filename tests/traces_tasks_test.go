package tests

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/tests/support"
)

// TestTracesTaskTakenOver: a task outlives its instance, and its trace
// shows it. Two instances share state_key and Caddy's storage, with
// Caddy's tracing directive on, exporting to the OTLP receiver; in front of
// the go-sdk server with an event store. The task is created on instance 0
// (its tools/call's span), asks its first question (polled there), and
// instance 0 is SIGKILLed. Instance 1 answers from the record, takes the
// task over once the dead owner's lease lapsed (at a tasks/update, or a
// tasks/get), and runs it to completion (a second question, answered
// there). The receiver has: the takeover's span under that request, linked to the creating
// call's trace, naming the lost owner and its lapsed lease; the run's span
// on instance 1 in the creating call's trace, from taken_over to completed;
// every tasks/get and tasks/update, on either instance, linked to the
// creating call; and no run span of instance 0, killed before its run
// ended.
func TestTracesTaskTakenOver(t *testing.T) {
	t.Parallel()
	rec := support.NewTraceReceiver(t)
	up := newResumableServer(t)
	storage := t.TempDir()
	ports := []int{freePort(t), freePort(t)}
	block := "\t\tupstream " + up.url + " {\n\t\t\tera legacy\n\t\t}\n\t\ttask ask required 0\n\t\ttask_lease 2s"
	fleet := make([]*gateway, len(ports))
	for i, port := range ports {
		g := newGateway(t, port, fmt.Sprintf("127.0.0.1:%d", freePort(t)))
		g.globals, g.site = "\tstorage file_system "+storage, "\ttracing"
		g.writeConfig(t, fleetBlock(t, block, "peer", ports, i))
		g.run(t, rec.Env()...)
		fleet[i] = g
	}
	server := func(name string) func(support.Span) bool {
		return func(s support.Span) bool {
			return s.Scope == gatewayScope && s.Kind == "SPAN_KIND_SERVER" && s.Name == name
		}
	}

	alice := &taskClient{t: t, auth: "Bearer alice"}
	created := parseTask(t, alice.callTool(fleet[0].URL, "ask", map[string]any{"topic": "tea"}))
	alice.until(fleet[0].URL, created.TaskID, func(v taskView) bool { return v.Status == "input_required" }, "input_required")
	call := waitSpan(t, rec, "of the call that made the task", server("tools/call ask"))
	checkAttrs(t, "the call that made the task", call, map[string]string{"mcp_gateway.outcome": "task", "gen_ai.tool.name": "ask"})
	waitSpan(t, rec, "of a poll on the owner", func(s support.Span) bool { return server("tasks/get")(s) && s.TraceID != call.TraceID })
	fleet[0].kill(t)

	seen := alice.until(fleet[1].URL, created.TaskID, func(v taskView) bool {
		return v.Status == "input_required" && question(t, v) == "About tea?"
	}, "asking on another instance, the owner killed")
	waitFor(t, "tasks/update taken once the dead owner's lease lapsed", func() bool {
		x := alice.answerTask(fleet[1].URL, seen, "answer", "a")
		if x.Resp != nil && x.Resp.Error != nil && strings.Contains(x.Resp.Error.Message, "lease") {
			time.Sleep(200 * time.Millisecond)
			return false
		}
		if x.Resp == nil || x.Resp.Error != nil {
			t.Fatalf("tasks/update: %s", x)
		}
		return true
	})
	second := alice.until(fleet[1].URL, created.TaskID, func(v taskView) bool {
		return v.Status == "input_required" && question(t, v) == "Sure?"
	}, "asking its second question")
	if x := alice.answerTask(fleet[1].URL, second, "answer", "b"); x.Resp == nil || x.Resp.Error != nil {
		t.Fatalf("tasks/update of the second question: %s", x)
	}
	done := alice.until(fleet[1].URL, created.TaskID, func(v taskView) bool { return v.Status == "completed" }, "completed")
	if done.Result == nil || len(done.Result.Content) == 0 || done.Result.Content[0].Text != "accept:a,accept:b" {
		t.Fatalf("completed task %+v", done)
	}

	takeover := waitSpan(t, rec, "of the takeover", func(s support.Span) bool {
		return s.Scope == gatewayScope && s.Name == "task takeover ask"
	})
	if !slices.Contains(takeover.Links, call.TraceID) || takeover.TraceID == call.TraceID {
		t.Errorf("the takeover is in trace %s linking to %q, want its request's, linked to the call's %s", takeover.TraceID, takeover.Links, call.TraceID)
	}
	checkAttrs(t, "the takeover", takeover, map[string]string{"mcp_gateway.owner": "gw-0", "mcp_gateway.lease": "lapsed",
		"gen_ai.tool.name": "ask", "mcp_gateway.upstream": up.url, "error.type": ""})
	// The record's status: input_required, or working when the kill came
	// before the record of the question was written (the new owner then
	// asks it again, from the replay).
	if status := takeover.Attrs["mcp_gateway.task.status"]; status != "input_required" && status != "working" {
		t.Errorf("the takeover: the record's status %q", status)
	}
	taking := waitSpan(t, rec, "of the request that took the task over", func(s support.Span) bool {
		return (server("tasks/update")(s) || server("tasks/get")(s)) && s.SpanID == takeover.ParentSpanID
	})
	if taking.TraceID != takeover.TraceID {
		t.Errorf("the takeover's request is in trace %s, the takeover in %s", taking.TraceID, takeover.TraceID)
	}
	run := waitSpan(t, rec, "of the run on the instance that took the task over", func(s support.Span) bool {
		return s.Scope == gatewayScope && s.Name == "task ask"
	})
	if run.TraceID != call.TraceID || run.ParentSpanID != call.SpanID || run.Kind != "SPAN_KIND_INTERNAL" {
		t.Errorf("the run: %s in trace %s under %s, want INTERNAL under the call's span %s of trace %s", run.Kind, run.TraceID, run.ParentSpanID, call.SpanID, call.TraceID)
	}
	count := func(event string) int {
		return len(slices.DeleteFunc(slices.Clone(run.Events), func(e string) bool { return e != event }))
	}
	if len(run.Events) < 6 || run.Events[0] != "taken_over" || run.Events[len(run.Events)-1] != "completed" ||
		count("input_required") != 2 || count("working") < 2 {
		t.Errorf("the run's events %q, want taken_over, the two questions' input_required, working after each answer, completed", run.Events)
	}
	checkAttrs(t, "the run", run, map[string]string{"mcp_gateway.task.status": "completed", "gen_ai.tool.name": "ask",
		"gen_ai.operation.name": "execute_tool", "mcp_gateway.cell": "modern-legacy", "error.type": ""})
	polls := 0
	for _, s := range rec.Spans() {
		if s.Scope != gatewayScope || s.Kind != "SPAN_KIND_SERVER" || (s.Name != "tasks/get" && s.Name != "tasks/update") {
			continue
		}
		polls++
		if !slices.Contains(s.Links, call.TraceID) {
			t.Errorf("a %s in trace %s links to %q, want the call's trace %s", s.Name, s.TraceID, s.Links, call.TraceID)
		}
	}
	if polls < 5 {
		t.Errorf("%d tasks/get and tasks/update spans", polls)
	}
	if n := len(slices.DeleteFunc(rec.Spans(), func(s support.Span) bool { return s.Name != "task ask" })); n != 1 {
		t.Errorf("%d run spans, want only the one of the instance that took the task over", n)
	}
}
