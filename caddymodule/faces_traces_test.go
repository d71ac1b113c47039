package caddymodule

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/caddymodule/face/rest"
)

// TestPathSpan: with tracing on, a request the REST face serves is a span
// of the face's under Caddy's (mcp_gateway.face rest), named after its
// HTTP method (no tool: none is named), an error with error.type when the
// answer is one; without tracing nothing is recorded.
func TestPathSpan(t *testing.T) {
	h := oneUpstream()
	h.Faces.REST = &rest.Config{BasePath: "/api"}
	h.Fleet.StateKeys = []string{testStateKey}
	if err := provisioned(t, h); err != nil {
		t.Fatal(err)
	}
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	ctx, caddySpan := tp.Tracer("caddy").Start(context.Background(), "handler")
	w := httptest.NewRecorder()
	if err := h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/api/nosuch", nil).WithContext(ctx), nil); err != nil || w.Code != http.StatusNotFound {
		t.Fatalf("GET /api/nosuch: %d %v", w.Code, err)
	}
	caddySpan.End()
	spans := rec.Ended()
	if len(spans) != 2 {
		t.Fatalf("%d spans, want the face's and Caddy's", len(spans))
	}
	s := spans[0]
	attrs := map[string]string{}
	for _, kv := range s.Attributes() {
		attrs[string(kv.Key)] = kv.Value.Emit()
	}
	if s.Name() != "GET" || s.Parent().SpanID() != caddySpan.SpanContext().SpanID() || attrs["mcp_gateway.face"] != "rest" ||
		attrs["error.type"] != "404" || s.Status().Description != "404" {
		t.Errorf("span %q under %s: %v, status %+v", s.Name(), s.Parent().SpanID(), attrs, s.Status())
	}

	w = httptest.NewRecorder()
	_ = h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/api/nosuch", nil), nil)
	if w.Code != http.StatusNotFound || len(rec.Ended()) != 2 {
		t.Errorf("without tracing: %d, %d spans", w.Code, len(rec.Ended()))
	}
}
