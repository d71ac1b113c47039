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
