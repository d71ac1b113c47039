package tests

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"
)

// openGetStream opens the standalone GET stream of a legacy session and
// returns a channel that receives every raw line and is closed when the
// stream ends.
func openGetStream(t *testing.T, url, sid string) <-chan string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	req.Header.Set("Accept", "text/event-stream")
	for k, v := range legacyHeaders(sid) {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET stream: status %d", resp.StatusCode)
	}
	lines := make(chan string, 64)
	go func() {
		defer close(lines)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	return lines
}

// TestKeepAliveOnIdleStream: an idle GET stream gets keep-alive comments.
func TestKeepAliveOnIdleStream(t *testing.T) {
	t.Parallel()
	g := startGateway(t, "\t\tupstream "+startDemoServer(t)+"\n\t\tkeepalive_interval 200ms")
	lines := openGetStream(t, g.URL, openLegacySession(t, g.URL))
	deadline := time.After(5 * time.Second)
	for n := 0; n < 2; {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("stream ended")
			}
			if l == ": keep-alive" {
				n++
			}
		case <-deadline:
			t.Fatal("fewer than two keep-alive comments in 5s on an idle stream")
		}
	}
}

// TestReloadKeepsSessionsAndClosesStreams: `caddy reload` ends the open
// streams of the old configuration; the session goes on under the new one.
func TestReloadKeepsSessionsAndClosesStreams(t *testing.T) {
	t.Parallel()
	upstream := startDemoServer(t)
	block := "\t\tupstream " + upstream
	g := startGateway(t, block)
	sid := openLegacySession(t, g.URL)
	lines := openGetStream(t, g.URL, sid)

	g.reload(t, block+"\n\t\tkeepalive_interval 200ms")
	waitClosed(t, lines, 5*time.Second)

	resp := post(t, g.URL, legacyHeaders(sid), `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"greet","arguments":{"name":"reload"}}}`)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("after reload: status %d", resp.StatusCode)
	}
	if msg := nextData(t, readSSE(resp.Body)); !strings.Contains(msg.data, "Hello, reload!") {
		t.Fatalf("after reload: %s", msg.data)
	}
	// The new configuration's streams work too: one stays open until it
	// carries the new configuration's keep-alive.
	lines = openGetStream(t, g.URL, sid)
	deadline := time.After(5 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("a GET stream opened after the reload ended before its first keep-alive")
			}
			if l == ": keep-alive" {
				return
			}
		case <-deadline:
			t.Fatal("no keep-alive within 5s on a GET stream opened after the reload")
		}
	}
}

// TestStopWithOpenStreams: `caddy stop` returns within a second although
// SSE streams are open (Caddy's grace period would wait for them).
func TestStopWithOpenStreams(t *testing.T) {
	// Not in parallel: `caddy stop` must return within 1s.
	g := startGateway(t, "\t\tupstream "+startDemoServer(t))
	sid := openLegacySession(t, g.URL)
	lines := openGetStream(t, g.URL, sid)
	lines2 := openGetStream(t, g.URL, openLegacySession(t, g.URL))
	took := g.stop(t)
	t.Logf("caddy stop took %v", took)
	if took > time.Second {
		t.Fatalf("caddy stop took %v with open streams, want under 1s", took)
	}
	waitClosed(t, lines, time.Second)
	waitClosed(t, lines2, time.Second)
}
