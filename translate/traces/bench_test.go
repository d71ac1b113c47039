package traces

import (
	"context"
	"net/http"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// discard is a span processor that drops every span: the benchmarks
// measure what a request's spans cost to build, not their export.
type discard struct{}

func (discard) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (discard) OnEnd(sdktrace.ReadOnlySpan)                     {}
func (discard) Shutdown(context.Context) error                  { return nil }
func (discard) ForceFlush(context.Context) error                { return nil }

// request does a pass-through request's span work as the gateway does it:
// the request's span under the server span of ctx, the upstream POST's
// client span with its traceparent on the upstream request's header, then
// the request's name and attributes at its end, each span's attributes
// set at once.
func request(ctx context.Context, hdr http.Header) {
	ctx, span := Start(ctx, "mcp", trace.SpanKindServer)
	pctx, post := Start(ctx, "POST", trace.SpanKindClient)
	if post != nil {
		post.SetAttributes(Upstream.String("http://127.0.0.1:9201/mcp"))
	}
	Inject(pctx, hdr)
	End(post, "")
	if span == nil {
		return
	}
	attrs := make([]attribute.KeyValue, 0, 13)
	attrs = append(attrs, MethodName.String("tools/call"), ToolName.String("echo"),
		OperationName.String(ExecuteTool), RequestID.String("7"), ProtocolVersion.String("2026-07-28"),
		Cell.String("modern-modern"), Outcome.String("ok"), Round.Int(0))
	span.SetName(SpanName("tools/call", "echo"))
	EndWith(span, "", attrs)
}

// BenchmarkRequestSpans is one request's span work under a recording
// server span (tracing on, sampled), the SDK's own work included; the
// export is not.
func BenchmarkRequestSpans(b *testing.B) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(discard{}))
	ctx, server := tp.Tracer("caddy").Start(context.Background(), "handler", trace.WithSpanKind(trace.SpanKindServer))
	defer server.End()
	benchRequest(ctx, b)
}

// BenchmarkRequestSpansUnsampled is the same request under a server span
// a parent-based sampler did not sample: nothing is built.
func BenchmarkRequestSpansUnsampled(b *testing.B) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(discard{}),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(0))))
	ctx, server := tp.Tracer("caddy").Start(context.Background(), "handler", trace.WithSpanKind(trace.SpanKindServer))
	defer server.End()
	benchRequest(ctx, b)
}

// BenchmarkRequestSpansOff is the same request without tracing.
func BenchmarkRequestSpansOff(b *testing.B) {
	benchRequest(context.Background(), b)
}

// benchRequest runs request under ctx, reporting allocations and the
// process's CPU time per request (cpu-ns/op: the SDK's span processing,
// the collector's, on a shared machine steadier than ns/op).
func benchRequest(ctx context.Context, b *testing.B) {
	hdr := http.Header{}
	b.ReportAllocs()
	cpu := processCPU()
	for b.Loop() {
		request(ctx, hdr)
	}
	b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op")
}
