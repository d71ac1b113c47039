package forward

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidwall/gjson"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/seal"
)

// tracedBridges serves requests each under a span of its own (a trace of
// its own, as Caddy's tracing handler starts one for a request without a
// traceparent), recorded.
type tracedBridges struct {
	t   *testing.T
	rec *tracetest.SpanRecorder
	tp  *sdktrace.TracerProvider
}

func newTracedBridges(t *testing.T) *tracedBridges {
	rec := tracetest.NewSpanRecorder()
	return &tracedBridges{t: t, rec: rec, tp: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))}
}

// serve serves r on b under a request span, and returns the answer and
// the span's context.
func (tb *tracedBridges) serve(b *Bridge, r Request) (gjson.Result, trace.SpanContext) {
	ctx, span := tb.tp.Tracer("caddy").Start(context.Background(), "request", trace.WithSpanKind(trace.SpanKindServer))
	a := &recordedAnswer{}
	b.Serve(ctx, r, a)
	span.End()
	return gjson.ParseBytes(a.final), span.SpanContext()
}

// task sends method (tasks/get, tasks/update) of id on b.
func (tb *tracedBridges) task(b *Bridge, o *Options, upstream, method, id, extra string, gone bool) (gjson.Result, trace.SpanContext) {
	r := modernReq(tb.t, upstream, "alice", 7, method, id, fmt.Sprintf(`"taskId":%q%s`, id, extra))
	r.Options, r.OwnerGone = o, gone
	return tb.serve(b, r)
}

// until sends tasks/get of id on b until its status is status.
func (tb *tracedBridges) until(b *Bridge, o *Options, upstream, id, status string, gone bool) (gjson.Result, trace.SpanContext) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		res, sc := tb.task(b, o, upstream, "tasks/get", id, "", gone)
		if res.Get("result.status").String() == status {
			return res.Get("result"), sc
		}
		if time.Now().After(deadline) {
			tb.t.Fatalf("task never %s: last tasks/get %s", status, res.Raw)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// span returns the ended span named name, failing without one.
func (tb *tracedBridges) span(name string) sdktrace.ReadOnlySpan {
	tb.t.Helper()
	for _, s := range tb.rec.Ended() {
		if s.Name() == name {
			return s
		}
	}
	tb.t.Fatalf("no span %q ended", name)
	return nil
}

func eventNames(s sdktrace.ReadOnlySpan) []string {
	var names []string
	for _, e := range s.Events() {
		names = append(names, e.Name)
	}
	return names
}

func attrOf(attrs []attribute.KeyValue, key string) string {
	for _, a := range attrs {
		if string(a.Key) == key {
			return a.Value.Emit()
		}
	}
	return ""
}

func linksTo(s sdktrace.ReadOnlySpan, sc trace.SpanContext) bool {
	return slices.ContainsFunc(s.Links(), func(l sdktrace.Link) bool {
		return l.SpanContext.TraceID() == sc.TraceID() && l.SpanContext.SpanID() == sc.SpanID()
	})
}

// TestTaskSpansTakeover: a task made under a request's span runs as a
// span of its own on its instance, a child of that request, with an event
// per transition; its instance vanishes mid-task (its run's span never
// ends, as a killed process's is never exported). Another instance takes
// it over from its record, under a tasks/update with a trace of its own: a
// takeover span under that request, linked to the call that made the task,
// naming the lost owner and why its lease no longer held; the run there is
// a child of the call that made the task (its trace), from taken_over to
// completed. Every tasks/* request's span links to that call.
func TestTaskSpansTakeover(t *testing.T) {
	upstream, _ := resumableUpstream(t)
	bs, os := fleetOfBridges(t, 2, 400*time.Millisecond)
	tb := newTracedBridges(t)
	r := taskRequest(t, upstream, 1, 2, "alice")
	r.Options, r.Resume = os[0], true
	created, call := tb.serve(bs[0], r)
	id := created.Get("result.taskId").String()
	if id == "" {
		t.Fatalf("no task: %s", created.Raw)
	}
	first, poll := tb.until(bs[0], os[0], upstream, id, translate.TaskInputRequired, false)
	tk, _ := seal.OpenTask(os[0].Keyring, id)
	eventually(t, "the record of the question", func() bool { // written right after the change in memory
		rec, _ := loadRecord(context.Background(), os[0], tk.Principal, tk.Handle)
		return rec != nil && rec.Status == translate.TaskInputRequired
	})
	crash(bs[0])
	for _, s := range tb.rec.Ended() {
		if s.Name() == "task ask" {
			t.Fatalf("the run's span of the vanished instance ended: %v", eventNames(s))
		}
	}
	answer := fmt.Sprintf(`,"inputResponses":{%q:{"action":"accept","content":{"a":"one"}}}`,
		first.Get("inputRequests|@keys|0").String())
	if res, _ := tb.task(bs[1], os[1], upstream, "tasks/update", id, answer, true); res.Get("result.resultType").String() != "complete" {
		t.Fatalf("tasks/update taking the task over: %s", res.Raw)
	}
	second, _ := tb.until(bs[1], os[1], upstream, id, translate.TaskInputRequired, false)
	for second.Get("inputRequests.*.params.message").String() != "question 2" {
		second, _ = tb.until(bs[1], os[1], upstream, id, translate.TaskInputRequired, false)
	}
	answer = fmt.Sprintf(`,"inputResponses":{%q:{"action":"accept","content":{"a":"two"}}}`, second.Get("inputRequests|@keys|0").String())
	tb.task(bs[1], os[1], upstream, "tasks/update", id, answer, false)
	tb.until(bs[1], os[1], upstream, id, translate.TaskCompleted, false)

	eventually(t, "the run's span on the instance that took the task over", func() bool {
		return slices.ContainsFunc(tb.rec.Ended(), func(s sdktrace.ReadOnlySpan) bool { return s.Name() == "task ask" })
	})
	run := tb.span("task ask")
	if run.Parent().TraceID() != call.TraceID() || run.Parent().SpanID() != call.SpanID() || run.SpanKind() != trace.SpanKindInternal {
		t.Errorf("the run's parent is %v, want the call that made the task %v", run.Parent(), call)
	}
	if got, want := eventNames(run), []string{runTakenOver, "input_required", "working", "input_required", "working", "completed"}; !slices.Equal(got, want) {
		t.Errorf("the run's events %q, want %q", got, want)
	}
	taken := run.Events()[0].Attributes
	if attrOf(taken, "mcp_gateway.owner") != "gw-0" || attrOf(taken, "mcp_gateway.lease") != leaseLapsed {
		t.Errorf("taken_over's attributes %v", taken)
	}
	if attrOf(run.Attributes(), "mcp_gateway.task.status") != "completed" || attrOf(run.Attributes(), "gen_ai.tool.name") != "ask" || run.Status().Code != 0 {
		t.Errorf("the run's attributes %v, status %v", run.Attributes(), run.Status())
	}
	takeover := tb.span("task takeover ask")
	if takeover.Parent().TraceID() == call.TraceID() || !linksTo(takeover, call) {
		t.Errorf("the takeover's parent %v, links %v: want a request of its own, linked to the call %v", takeover.Parent(), takeover.Links(), call)
	}
	if attrOf(takeover.Attributes(), "mcp_gateway.owner") != "gw-0" || attrOf(takeover.Attributes(), "mcp_gateway.lease") != leaseLapsed ||
		attrOf(takeover.Attributes(), "mcp_gateway.task.status") != translate.TaskInputRequired {
		t.Errorf("the takeover's attributes %v", takeover.Attributes())
	}
	requests := 0
	for _, s := range tb.rec.Ended() {
		if s.Name() != "request" || s.SpanContext().TraceID() == call.TraceID() {
			continue
		}
		requests++
		if !linksTo(s, call) {
			t.Errorf("a tasks/* request's span links to %v, want the call %v", s.Links(), call)
		}
	}
	if requests < 4 || poll.TraceID() == call.TraceID() {
		t.Errorf("%d tasks/* requests' spans", requests)
	}
}

// failingLeases is a task store whose lease writes fail while fail is set.
type failingLeases struct {
	Storage
	fail atomic.Bool
}

func (s *failingLeases) Store(ctx context.Context, key string, value []byte) error {
	if s.fail.Load() && strings.HasPrefix(key, leasesPrefix) {
		return fmt.Errorf("storage unavailable")
	}
	return s.Storage.Store(ctx, key, value)
}

// TestTaskSpanLeaseLost: an instance whose lease lapses because it could
// not renew it marks its tasks' run spans with lease_lost, once; the run
// goes on.
func TestTaskSpanLeaseLost(t *testing.T) {
	upstream, _ := resumableUpstream(t)
	bs, os := fleetOfBridges(t, 1, 300*time.Millisecond)
	store := &failingLeases{Storage: os[0].Tasks.Store}
	os[0].Tasks.Store = store
	tb := newTracedBridges(t)
	r := taskRequest(t, upstream, 1, 1, "alice")
	r.Options, r.Resume = os[0], true
	created, _ := tb.serve(bs[0], r)
	id := created.Get("result.taskId").String()
	tb.until(bs[0], os[0], upstream, id, translate.TaskInputRequired, false)
	store.fail.Store(true)
	lost := func() int {
		n := 0
		for _, s := range tb.rec.Started() {
			if s.Name() == "task ask" {
				n = strings.Count(strings.Join(eventNames(s), " "), runLeaseLost)
			}
		}
		return n
	}
	eventually(t, "lease_lost on the run's span", func() bool { return lost() > 0 })
	time.Sleep(400 * time.Millisecond) // more renewals fail: still one event
	store.fail.Store(false)
	if n := lost(); n != 1 {
		t.Errorf("%d lease_lost events, want 1", n)
	}
}

// eventually waits up to 10 s for cond.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within 10s", what)
		}
	}
}

// TestTaskSpansHandOver: an instance that stops gracefully ends its
// tasks' run spans with handed_over (no error: the task goes on), and the
// instance that takes one over says its owner released its lease; a task
// cancelled there ends its run's span as an error.
func TestTaskSpansHandOver(t *testing.T) {
	upstream, _ := resumableUpstream(t)
	bs, os := fleetOfBridges(t, 2, time.Hour)
	tb := newTracedBridges(t)
	r := taskRequest(t, upstream, 1, 2, "alice")
	r.Options, r.Resume = os[0], true
	created, _ := tb.serve(bs[0], r)
	id := created.Get("result.taskId").String()
	first, _ := tb.until(bs[0], os[0], upstream, id, translate.TaskInputRequired, false)
	bs[0].Close()
	handed := tb.span("task ask")
	if got, want := eventNames(handed), []string{"working", "input_required", runHandedOver}; !slices.Equal(got, want) {
		t.Errorf("the handed over run's events %q, want %q", got, want)
	}
	if attrOf(handed.Attributes(), "mcp_gateway.task.status") != translate.TaskInputRequired || handed.Status().Code != 0 {
		t.Errorf("the handed over run: %v, %v", handed.Attributes(), handed.Status())
	}
	answer := fmt.Sprintf(`,"inputResponses":{%q:{"action":"accept","content":{"a":"one"}}}`, first.Get("inputRequests|@keys|0").String())
	tb.task(bs[1], os[1], upstream, "tasks/update", id, answer, true)
	if lease := attrOf(tb.span("task takeover ask").Attributes(), "mcp_gateway.lease"); lease != leaseReleased {
		t.Errorf("the takeover says the lease was %q, want %q", lease, leaseReleased)
	}
	tb.task(bs[1], os[1], upstream, "tasks/cancel", id, "", false)
	eventually(t, "the run's span on the instance that took the task over", func() bool {
		return len(slices.DeleteFunc(tb.rec.Ended(), func(s sdktrace.ReadOnlySpan) bool { return s.Name() != "task ask" })) == 2
	})
	run := tb.rec.Ended()[slices.IndexFunc(tb.rec.Ended(), func(s sdktrace.ReadOnlySpan) bool {
		return s.Name() == "task ask" && s != handed
	})]
	if got := eventNames(run); got[0] != runTakenOver || got[len(got)-1] != translate.TaskCancelled {
		t.Errorf("the cancelled run's events %q", got)
	}
	if attrOf(run.Attributes(), "error.type") != translate.TaskCancelled || run.Status().Code != codes.Error {
		t.Errorf("the cancelled run: %v, %v", run.Attributes(), run.Status())
	}
}

// TestTaskSpansOff: without tracing, and without a client's traceparent,
// a task has no run span and its taskId and record name no span (sealed
// as before they could).
func TestTaskSpansOff(t *testing.T) {
	upstream, _ := resumableUpstream(t)
	bs, os := fleetOfBridges(t, 1, time.Hour)
	id, _ := startTask(t, bs[0], os[0], upstream, 1)
	tk, err := seal.OpenTask(os[0].Keyring, id)
	if err != nil || tk.Trace != (seal.TraceRef{}) {
		t.Fatalf("taskId %+v, %v", tk, err)
	}
	rec, err := loadRecord(context.Background(), os[0], tk.Principal, tk.Handle)
	if err != nil || rec == nil || rec.Trace != (seal.TraceRef{}) {
		t.Fatalf("record %+v, %v", rec, err)
	}
	held := bs[0].heldTask(tk.Handle, tk.Principal)
	held.mu.Lock()
	defer held.mu.Unlock()
	if held.run != nil {
		t.Error("a run span without tracing")
	}
}
