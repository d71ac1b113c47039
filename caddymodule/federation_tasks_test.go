package caddymodule

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestTaskIDWriter(t *testing.T) {
	for name, c := range map[string]struct {
		ctype  string
		chunks []string
		want   string
	}{
		"json": {"application/json", []string{`{"jsonrpc":"2.0","id":1,"result":{"resultType":"task",`, `"taskId":"abc","status":"working"}}`},
			`{"jsonrpc":"2.0","id":1,"result":{"resultType":"task","taskId":"go:abc","status":"working"}}`},
		"sse split mid-line": {"text/event-stream", []string{"event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tasks\",\"params\":{\"task", "Id\":\"t1\"}}\n\n", "data: {\"id\":2,\"result\":{\"taskId\":\"t2\"}}\r\n\r\n"},
			"event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tasks\",\"params\":{\"taskId\":\"go:t1\"}}\n\ndata: {\"id\":2,\"result\":{\"taskId\":\"go:t2\"}}\r\n\r\n"},
		"no task":  {"application/json", []string{`{"jsonrpc":"2.0","id":1,"result":{"content":[]}}`}, `{"jsonrpc":"2.0","id":1,"result":{"content":[]}}`},
		"not json": {"text/event-stream", []string{"data: {\"taskId\": oops\n\n"}, "data: {\"taskId\": oops\n\n"},
	} {
		t.Run(name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			w := &taskIDWriter{ResponseWriter: rec, server: "go"}
			w.Header().Set("Content-Type", c.ctype)
			w.Header().Set("Content-Length", "99")
			w.WriteHeader(http.StatusOK)
			for _, ch := range c.chunks {
				if n, err := w.Write([]byte(ch)); err != nil || n != len(ch) {
					t.Fatalf("write: %d %v", n, err)
				}
			}
			w.finish()
			if got := rec.Body.String(); got != c.want {
				t.Errorf("got  %q\nwant %q", got, c.want)
			}
			if c.ctype == "application/json" && rec.Header().Get("Content-Length") != "" {
				t.Error("Content-Length kept on a rewritten body")
			}
		})
	}
}

// TestTaskIDWriterRelayed: an answer relayed from the instance owning the
// call (asIs) has its taskIds in the block's namespace already: passed on
// byte for byte, not namespaced twice.
func TestTaskIDWriterRelayed(t *testing.T) {
	rec := httptest.NewRecorder()
	w := &taskIDWriter{ResponseWriter: rec, server: "go", asIs: true}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	const answer = `{"jsonrpc":"2.0","id":1,"result":{"resultType":"task","taskId":"go:abc"}}`
	if _, err := w.Write([]byte(answer)); err != nil {
		t.Fatal(err)
	}
	w.finish()
	if got := rec.Body.String(); got != answer {
		t.Errorf("got  %q\nwant %q", got, answer)
	}
}

func TestInProcessStreams(t *testing.T) {
	step := make(chan struct{})
	rt := inProcess{serve: func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusAccepted)
		_, _ = w.Write([]byte("data: one\n\n"))
		<-step
		_, _ = w.Write([]byte("data: two\n\n"))
	}}
	req := httptest.NewRequest(http.MethodPost, "http://x.invalid/mcp", strings.NewReader("{}"))
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d, header %v", resp.StatusCode, resp.Header)
	}
	// The first event arrives before the handler wrote the second.
	buf := make([]byte, 11)
	if _, err := resp.Body.Read(buf); err != nil || string(buf) != "data: one\n\n" {
		t.Fatalf("first read %q %v", buf, err)
	}
	close(step)
	rest := new(strings.Builder)
	b := make([]byte, 64)
	for {
		n, err := resp.Body.Read(b)
		rest.Write(b[:n])
		if err != nil {
			break
		}
	}
	if rest.String() != "data: two\n\n" {
		t.Fatalf("rest %q", rest.String())
	}
}

func TestInProcessPanicEndsBody(t *testing.T) {
	rt := inProcess{serve: func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("partial"))
		panic(http.ErrAbortHandler)
	}}
	resp, err := rt.RoundTrip(httptest.NewRequest(http.MethodPost, "http://x.invalid/mcp", nil))
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 64)
	var got string
	for {
		n, err := resp.Body.Read(b)
		got += string(b[:n])
		if err != nil {
			if err != errAborted {
				t.Fatalf("body ended with %v, want errAborted", err)
			}
			break
		}
	}
	if got != "partial" {
		t.Fatalf("got %q", got)
	}
}
