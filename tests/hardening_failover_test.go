package tests

// Hardening: how upstream failures reach
// clients. A dead upstream's address and the transport's words about it go
// to the operator's log, never to a client; and a forward-bridge call whose
// new upstream session cannot be opened moves to another upstream, as the
// pass-through cells' new sessions and requests do.

import (
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// deadUpstream is an upstream URL nothing useful answers at.
type deadUpstream struct {
	name     string
	url      string
	port     string
	accepted *atomic.Int32 // connections that reached it (nil: nothing listens)
}

// closedPortUpstream is an upstream URL on a loopback port nothing listens on: every
// connection is refused.
func closedPortUpstream(t *testing.T) deadUpstream {
	t.Helper()
	port := strconv.Itoa(freePort(t))
	return deadUpstream{name: "closed port", url: "http://127.0.0.1:" + port + "/mcp", port: port}
}

// resettingUpstream is a hostile fixture written for these tests: a loopback
// listener that accepts every connection and resets it at once (SO_LINGER 0),
// before reading or answering a byte — an upstream that drops every request.
// It counts the connections it accepted.
func resettingUpstream(t *testing.T) deadUpstream {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	accepted := new(atomic.Int32)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetLinger(0)
			}
			c.Close()
		}
	}()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return deadUpstream{name: "accepts and resets", url: "http://" + ln.Addr().String() + "/mcp", port: port, accepted: accepted}
}

// deadUpstreams returns one of each kind.
func deadUpstreams(t *testing.T) []deadUpstream {
	return []deadUpstream{closedPortUpstream(t), resettingUpstream(t)}
}

func (d deadUpstream) block(era string) string {
	return "\t\tupstream " + d.url + " {\n\t\t\tera " + era + "\n\t\t}"
}

// checkHidden fails unless what the client received names nothing of the
// upstream: no address, no port, no transport error.
func checkHidden(t *testing.T, what, body, port string) {
	t.Helper()
	for _, leak := range []string{"127.0.0.1", "dial tcp", "connection refused", "connection reset", "broken pipe", "EOF", "http://"} {
		if strings.Contains(body, leak) {
			t.Errorf("%s carries %q: %s", what, leak, body)
		}
	}
	if regexp.MustCompile(`(^|[^0-9])` + port + `([^0-9]|$)`).MatchString(body) {
		t.Errorf("%s carries the upstream's port %s: %s", what, port, body)
	}
}

// TestHardeningUpstreamErrorsHidden: in every cell, a client whose upstream
// is a closed port, or accepts and resets, gets a JSON-RPC error that names
// neither the upstream's address nor the transport's error, while the Caddy
// log (warn) has both; an `era auto` upstream that is dead is probed without
// making the client wait. Also when the upstream dies after the session
// began (the two bridges, which hold their own sessions).
func TestHardeningUpstreamErrorsHidden(t *testing.T) {
	t.Parallel()
	modern := func(t *testing.T, g *gateway) rpcExchange {
		return readRPC(t, modernCall(t, g.URL, 7, "whoami", map[string]any{}, nil), 7)
	}
	legacyInitialize := func(t *testing.T, g *gateway) rpcExchange {
		return postRPC(t, g.URL, nil, strings.Replace(legacyInit, `"id":1`, `"id":7`, 1), 7)
	}
	cells := []struct {
		name, era string
		request   func(*testing.T, *gateway) rpcExchange
	}{
		{"modern client, legacy upstream (forward bridge)", "legacy", modern},
		{"legacy client pinned", "legacy", legacyInitialize},
		{"modern pass-through", "modern", modern},
		{"legacy client, modern upstream (reverse bridge)", "modern", legacyInitialize},
		// The era probe fails: no upstream can take the request.
		{"modern client, era auto", "auto", modern},
		{"legacy client, era auto", "auto", legacyInitialize},
	}
	for _, c := range cells {
		for _, dead := range deadUpstreams(t) {
			t.Run(c.name+", "+dead.name, func(t *testing.T) {
				g := startGateway(t, dead.block(c.era))
				start := time.Now()
				x := c.request(t, g)
				if took := time.Since(start); took > 3*time.Second {
					t.Errorf("the client waited %v for its error", took)
				}
				// 502, or 503 when the failed upstream, marked down, leaves
				// none to try.
				if x.Status != http.StatusServiceUnavailable {
					checkRPCError(t, x, http.StatusBadGateway, -32603, 7)
				} else {
					checkRPCError(t, x, http.StatusServiceUnavailable, -32603, 7)
				}
				checkHidden(t, "the client's answer", x.Raw, dead.port)
				waitLogged(t, g, dead.port)
			})
		}
	}

	t.Run("forward bridge, upstream dies mid-call", func(t *testing.T) {
		up := newFailingLegacy(t)
		g := startGateway(t, up.block())
		_, port, _ := net.SplitHostPort(strings.TrimSuffix(strings.TrimPrefix(up.url, "http://"), "/mcp"))
		events := readSSE(modernCall(t, g.URL, 1, "hold", map[string]any{}, nil).Body)
		nextData(t, events) // the upstream is working
		up.kill()
		final := awaitResponse(t, events, 1)
		if !strings.Contains(final, `"code":-32603`) {
			t.Fatalf("the stream ended with %q, want a -32603 error", final)
		}
		checkHidden(t, "the final event", final, port)
	})
	t.Run("reverse bridge, upstream gone after initialize", func(t *testing.T) {
		up := newModernUpstream(t)
		g := startGateway(t, up.block())
		_, port, _ := net.SplitHostPort(strings.TrimSuffix(strings.TrimPrefix(up.url, "http://"), "/mcp"))
		sid, _ := initReverse(t, g.URL, "2025-11-25", `{"elicitation":{}}`, nil)
		up.kill()
		x := postRPC(t, g.URL, legacyHeaders(sid), `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"confirm","arguments":{}}}`, 3)
		checkRPCError(t, x, http.StatusBadGateway, -32603, 3)
		checkHidden(t, "the client's answer", x.Raw, port)
		waitLogged(t, g, port)
	})
}

// TestHardeningForwardFailover: with two legacy upstreams, one live (a go-sdk
// server) and one dead (a closed port, or a fixture that accepts and resets),
// every modern call through the forward bridge succeeds: a new upstream
// session that cannot be opened is marked down and opened on the other
// upstream. A call that asks for input parks on the live upstream after
// failing over, and its retry completes there.
func TestHardeningForwardFailover(t *testing.T) {
	t.Parallel()
	answered := map[string]any{"inputResponses": map[string]any{"elicitation-1": acceptAnswer}}
	for _, dead := range deadUpstreams(t) {
		t.Run(dead.name, func(t *testing.T) {
			t.Run("calls", func(t *testing.T) {
				live := newFailingLegacy(t)
				g := startGateway(t, live.block()+"\n"+dead.block("legacy")+"\n\t\tlb_policy round_robin")
				const n = 8
				for i := range n {
					x := readRPC(t, modernCall(t, g.URL, i+1, "ask", map[string]any{}, answered), i+1)
					if text := checkToolResult(t, x, i+1); text != "answer: yes" {
						t.Fatalf("call %d: %q", i+1, text)
					}
				}
				if dead.accepted != nil {
					if got := dead.accepted.Load(); got >= n {
						t.Errorf("the dead upstream was tried %d times for %d calls: not marked down", got, n)
					}
				}
			})
			t.Run("parked call", func(t *testing.T) {
				live := newFailingLegacy(t)
				// `first` sends every new call to the dead upstream first.
				g := startGateway(t, dead.block("legacy")+"\n"+live.block()+"\n\t\tlb_policy first")
				ir := parseInputRequired(t, readRPC(t, modernCall(t, g.URL, 1, "ask", map[string]any{}, nil), 1))
				if dead.accepted != nil && dead.accepted.Load() == 0 {
					t.Fatal("the call never tried the dead upstream")
				}
				retry := map[string]any{"inputResponses": map[string]any{"elicitation-1": acceptAnswer}, "requestState": ir.RequestState}
				x := readRPC(t, modernCall(t, g.URL, 2, "ask", map[string]any{}, retry), 2)
				if text := checkToolResult(t, x, 2); text != "answer: yes" {
					t.Fatalf("retry: %q", text)
				}
				if got := wait(t, live.ended, 5*time.Second, "end of the tool call"); got != "ask: accept" {
					t.Fatalf("the live upstream's call ended with %q", got)
				}
			})
		})
	}
}

// TestHardeningReverseFailover: legacy clients in front of two modern
// upstreams, the first a dead one, open their gateway-held sessions on the
// live one (the session's server/discover fails over), and call through it.
func TestHardeningReverseFailover(t *testing.T) {
	t.Parallel()
	for _, dead := range deadUpstreams(t) {
		t.Run(dead.name, func(t *testing.T) {
			live := newModernUpstream(t)
			g := startGateway(t, dead.block("modern")+"\n"+live.block()+"\n\t\tlb_policy first")
			for i := range 3 {
				sid, _ := initReverse(t, g.URL, "2025-11-25", `{"elicitation":{}}`, nil)
				_, events := startCall(t, g.URL, sid, 10+i, "confirm")
				q := readInline(t, events)
				if r := answerInline(t, g.URL, sid, q.ID, `{"action":"accept","content":{"answer":"yes"}}`); r.StatusCode != http.StatusAccepted {
					t.Fatalf("answer: HTTP %d", r.StatusCode)
				}
				if final := awaitResponse(t, events, 10+i); !strings.Contains(final, "confirmed: yes") {
					t.Fatalf("session %d: the call ended with %q", i, final)
				}
			}
			if dead.accepted != nil && dead.accepted.Load() == 0 {
				t.Fatal("no session tried the dead upstream first")
			}
		})
	}
}
