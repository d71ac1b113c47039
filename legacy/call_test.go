package legacy

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
)

// notifyingServer answers every POST with an SSE stream of n progress
// notifications, sent as soon as release is closed, then holds the stream
// open until the client leaves.
func notifyingServer(t *testing.T, n int, release <-chan struct{}) *Session {
	t.Helper()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		for i := range n {
			fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progress\":%d}}\n\n", i)
		}
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	t.Cleanup(ts.Close)
	s := &Session{URL: ts.URL, client: ts.Client()}
	s.buffer.Store(4)
	return s
}

// TestCallBackpressure: a call that is read waits for room; every
// notification arrives, however many more than the buffer.
func TestCallBackpressure(t *testing.T) {
	release := make(chan struct{})
	close(release)
	c, err := notifyingServer(t, 20, release).Call(t.Context(), "tools/call", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	time.Sleep(100 * time.Millisecond) // the reader fills the buffer and waits
	for i := range 20 {
		select {
		case m := <-c.Messages():
			if m.Kind != jsonrpc.KindNotification {
				t.Fatalf("message %d: %s", i, m.Raw)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("notification %d did not arrive: %v", i, c.Err())
		}
	}
}

// TestCallUnreadBacklog: a call nobody reads ends with ErrBacklog when the
// buffer overflows, whether the notifications come after Park or were
// already waiting for room; OnFailure runs once, even when set afterwards.
func TestCallUnreadBacklog(t *testing.T) {
	for _, waiting := range []bool{false, true} {
		t.Run(fmt.Sprint("already waiting ", waiting), func(t *testing.T) {
			release := make(chan struct{})
			c, err := notifyingServer(t, 20, release).Call(t.Context(), "tools/call", nil)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			var failures atomic.Int32
			if waiting {
				close(release)
				time.Sleep(100 * time.Millisecond) // the reader waits for room
				c.OnFailure(func() { failures.Add(1) })
				c.Park()
			} else {
				c.Park()
				c.OnFailure(func() { failures.Add(1) })
				close(release)
			}
			deadline := time.Now().Add(5 * time.Second)
			for failures.Load() == 0 {
				if time.Now().After(deadline) {
					t.Fatal("no failure within 5s")
				}
				time.Sleep(10 * time.Millisecond)
			}
			n := len(c.Unpark())
			for range c.Messages() {
				n++
			}
			if !errors.Is(c.Err(), ErrBacklog) || n != 4 {
				t.Fatalf("ended with %v after %d messages, want ErrBacklog after 4", c.Err(), n)
			}
			late := make(chan struct{})
			c.OnFailure(func() { close(late) })
			select {
			case <-late:
			default:
				t.Fatal("OnFailure set after the failure did not run at once")
			}
			if failures.Load() != 1 {
				t.Fatalf("OnFailure ran %d times", failures.Load())
			}
		})
	}
}
