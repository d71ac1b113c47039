package tests

import (
	"testing"
	"time"
)

// TestKeepAliveOff: `keepalive_interval -1` (Caddy's "off", as
// reverse_proxy's `flush_interval -1`) really sends no keep-alive: an idle
// legacy GET stream through the gateway stays silent for ten times the
// short interval of the positive control, and stays open. Then, with
// `keepalive_interval 200ms` on the same gateway (a reload), a new idle
// stream gets a `: keep-alive` comment.
func TestKeepAliveOff(t *testing.T) {
	block := "\t\tupstream " + startDemoServer(t)
	g := startGateway(t, block+"\n\t\tkeepalive_interval -1")
	lines := openGetStream(t, g.URL, openLegacySession(t, g.URL))
	silence := time.After(2 * time.Second) // 10× the control's interval
	for quiet := false; !quiet; {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("the idle stream ended before the deadline: nothing was checked")
			}
			if l == ": keep-alive" {
				t.Fatal("a keep-alive comment arrived with keepalive_interval -1 (off)")
			}
		case <-silence:
			quiet = true
		}
	}

	// Positive control: the same stream, with a short interval.
	g.reload(t, block+"\n\t\tkeepalive_interval 200ms")
	lines = openGetStream(t, g.URL, openLegacySession(t, g.URL))
	deadline := time.After(5 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("the stream ended before a keep-alive")
			}
			if l == ": keep-alive" {
				return
			}
		case <-deadline:
			t.Fatal("no keep-alive comment in 5s with keepalive_interval 200ms")
		}
	}
}
