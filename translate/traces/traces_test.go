package traces

import (
	"context"
	"net/http"
	"reflect"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// TestOffBuildsNothing: without a recording span in the context (tracing
// off), Start starts nothing and allocates nothing, Inject leaves the
// header as it is, Carry returns its context, and so does Extract for a
// request without a traceparent.
func TestOffBuildsNothing(t *testing.T) {
	ctx := context.Background()
	hdr := http.Header{"Traceparent": {"client's"}}
	none := http.Header{"Authorization": {"Bearer x"}}
	allocs := testing.AllocsPerRun(100, func() {
		if Extract(ctx, none) != ctx {
			t.Fatal("Extract built a context for a request without a traceparent")
		}
		c, span := Start(ctx, "POST", trace.SpanKindClient)
		if span != nil || c != ctx {
			t.Fatal("a span without tracing")
		}
		Inject(c, hdr)
		End(span, "500")
		if Carry(ctx, c) != ctx {
			t.Fatal("Carry built a context without tracing")
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations per request without tracing, want 0", allocs)
	}
	if got := hdr.Get("Traceparent"); got != "client's" {
		t.Errorf("Inject without tracing changed the header: %q", got)
	}
}

// TestOnSpansAndInjects: under a recording span, Start makes a child with
// the parent's provider, Inject replaces the client's trace context with
// the child's (dropping the client's tracestate), End marks an error, and
// Carry hands the span to a context that outlives the request.
func TestOnSpansAndInjects(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	ctx, parent := tp.Tracer("test").Start(context.Background(), "server")
	cctx, span := Start(ctx, "POST", trace.SpanKindClient)
	if span == nil {
		t.Fatal("no span under a recording one")
	}
	hdr := http.Header{"Traceparent": {"00-zz"}, "Tracestate": {"evil=1"}}
	Inject(cctx, hdr)
	sc := span.SpanContext()
	if want := "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-01"; hdr.Get("Traceparent") != want {
		t.Errorf("traceparent %q, want %q", hdr.Get("Traceparent"), want)
	}
	if v := hdr.Values("Tracestate"); len(v) != 0 {
		t.Errorf("the client's tracestate passed: %q", v)
	}
	End(span, "502")
	parent.End()
	ended := rec.Ended()
	if len(ended) != 2 || ended[0].Name() != "POST" || ended[0].Parent().SpanID() != parent.SpanContext().SpanID() {
		t.Fatalf("ended spans %v", ended)
	}
	if ended[0].Status().Description != "502" || ended[0].SpanKind() != trace.SpanKindClient {
		t.Errorf("status %v kind %v", ended[0].Status(), ended[0].SpanKind())
	}
	if got := trace.SpanFromContext(Carry(context.Background(), ctx)); got != parent {
		t.Error("Carry did not hand the request's span on")
	}
}

func TestSpanName(t *testing.T) {
	if got := SpanName("tools/call", "ask"); got != "tools/call ask" {
		t.Errorf("SpanName: %q", got)
	}
	if got := SpanName("tools/list", ""); got != "tools/list" {
		t.Errorf("SpanName: %q", got)
	}
}

// TestExtract: without tracing, a valid client traceparent (and its
// tracestate) is what Inject then sends; a malformed or oversized one is
// ignored, and Inject leaves the header as the caller built it.
func TestExtract(t *testing.T) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	ctx := Extract(context.Background(), http.Header{"Traceparent": {tp}, "Tracestate": {"a=1"}})
	out := http.Header{}
	Inject(ctx, out)
	if out.Get("Traceparent") != tp || out.Get("Tracestate") != "a=1" {
		t.Errorf("sent %q %q, want the client's", out.Get("Traceparent"), out.Get("Tracestate"))
	}
	for _, bad := range []string{"00-zz", tp + "-00", "ff-" + tp[3:], "00-00000000000000000000000000000000-00f067aa0ba902b7-01"} {
		ctx := Extract(context.Background(), http.Header{"Traceparent": {bad}})
		if trace.SpanContextFromContext(ctx).IsValid() {
			t.Errorf("traceparent %q taken", bad)
		}
	}
}

// TestLink: a later round's span links to the first round's span RefOf
// named, unless that is in the same trace (or names none).
func TestLink(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	ctx1, first := tp.Tracer("test").Start(context.Background(), "round 0")
	ref := RefOf(ctx1)
	first.End()
	if ref.TraceID != first.SpanContext().TraceID() || ref.SpanID != first.SpanContext().SpanID() {
		t.Fatalf("RefOf %+v", ref)
	}
	if RefOf(context.Background()) != (Ref{}) {
		t.Fatal("RefOf names a span without one")
	}
	ctx2, later := tp.Tracer("test").Start(context.Background(), "round 1") // a trace of its own
	Link(ctx2, ref, FirstRound)
	Link(ctx2, Ref{}, FirstRound)
	later.End()
	ctx3, same := tp.Tracer("test").Start(ctx1, "round 1, same trace")
	Link(ctx3, ref, FirstRound)
	same.End()
	ended := rec.Ended()
	if l := ended[1].Links(); len(l) != 1 || l[0].SpanContext.SpanID() != first.SpanContext().SpanID() || l[0].Attributes[0] != FirstRound {
		t.Errorf("links of a later round in its own trace: %+v", l)
	}
	if l := ended[2].Links(); len(l) != 0 {
		t.Errorf("links of a later round in the first's trace: %+v", l)
	}
}

// TestInjectAsTraceContext: Inject writes the traceparent and tracestate
// the W3C propagator writes, for every flag byte (only sampled and random
// pass) and with or without a tracestate.
func TestInjectAsTraceContext(t *testing.T) {
	ts, err := trace.ParseTraceState("a=1,b=2")
	if err != nil {
		t.Fatal(err)
	}
	for flags := range 256 {
		for _, state := range []trace.TraceState{{}, ts} {
			sc := trace.NewSpanContext(trace.SpanContextConfig{
				TraceID:    trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, byte(flags)},
				SpanID:     trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, byte(flags)},
				TraceFlags: trace.TraceFlags(flags), TraceState: state})
			ctx := trace.ContextWithSpanContext(context.Background(), sc)
			got, want := http.Header{"Tracestate": {"client's"}}, http.Header{}
			Inject(ctx, got)
			traceContext.Inject(ctx, propagation.HeaderCarrier(want))
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("flags %#x: Inject wrote %v, the propagator %v", flags, got, want)
			}
		}
	}
}

// TestStartPerProvider: the tracer Start keeps is its last provider's;
// a span under another provider's span is that provider's.
func TestStartPerProvider(t *testing.T) {
	for range 2 {
		for _, rec := range []*tracetest.SpanRecorder{tracetest.NewSpanRecorder(), tracetest.NewSpanRecorder()} {
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
			ctx, parent := tp.Tracer("test").Start(context.Background(), "server")
			_, span := Start(ctx, "POST", trace.SpanKindClient)
			End(span, "")
			parent.End()
			if ended := rec.Ended(); len(ended) != 2 || ended[0].InstrumentationScope().Name != tracerName {
				t.Fatalf("spans of the provider: %v", ended)
			}
		}
	}
}

// TestEndWith: the caller's attributes and error.type end up on the span,
// whose status is then Error; without an error, the attributes alone.
func TestEndWith(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	ctx, parent := tp.Tracer("test").Start(context.Background(), "server")
	_, failed := Start(ctx, "POST", trace.SpanKindClient)
	EndWith(failed, "connection", []attribute.KeyValue{Upstream.String("http://u/mcp")})
	_, ok := Start(ctx, "POST", trace.SpanKindClient)
	EndWith(ok, "", []attribute.KeyValue{Upstream.String("http://u/mcp")})
	EndWith(nil, "connection", nil)
	parent.End()
	ended := rec.Ended()
	if got := ended[0].Attributes(); len(got) != 2 || got[0] != Upstream.String("http://u/mcp") || got[1] != ErrorType.String("connection") || ended[0].Status().Code != codes.Error {
		t.Errorf("failed exchange: %v %v", got, ended[0].Status())
	}
	if got := ended[1].Attributes(); len(got) != 1 || ended[1].Status().Code != codes.Unset {
		t.Errorf("exchange: %v %v", got, ended[1].Status())
	}
}
