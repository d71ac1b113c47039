package tests

import (
	"fmt"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"
)

// Waiting in tests: on events (channels), or polling with poll, never
// sleeping a fixed time. Every wait has a deadline and fails the test
// with what it waited for.

// wait returns the next value on ch, failing after d.
func wait(t *testing.T, ch <-chan string, d time.Duration, what string) string {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(d):
		t.Fatalf("no %s within %v", what, d)
		return ""
	}
}

// waitLogged waits until Caddy's log names the upstream's port and the
// transport's error (refused, reset, broken pipe or EOF).
func waitLogged(t *testing.T, g *gateway, port string) {
	t.Helper()
	waitFor(t, "a warn log line naming 127.0.0.1:"+port+" and the transport's error", func() bool {
		for line := range strings.SplitSeq(g.Log(), "\n") {
			if strings.Contains(line, `"level":"warn"`) && strings.Contains(line, "127.0.0.1:"+port) &&
				(strings.Contains(line, "refused") || strings.Contains(line, "reset") || strings.Contains(line, "broken pipe") || strings.Contains(line, "EOF")) {
				return true
			}
		}
		return false
	})
}

// poll calls cond every 20ms until it returns true or d has passed, and
// reports whether it returned true.
func poll(d time.Duration, cond func() bool) bool {
	for deadline := time.Now().Add(d); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			return false
		}
	}
	return true
}

// waitFor polls cond until it holds, failing the test after 10s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	waitForWithin(t, 10*time.Second, what, cond)
}

// waitForWithin polls cond until it holds, failing the test after d.
func waitForWithin(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	if !poll(d, cond) {
		t.Fatalf("waited %v for %s", d, what)
	}
}

// waitClosed waits for a stream to end and fails after d.
func waitClosed(t *testing.T, lines <-chan string, d time.Duration) {
	t.Helper()
	deadline := time.After(d)
	for {
		select {
		case _, ok := <-lines:
			if !ok {
				return
			}
		case <-deadline:
			t.Fatalf("stream still open after %v", d)
		}
	}
}

// waitMetrics scrapes the gateway until every series has the wanted value
// (a request is counted when its handler returns, which may be just after
// the client has read the answer), and fails the test after 10s.
func waitMetrics(t *testing.T, g *gateway, want map[string]float64) {
	t.Helper()
	var text string
	poll(10*time.Second, func() bool {
		text = scrape(t, g)
		return metricsMatch(text, want)
	})
	checkMetrics(t, text, want)
}

// waitLogLines waits until g has logged at least n lines of msg, and
// returns them; it fails the test after 10s.
func waitLogLines(t *testing.T, g *gateway, msg string, n int) []map[string]any {
	t.Helper()
	var lines []map[string]any
	if !poll(10*time.Second, func() bool {
		lines = logLines(g, msg)
		return len(lines) >= n
	}) {
		t.Fatalf("%d %q log lines, want %d", len(lines), msg, n)
	}
	return lines
}

// waitHTTP waits until the host:port of rawURL accepts TCP connections.
func waitHTTP(t *testing.T, rawURL string, timeout time.Duration) {
	t.Helper()
	if err := waitTCP(rawURL, timeout, nil); err != nil {
		t.Fatal(err)
	}
}

// waitTCP polls rawURL's host:port; it gives up early when exited is closed.
func waitTCP(rawURL string, timeout time.Duration, exited <-chan struct{}) error {
	u, err := url.Parse(rawURL)
	if err != nil {
		return err
	}
	host := u.Host
	if u.Port() == "" {
		port := "80"
		if u.Scheme == "https" {
			port = "443"
		}
		host = net.JoinHostPort(u.Hostname(), port)
	}
	deadline := time.Now().Add(timeout)
	for {
		c, err := net.DialTimeout("tcp", host, 500*time.Millisecond)
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not accept connections within %v: %w", host, timeout, err)
		}
		select {
		case <-exited:
			return fmt.Errorf("the process exited before %s accepted connections", host)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// waitMetric waits up to 30s for series to reach want on g (the probe of
// an expired state runs 10s after its expiry).
func waitMetric(t *testing.T, g *gateway, series string, want float64) {
	t.Helper()
	var got float64
	if !poll(30*time.Second, func() bool {
		got = fleetMetric(t, []*gateway{g}, series, want)
		return got == want
	}) {
		t.Fatalf("%s = %v, want %v", series, got, want)
	}
}

// waitLog waits until g's log contains want, failing after 5s.
func waitLog(t *testing.T, g *gateway, want string) {
	t.Helper()
	waitForWithin(t, 5*time.Second, "the gateway to log "+want, func() bool { return strings.Contains(g.Log(), want) })
}
