package traces

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// The spans of the tasks the gateway hosts: a task's run on an instance,
// from its creation or takeover to its end, with an event per transition;
// the takeover of a task whose instance was lost; and a link from every
// tasks/* request to the call that created the task.

// Attribute keys of the tasks' spans and events.
const (
	// TaskStatus is a task's status at the end of its run's span, or
	// when it was taken over (mcp_gateway.task.status).
	TaskStatus = attribute.Key("mcp_gateway.task.status")
	// TaskInputs is how many questions a task shows at its
	// input_required event (mcp_gateway.task.inputs).
	TaskInputs = attribute.Key("mcp_gateway.task.inputs")
	// Lease says why the lease of the instance that held a task no
	// longer held when another took the task over: lapsed (it died, or
	// could not renew it), released (it stopped gracefully), restarted
	// (another process of that instance id renewed it), none (never
	// written, or deleted), own (the record names this instance id: its
	// previous process's, or one its table let go) (mcp_gateway.lease).
	Lease = attribute.Key("mcp_gateway.lease")
)

// TaskCall is the attribute of a link to the call that created a task
// (mcp_gateway.link: task).
var TaskCall = attribute.String("mcp_gateway.link", "task")

// StartAt starts a span named SpanName(name, target) as a child of the
// span ref names (a span of another request, perhaps of another instance
// that is gone), or of the recording span of ctx when ref names none, with
// the tracer provider of the recording span of ctx. Without one (tracing
// off) it starts nothing, builds no name, and returns ctx and nil.
func StartAt(ctx context.Context, ref Ref, name, target string, kind trace.SpanKind) (context.Context, trace.Span) {
	parent := trace.SpanFromContext(ctx)
	if !parent.IsRecording() {
		return ctx, nil
	}
	if ref != (Ref{}) {
		ctx = trace.ContextWithRemoteSpanContext(ctx, ref.spanContext())
	}
	return tracerOf(parent.TracerProvider()).Start(ctx, SpanName(name, target), kindOption(kind)...)
}

// spanContext is the remote span context ref names.
func (ref Ref) spanContext() trace.SpanContext {
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: ref.TraceID, SpanID: ref.SpanID,
		TraceFlags: trace.TraceFlags(ref.Flags), Remote: true})
}
