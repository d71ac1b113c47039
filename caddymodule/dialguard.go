package caddymodule

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
)

// The dial guard: a dynamic upstream answered by name (an SRV target, say)
// is resolved when the gateway connects to it, by whatever resolver the
// transport uses, and the answer may differ from any looked at before
// (DNS rebinding). So the address actually connected to is checked, on
// every connection to a dynamic upstream's host:port, against the ranges
// refused by each handler whose source returned it: a refused address's
// connection is closed before anything is written on it, and the request
// fails as a connection that could not be made (the upstream counts a
// failure; a new session moves to another upstream). Every dialer the
// gateway reaches upstreams with goes through guardDial: the built-in
// clients, the bridges' own connections, and the http transport's dialer.

// dialGuards is the process's guard: upstream clients are shared between
// handlers.
var dialGuards = &addrGuards{m: make(map[string]map[*dynamicUpstreams]*addrPolicy)}

// addrGuards maps the host:port of every dynamic upstream to the policies
// of the handlers whose source returned it.
type addrGuards struct {
	n  atomic.Int64 // len(m), read without the lock on every dial
	mu sync.RWMutex
	m  map[string]map[*dynamicUpstreams]*addrPolicy
}

// watch checks connections to addr (host:port) against p, for owner.
func (g *addrGuards) watch(addr string, owner *dynamicUpstreams, p *addrPolicy) {
	g.mu.Lock()
	defer g.mu.Unlock()
	owners := g.m[addr]
	if owners == nil {
		owners = make(map[*dynamicUpstreams]*addrPolicy)
		g.m[addr] = owners
		g.n.Store(int64(len(g.m)))
	}
	owners[owner] = p
}

// forget stops owner's checks of addr.
func (g *addrGuards) forget(addr string, owner *dynamicUpstreams) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if owners := g.m[addr]; owners != nil {
		delete(owners, owner)
		if len(owners) == 0 {
			delete(g.m, addr)
			g.n.Store(int64(len(g.m)))
		}
	}
}

// check returns an error when a connection to addr reached remote, an
// address some watching policy refuses.
func (g *addrGuards) check(addr string, remote netip.Addr) error {
	if g.n.Load() == 0 {
		return nil
	}
	g.mu.RLock()
	defer g.mu.RUnlock()
	for _, p := range g.m[addr] {
		if !remote.IsValid() && len(p.ranges) > 0 {
			// Whatever it reached cannot be told: refused.
			return &net.OpError{Op: "dial", Net: "tcp", Err: fmt.Errorf("dynamic upstream %s: the address connected to is unknown (dynamic_refuse)", addr)}
		}
		if name, refused := p.refuses(remote); refused {
			return &net.OpError{Op: "dial", Net: "tcp", Err: fmt.Errorf("dynamic upstream %s resolved to %s, in a refused range (dynamic_refuse %s)", addr, remote, name)}
		}
	}
	return nil
}

// watching reports whether connections to addr are checked.
func (g *addrGuards) watching(addr string) bool {
	if g.n.Load() == 0 {
		return false
	}
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.m[addr] != nil
}

// dialFunc is a dialer's DialContext.
type dialFunc = func(ctx context.Context, network, addr string) (net.Conn, error)

// guardDial wraps dial with the dial guard: a connection to a watched
// host:port whose remote address a watching policy refuses is closed and
// reported as a failed dial.
func guardDial(dial dialFunc) dialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if !dialGuards.watching(addr) {
			return dial(ctx, network, addr)
		}
		nc, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		remote := remoteAddr(nc)
		if err := dialGuards.check(addr, remote); err != nil {
			_ = nc.Close()
			return nil, err
		}
		return nc, nil
	}
}

// remoteAddr is the IP address nc is connected to (invalid if unknown).
func remoteAddr(nc net.Conn) netip.Addr {
	if ra, ok := nc.RemoteAddr().(*net.TCPAddr); ok {
		return ra.AddrPort().Addr()
	}
	if ap, err := netip.ParseAddrPort(nc.RemoteAddr().String()); err == nil {
		return ap.Addr()
	}
	return netip.Addr{}
}
