package tests

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
)

// Ports for what the tests start and address by port (Caddy's listener and
// admin endpoint, the peers, an upstream that goes down and comes back, a
// port nothing listens on) come from freePort. A port is chosen, checked
// free and closed, and bound later by another process: in that gap, with
// the tests running in parallel, a port the kernel picks for someone else's
// bind(":0") or outgoing connection could take it. So freePort hands out
// ports below the kernel's ephemeral range (ip_local_port_range), which the
// kernel never picks on its own, in turn from a random start (another test
// process on the machine starts elsewhere), and never one port twice in a
// run. Listeners the tests hold themselves keep using ":0".

var ports struct {
	sync.Mutex
	lo, hi, next int          // [lo, hi) below the ephemeral range, or hi == 0
	given        map[int]bool // the ports handed out (ephemeral fallback)
}

// portWindow is how many ports below the ephemeral range freePort uses.
const portWindow = 10000

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago and
// that no other caller in this test process got.
func freePort(t *testing.T) int {
	t.Helper()
	ports.Lock()
	defer ports.Unlock()
	if ports.given == nil {
		ports.given = map[int]bool{}
		ports.lo, ports.hi = belowEphemeral()
		if ports.hi > ports.lo {
			ports.next = ports.lo + rand.IntN(ports.hi-ports.lo)
		}
	}
	for range ports.hi - ports.lo {
		p := ports.next
		if ports.next++; ports.next == ports.hi {
			ports.next = ports.lo
		}
		if ports.given[p] {
			continue
		}
		if l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p)); err == nil {
			l.Close()
			ports.given[p] = true
			return p
		}
	}
	// No window (or none of it free): the kernel's choice, never twice.
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		p := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if !ports.given[p] {
			ports.given[p] = true
			return p
		}
	}
	t.Fatal("no free port")
	return 0
}

// belowEphemeral returns the window of portWindow ports just below the
// kernel's ephemeral range, or lo == hi when it cannot tell or there is no
// room (above 1024).
func belowEphemeral() (lo, hi int) {
	data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0, 0
	}
	var first, last int
	if _, err := fmt.Sscan(strings.TrimSpace(string(data)), &first, &last); err != nil || first-portWindow < 1024 {
		return 0, 0
	}
	return first - portWindow, first
}
