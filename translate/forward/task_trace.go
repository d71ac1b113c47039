package forward

import (
	"context"

	"go.opentelemetry.io/otel/trace"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/seal"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/traces"
)

// The spans of hosted tasks (translate/traces), with tracing on: only a
// request with a recording span starts one, so that without tracing
// nothing is built.
//
//   - A task's run on an instance is one INTERNAL span, `task <tool>`, from
//     the task's creation (or takeover) to its terminal status, or to its
//     handing over at a graceful stop: an event per transition (working,
//     input_required with the number of questions, completed, failed,
//     cancelled; handed_over; lease_lost when this instance could not
//     renew its lease in time), mcp_gateway.task.status its last status,
//     an error when failed or cancelled. On the instance that made the
//     task it is a child of the request that made it; on one that took it
//     over, a child of the call that created the task (its record names
//     that call's span), in that call's trace.
//   - Taking a task over is an INTERNAL span, `task takeover <tool>`, under
//     the tasks/* request that did it, linked to the call that created the
//     task, naming the instance that held it and why its lease no longer
//     held (mcp_gateway.lease); an error (lost) when the call could not be
//     resumed.
//   - Every tasks/* request's span links to the call that created the task
//     (its taskId names that call's span): the polls and answers of one
//     task, on any instance, after any delay.
//
// A span is exported when it ends: the run of an instance that dies is
// never exported; the takeover says what happened to it.

// Events of a task's run span besides its statuses.
const (
	runTakenOver  = "taken_over"
	runHandedOver = "handed_over"
	runLeaseLost  = "lease_lost"
)

// startRun starts t's run span under the span ref names (zero: the
// recording span of ctx), linked to the call that created t; for a task
// taken over from the instance from (none: ""), whose lease was lost
// (ownerAlive's why), its first event is taken_over. Without tracing it
// does nothing.
func (t *task) startRun(ctx context.Context, ref traces.Ref, from, lost string) {
	ctx, span := traces.StartAt(ctx, ref, "task", t.tool, trace.SpanKindInternal)
	if span == nil {
		return
	}
	span.SetAttributes(traces.ToolName.String(t.tool), traces.OperationName.String(traces.ExecuteTool),
		traces.Upstream.String(t.upstream), traces.Cell.String("modern-legacy")) // the forward bridge's
	traces.Link(ctx, t.first, traces.TaskCall)
	if from != "" {
		span.AddEvent(runTakenOver, trace.WithAttributes(traces.Owner.String(from), traces.Lease.String(lost)))
	}
	t.mu.Lock()
	t.run = span
	t.mu.Unlock()
}

// traceRun adds t's transition since the last one, if any, to its run
// span, and ends the span when t's run on this instance is over: t is
// terminal, or handed over. persist calls it on every transition, and
// updateTask as soon as answers move the task on. The caller holds t.mu.
func (t *task) traceRun() {
	if t.run == nil {
		return
	}
	if t.status != t.runShown {
		t.runShown = t.status
		if t.status == translate.TaskInputRequired {
			t.run.AddEvent(t.status, trace.WithAttributes(traces.TaskInputs.Int(len(t.inputs))))
		} else {
			t.run.AddEvent(t.status)
		}
	}
	switch {
	case translate.TaskTerminal(t.status):
	case t.handingOver.Load():
		t.run.AddEvent(runHandedOver)
	default:
		return
	}
	t.run.SetAttributes(traces.TaskStatus.String(t.status))
	errorType := ""
	if t.status == translate.TaskFailed || t.status == translate.TaskCancelled {
		errorType = t.status
	}
	traces.End(t.run, errorType)
	t.run = nil
}

// leaseLost adds lease_lost to the run spans of the tasks this instance
// keeps records of: its lease lapsed before it could renew it, and
// another instance may take them over.
func (b *Bridge) leaseLost() {
	for _, t := range b.allTasks() {
		t.mu.Lock()
		if t.run != nil && t.opts != nil && t.opts.Tasks.Store != nil {
			t.run.AddEvent(runLeaseLost)
		}
		t.mu.Unlock()
	}
}

// startTakeover starts the span of taking over the task rec describes,
// whose owner's lease no longer holds (lost: why), under the request's
// span of ctx.
func startTakeover(ctx context.Context, rec *seal.TaskRecord, lost string) (context.Context, trace.Span) {
	ctx, span := traces.StartAt(ctx, traces.Ref{}, "task takeover", rec.Tool, trace.SpanKindInternal)
	if span == nil {
		return ctx, nil
	}
	span.SetAttributes(traces.ToolName.String(rec.Tool), traces.Upstream.String(rec.Upstream), traces.Owner.String(rec.Owner),
		traces.Lease.String(lost), traces.TaskStatus.String(rec.Status))
	traces.Link(ctx, traces.Ref(rec.Trace), traces.TaskCall)
	return ctx, span
}
