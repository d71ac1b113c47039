package support

import (
	"compress/gzip"
	"encoding/hex"
	"io"
	"net/http"
	"strconv"
	"sync"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/protobuf/proto"
)

// TraceReceiver is an OpenTelemetry receiver of traces over OTLP/HTTP
// (protobuf, the exporters' default), built on the OTLP messages of
// go.opentelemetry.io/proto/otlp: the spans a Caddy process exports reach
// a test without a Collector or Jaeger to build or install. It decodes what
// it receives and keeps every span.
type TraceReceiver struct {
	// URL is the receiver's base URL, http://127.0.0.1:PORT: the
	// OTEL_EXPORTER_OTLP_ENDPOINT of an exporter (which posts to
	// URL/v1/traces).
	URL string

	mu    sync.Mutex
	spans []Span
}

// Span is one span a TraceReceiver received, its ids in lowercase hex.
type Span struct {
	TraceID, SpanID, ParentSpanID string
	Name                          string
	// Kind is the span kind's name: SPAN_KIND_SERVER, SPAN_KIND_CLIENT, …
	Kind string
	// Attrs are the span's attributes, every value as text.
	Attrs map[string]string
	// Links are the trace ids of the span's links.
	Links []string
	// Events are the names of the span's events, in order.
	Events []string
	// Error is set when the span's status is Error.
	Error bool
	// Scope is the name of the instrumentation scope that made the span.
	Scope string
}

// NewTraceReceiver serves a TraceReceiver on a fresh port of 127.0.0.1
// until the test ends.
func NewTraceReceiver(t testing.TB) *TraceReceiver {
	t.Helper()
	tr := &TraceReceiver{}
	url := Serve(t, http.HandlerFunc(tr.serve))
	tr.URL = url[:len(url)-len("/mcp")]
	return tr
}

// Env is the environment that points a Caddy process's tracing exporter
// at the receiver, exporting every 100ms.
func (tr *TraceReceiver) Env() []string {
	return []string{
		"OTEL_TRACES_EXPORTER=otlp",
		"OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf",
		"OTEL_EXPORTER_OTLP_ENDPOINT=" + tr.URL,
		"OTEL_BSP_SCHEDULE_DELAY=100",
	}
}

// Spans returns the spans received so far.
func (tr *TraceReceiver) Spans() []Span {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return append([]Span(nil), tr.spans...)
}

// ReadExport reads the OTLP/HTTP traces export r posts: protobuf, plain
// or gzip (OTEL_EXPORTER_OTLP_COMPRESSION=gzip), at most 64 MiB.
func ReadExport(r *http.Request) (*coltracepb.ExportTraceServiceRequest, error) {
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			return nil, err
		}
		body = zr
	}
	data, err := io.ReadAll(io.LimitReader(body, 64<<20))
	if err != nil {
		return nil, err
	}
	var req coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(data, &req); err != nil {
		return nil, err
	}
	return &req, nil
}

func (tr *TraceReceiver) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" {
		http.Error(w, "not an OTLP traces export", http.StatusNotFound)
		return
	}
	req, err := ReadExport(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var got []Span
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				sp := Span{
					TraceID: hex.EncodeToString(s.GetTraceId()), SpanID: hex.EncodeToString(s.GetSpanId()),
					ParentSpanID: hex.EncodeToString(s.GetParentSpanId()), Name: s.GetName(), Kind: s.GetKind().String(),
					Attrs: map[string]string{}, Error: s.GetStatus().GetCode() == 2, Scope: ss.GetScope().GetName(),
				}
				for _, kv := range s.GetAttributes() {
					sp.Attrs[kv.GetKey()] = anyText(kv.GetValue())
				}
				for _, l := range s.GetLinks() {
					sp.Links = append(sp.Links, hex.EncodeToString(l.GetTraceId()))
				}
				for _, e := range s.GetEvents() {
					sp.Events = append(sp.Events, e.GetName())
				}
				got = append(got, sp)
			}
		}
	}
	tr.mu.Lock()
	tr.spans = append(tr.spans, got...)
	tr.mu.Unlock()
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// anyText is an attribute value as text.
func anyText(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return strconv.FormatInt(x.IntValue, 10)
	case *commonpb.AnyValue_BoolValue:
		return strconv.FormatBool(x.BoolValue)
	case *commonpb.AnyValue_DoubleValue:
		return strconv.FormatFloat(x.DoubleValue, 'g', -1, 64)
	}
	return v.String()
}
