package legacy

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/traces"
)

// TestSessionTraceContextPerRequest: a session sends each POST the trace
// context its context carries (the request it serves), never the one in the
// header it was opened with (its opener's, stale for every later call on a
// pooled session), and none when the context has none. The upstream is a
// go-sdk server wrapped to record each POST's traceparent.
func TestSessionTraceContextPerRequest(t *testing.T) {
	server, _ := goSDKServer(t)
	var mu sync.Mutex
	got := map[string][]string{} // method → traceparents, in order
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			var msg struct{ Method string }
			_ = json.Unmarshal(body, &msg)
			mu.Lock()
			got[msg.Method] = append(got[msg.Method], r.Header.Get("Traceparent"))
			mu.Unlock()
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)

	const (
		opener = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
		second = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	)
	withTrace := func(tp string) context.Context {
		return traces.Extract(context.Background(), http.Header{"Traceparent": {tp}})
	}
	s, err := Open(withTrace(opener), http.DefaultClient, ts.URL, http.Header{"Traceparent": {opener}}, nil, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	call := func(ctx context.Context) {
		c, err := s.Call(ctx, "tools/call", []byte(`{"name":"caps","arguments":{}}`))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Final(); err != nil {
			t.Fatal(err)
		}
		c.Close()
	}
	call(context.Background())
	call(withTrace(second))

	mu.Lock()
	defer mu.Unlock()
	if tp := got["initialize"]; len(tp) != 1 || tp[0] != opener {
		t.Errorf("initialize sent traceparent %q, want the opener's %q", tp, opener)
	}
	if tp := got["tools/call"]; len(tp) != 2 || tp[0] != "" || tp[1] != second {
		t.Errorf("the calls sent traceparents %q, want none (no trace context), then %q", tp, second)
	}
}

// TestSessionSpans: under a recording span (Caddy's tracing), each POST of
// a session — initialize, notifications/initialized, the call, the answer
// to its in-line question — and the GET that reopens the call's stream
// after the question (Reopen) is a client span under it, named after what
// it sent.
func TestSessionSpans(t *testing.T) {
	ts := resumableServer(t)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	ctx, parent := tp.Tracer("test").Start(t.Context(), "request")
	s, err := Open(ctx, ts.Client(), ts.URL, nil, []byte(`{"elicitation":{}}`), nil, false)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	c, err := s.Call(ctx, "tools/call", []byte(`{"name":"ask","arguments":{}}`))
	if err != nil {
		t.Fatal(err)
	}
	q := nextWithin(t, c)
	c.Close()
	if err := s.Respond(ctx, q.ID, []byte(`{"action":"accept","content":{"a":"ada"}}`), nil); err != nil {
		t.Fatal(err)
	}
	r, err := s.Reopen(ctx, c.ID, q.After)
	if err != nil {
		t.Fatal(err)
	}
	nextWithin(t, r) // the question again
	nextWithin(t, r) // the result
	r.Close()
	parent.End()

	var names []string
	for _, sp := range rec.Ended() {
		if sp.Parent().SpanID() == parent.SpanContext().SpanID() {
			names = append(names, sp.Name())
		}
	}
	want := []string{"initialize", "notifications/initialized", "tools/call", "response", "resume"}
	if len(names) != len(want) {
		t.Fatalf("spans under the request: %q, want %q", names, want)
	}
	for i := range want {
		if names[i] != want[i] {
			t.Fatalf("spans under the request: %q, want %q", names, want)
		}
	}
}
