package traces

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// TestStartAt: without tracing StartAt starts nothing and allocates
// nothing, not even the span's name, nor does Link; with it, a span under the one a Ref
// names (another trace's, a remote parent) or, for the zero Ref, under the
// recording span of ctx, with that span's provider.
func TestStartAt(t *testing.T) {
	ctx := context.Background()
	ref := Ref{TraceID: [16]byte{0x4b, 0xf9}, SpanID: [8]byte{0, 0xf0, 0x67}, Flags: 1}
	allocs := testing.AllocsPerRun(100, func() {
		if c, span := StartAt(ctx, ref, "task", "generate_report", trace.SpanKindInternal); span != nil || c != ctx {
			t.Fatal("a span without tracing")
		}
		Link(ctx, ref, TaskCall) // a tasks/* request's link to the call that made its task
	})
	if allocs != 0 {
		t.Errorf("%v allocations without tracing, want 0", allocs)
	}

	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	ctx, parent := tp.Tracer("test").Start(ctx, "server")
	_, run := StartAt(ctx, ref, "task", "generate_report", trace.SpanKindInternal)
	run.End()
	_, under := StartAt(ctx, Ref{}, "task takeover", "generate_report", trace.SpanKindInternal)
	under.End()
	parent.End()
	ended := rec.Ended()
	if got := ended[0]; got.Name() != "task generate_report" || got.Parent().TraceID() != ref.TraceID ||
		got.Parent().SpanID() != ref.SpanID || !got.Parent().IsRemote() || got.SpanKind() != trace.SpanKindInternal {
		t.Errorf("the run's span: %q, parent %v", got.Name(), got.Parent())
	}
	if got := ended[1]; got.Name() != "task takeover generate_report" || got.Parent().SpanID() != parent.SpanContext().SpanID() {
		t.Errorf("a span under ctx's: %q, parent %v", got.Name(), got.Parent())
	}
}
