package legacy

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
)

// sseServer answers every request with an SSE stream: one event, then one
// more for each value sent on more, until the test ends.
func sseServer(t *testing.T, more <-chan string) string {
	t.Helper()
	stop := make(chan struct{})
	srv, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write([]byte("data: {\"jsonrpc\":\"2.0\",\"method\":\"first\"}\n\n"))
		w.(http.Flusher).Flush()
		for {
			select {
			case m := <-more:
				w.Write([]byte("data: {\"jsonrpc\":\"2.0\",\"method\":\"" + m + "\"}\n\n"))
				w.(http.Flusher).Flush()
			case <-stop:
				return
			case <-r.Context().Done():
				return
			}
		}
	})
	t.Cleanup(func() { close(stop) })
	return srv.URL
}

func openStream(t *testing.T, url string) (*http.Response, *MessageReader) {
	t.Helper()
	resp := post(t, NewConnClient(ConnOptions{}), context.Background(), url, "{}")
	rd := NewMessageReader(resp, 1<<20)
	if m, err := rd.Next(); err != nil || m.Method != "first" {
		t.Fatalf("first message: %v, %q", err, m.Method)
	}
	return resp, rd
}

// A reader that waits for its connection before each Next still gets every
// message: the wait ends when the next one arrives.
func TestWaitReadableThenNext(t *testing.T) {
	more := make(chan string, 1)
	resp, rd := openStream(t, sseServer(t, more))
	defer resp.Body.Close()
	waited := make(chan struct{})
	go func() {
		rd.WaitReadable()
		close(waited)
	}()
	more <- "second"
	<-waited
	if m, err := rd.Next(); err != nil || m.Method != "second" {
		t.Fatalf("second message: %v, %q", err, m.Method)
	}
	// Two messages in one read: the second is buffered, WaitReadable
	// returns at once.
	more <- "third"
	rd.WaitReadable()
	if m, err := rd.Next(); err != nil || m.Method != "third" {
		t.Fatalf("third message: %v, %q", err, m.Method)
	}
}

// Closing the body ends a wait, and the next read fails.
func TestWaitReadableEndsOnClose(t *testing.T) {
	resp, rd := openStream(t, sseServer(t, nil))
	waited := make(chan struct{})
	go func() {
		rd.WaitReadable()
		close(waited)
	}()
	resp.Body.Close()
	<-waited
	if _, err := rd.Next(); err == nil {
		t.Fatal("Next after Close: no error")
	}
}

// nextWaiting is Next for a reader that yields: it waits whenever Next
// would block.
func nextWaiting(rd *MessageReader) (jsonrpc.Message, error) {
	for {
		m, err := rd.Next()
		if err != ErrWouldBlock {
			return m, err
		}
		rd.WaitReadable()
	}
}

// With YieldWhenIdle, Next returns ErrWouldBlock instead of waiting, and
// goes on once the connection has bytes; comments in between are skipped.
func TestYieldWhenIdle(t *testing.T) {
	more := make(chan string, 1)
	resp, rd := openStream(t, sseServer(t, more))
	defer resp.Body.Close()
	rd.YieldWhenIdle()
	if _, err := rd.Next(); err != ErrWouldBlock {
		t.Fatalf("Next with nothing sent: %v, want ErrWouldBlock", err)
	}
	more <- "second"
	if m, err := nextWaiting(rd); err != nil || m.Method != "second" {
		t.Fatalf("second message: %v, %q", err, m.Method)
	}
	resp.Body.Close()
	if _, err := nextWaiting(rd); err == nil || err == ErrWouldBlock {
		t.Fatalf("Next after Close: %v", err)
	}
}

// TestParkedCallWaitsShallow: a parked call's reader, once the upstream
// has sent nothing but a comment after its question, waits for the
// connection on a goroutine of its own (awaitStream), not inside the SSE
// reader's read — where its stack would be 8 KiB instead of 2.
func TestParkedCallWaitsShallow(t *testing.T) {
	comment := make(chan struct{})
	sent := make(chan struct{})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: {\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"elicitation/create\",\"params\":{}}\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-comment:
		case <-r.Context().Done():
			return
		}
		fmt.Fprint(w, ": keep-alive\n\n")
		w.(http.Flusher).Flush()
		close(sent)
		<-r.Context().Done()
	}))
	t.Cleanup(ts.Close)
	s := &Session{URL: ts.URL, client: NewConnClient(ConnOptions{})}
	c, err := s.Call(t.Context(), "tools/call", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if m, err := c.Next(); err != nil || m.Kind != jsonrpc.KindRequest {
		t.Fatalf("question: %v %q", err, m.Raw)
	}
	c.Park()
	close(comment)
	<-sent
	deadline := time.Now().Add(5 * time.Second)
	for {
		var b strings.Builder
		pprof.Lookup("goroutine").WriteTo(&b, 2)
		dump := b.String()
		waiting, deep := false, false
		for _, g := range strings.Split(dump, "\n\n") {
			if !strings.Contains(g, "legacy.(*Call).") {
				continue
			}
			waiting = waiting || strings.Contains(g, "legacy.(*Call).awaitStream") && strings.Contains(g, "legacy.(*body).WaitReadable")
			deep = deep || strings.Contains(g, "sse.(*Reader).fill")
		}
		// Readers of other tests' calls may still be ending: the loop
		// looks again until the deadline.
		if waiting && !deep {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no reader waits in awaitStream, or one waits in the SSE reader:\n%s", dump)
		}
		runtime.Gosched()
	}
}
