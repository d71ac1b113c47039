package traces

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// exportedCall returns the ended spans of one pass-through call as
// Caddy's provider exports them: Caddy's server span (with otelhttp's
// attributes), the gateway's request span and its upstream POST.
func exportedCall(b *testing.B) []sdktrace.ReadOnlySpan {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithResource(resource.Default()))
	ctx, server := tp.Tracer("go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp").Start(context.Background(), "handler",
		trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(
			attribute.String("http.request.method", "POST"), attribute.String("url.scheme", "http"),
			attribute.String("server.address", "127.0.0.1"), attribute.Int("server.port", 19711),
			attribute.String("network.peer.address", "127.0.0.1"), attribute.Int("network.peer.port", 51234),
			attribute.String("user_agent.original", "Go-http-client/1.1"), attribute.String("client.address", "127.0.0.1"),
			attribute.String("url.path", "/mcp"), attribute.String("network.protocol.version", "1.1"),
			attribute.Int("http.request.body.size", 180), attribute.Int("http.response.status_code", 200),
			attribute.Int("http.response.body.size", 240)))
	request(ctx, http.Header{})
	server.End()
	if len(rec.Ended()) != 3 {
		b.Fatalf("%d spans", len(rec.Ended()))
	}
	return rec.Ended()
}

// processCPU is the CPU time the process has used, in nanoseconds: on a
// shared machine it moves less than the time elapsed.
func processCPU() int64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// dropTraces is an OTLP/gRPC receiver that drops every export (with
// skipDecode, without decoding it, as the HTTP one does).
type dropTraces struct {
	coltracepb.UnimplementedTraceServiceServer
}

// skipDecode is a gRPC server codec that does not decode requests.
type skipDecode struct{}

func (skipDecode) Marshal(v any) ([]byte, error) { return proto.Marshal(v.(proto.Message)) }
func (skipDecode) Unmarshal([]byte, any) error   { return nil }
func (skipDecode) Name() string                  { return "proto" }

func (dropTraces) Export(context.Context, *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

// BenchmarkExport is what the OTLP exporter costs per span exported
// (pass-through calls' spans, in batches the size of the batch span
// processor's OTEL_BSP_MAX_EXPORT_BATCH_SIZE), over HTTP or gRPC
// (OTEL_EXPORTER_OTLP_PROTOCOL), plain or gzip-compressed
// (OTEL_EXPORTER_OTLP_COMPRESSION), to a receiver in process that reads
// and drops each export: cpu-ns/span is the process's CPU time (the
// exporter's, the receiver's reading, the collector's) per span.
func BenchmarkExport(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer srv.Close()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	gsrv := grpc.NewServer(grpc.ForceServerCodec(skipDecode{}))
	coltracepb.RegisterTraceServiceServer(gsrv, dropTraces{})
	go func() { _ = gsrv.Serve(lis) }()
	defer gsrv.Stop()
	call := exportedCall(b)
	for _, c := range []struct {
		name  string
		batch int
		grpc  bool
		gzip  bool
	}{
		{"http/batch=512", 512, false, false}, {"http/batch=512/gzip", 512, false, true},
		{"http/batch=2048", 2048, false, false}, {"http/batch=2048/gzip", 2048, false, true},
		{"grpc/batch=512", 512, true, false}, {"grpc/batch=512/gzip", 512, true, true},
	} {
		b.Run(c.name, func(b *testing.B) {
			var exp sdktrace.SpanExporter
			var err error
			switch {
			case c.grpc && c.gzip:
				exp, err = otlptracegrpc.New(context.Background(), otlptracegrpc.WithEndpoint(lis.Addr().String()), otlptracegrpc.WithInsecure(), otlptracegrpc.WithCompressor("gzip"))
			case c.grpc:
				exp, err = otlptracegrpc.New(context.Background(), otlptracegrpc.WithEndpoint(lis.Addr().String()), otlptracegrpc.WithInsecure())
			case c.gzip:
				exp, err = otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(srv.URL+"/v1/traces"), otlptracehttp.WithCompression(otlptracehttp.GzipCompression))
			default:
				exp, err = otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(srv.URL+"/v1/traces"))
			}
			if err != nil {
				b.Fatal(err)
			}
			defer exp.Shutdown(context.Background())
			batch := make([]sdktrace.ReadOnlySpan, c.batch)
			for i := range batch {
				batch[i] = call[i%len(call)]
			}
			b.ReportAllocs()
			cpu := processCPU()
			for b.Loop() {
				if err := exp.ExportSpans(context.Background(), batch); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(processCPU()-cpu)/float64(b.N*c.batch), "cpu-ns/span")
		})
	}
}
