package reverse

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// TestPostModernSpan: with tracing on, a POST to the modern upstream is a
// client span under the request's, named after its method, with its id and
// round and no payload; the upstream gets that span's traceparent and not
// the client's trace context, and the round's header is left as it was
// (the next round's). Without tracing the header goes as it is.
func TestPostModernSpan(t *testing.T) {
	var got http.Header
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":"gw-1","result":{}}`))
	}))
	defer up.Close()
	const client = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	hdr := modernHeader(http.Header{"Traceparent": {client}, "Tracestate": {"evil=1"}}, "tools/call", "ask", true)
	body := []byte(`{"jsonrpc":"2.0","id":"gw-1","method":"tools/call","params":{"name":"ask","arguments":{"secret":"payload"}}}`)

	a, err := postModern(withRound(context.Background(), 1), up.Client(), up.URL, hdr, body)
	if err != nil {
		t.Fatal(err)
	}
	a.close()
	if got.Get("Traceparent") != client {
		t.Errorf("without tracing the upstream got traceparent %q, want the client's", got.Get("Traceparent"))
	}

	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	ctx, parent := tp.Tracer("test").Start(context.Background(), "client request")
	if a, err = postModern(withRound(ctx, 2), up.Client(), up.URL, hdr, body); err != nil {
		t.Fatal(err)
	}
	a.close()
	parent.End()
	spans := rec.Ended()
	if len(spans) != 2 {
		t.Fatalf("%d spans ended, want the POST's and its parent", len(spans))
	}
	s := spans[0]
	if s.Name() != "tools/call" || s.Parent().SpanID() != parent.SpanContext().SpanID() {
		t.Errorf("span %q under %s, want tools/call under %s", s.Name(), s.Parent().SpanID(), parent.SpanContext().SpanID())
	}
	want := map[attribute.Key]string{"mcp.method.name": "tools/call", "jsonrpc.request.id": "gw-1", "mcp_gateway.round": "2",
		"mcp_gateway.upstream": up.URL, "mcp.protocol.version": "2026-07-28"}
	for _, kv := range s.Attributes() {
		if strings.Contains(kv.Value.Emit(), "payload") {
			t.Errorf("attribute %s carries the payload", kv.Key)
		}
		if v, ok := want[kv.Key]; ok && v != kv.Value.Emit() {
			t.Errorf("attribute %s = %q, want %q", kv.Key, kv.Value.Emit(), v)
		}
		delete(want, kv.Key)
	}
	if len(want) != 0 {
		t.Errorf("attributes missing: %v", want)
	}
	if tp := "00-" + s.SpanContext().TraceID().String() + "-" + s.SpanContext().SpanID().String() + "-01"; got.Get("Traceparent") != tp || got.Get("Tracestate") != "" {
		t.Errorf("the upstream got traceparent %q tracestate %q, want %q and none", got.Get("Traceparent"), got.Get("Tracestate"), tp)
	}
	if hdr.Get("Traceparent") != client {
		t.Errorf("the round's header was changed: %q", hdr.Get("Traceparent"))
	}
}
