package caddymodule

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/tidwall/gjson"
)

// Which addresses a dynamic upstream may have (dynamic_refuse): a DNS
// answer naming loopback, link-local or a cloud's metadata service would
// send clients' Authorization headers there. The ranges are named classes
// or CIDR prefixes; an answer in any of them is refused, both where the
// source answers an address and where a name it answered resolves when
// the gateway connects (guardDial, below).

// Address classes of dynamic_refuse.
const (
	classLoopback    = "loopback"
	classLinkLocal   = "link_local"
	classMetadata    = "metadata"
	classUnspecified = "unspecified"
	classPrivate     = "private"
	classNone        = "none"
)

// addressClasses are the prefixes of each class.
var addressClasses = map[string][]netip.Prefix{
	classLoopback: prefixes("127.0.0.0/8", "::1/128"),
	// 169.254.0.0/16 holds most clouds' metadata service (169.254.169.254).
	classLinkLocal: prefixes("169.254.0.0/16", "fe80::/10"),
	// Metadata and credential services outside link-local too: AWS IMDS
	// (IPv4 and IPv6) and ECS task credentials, GCP, Azure (IMDS and
	// WireServer), Alibaba Cloud, Oracle Cloud.
	classMetadata: prefixes("169.254.169.254/32", "169.254.170.2/32", "fd00:ec2::254/128",
		"168.63.129.16/32", "100.100.100.200/32", "192.0.0.192/32"),
	// 0.0.0.0 (and 0.0.0.0/8) and :: reach the host itself on Linux.
	classUnspecified: prefixes("0.0.0.0/8", "::/128"),
	// RFC 1918 and RFC 4193 (unique local) addresses, and shared address
	// space (RFC 6598, carrier-grade NAT).
	classPrivate: prefixes("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7", "100.64.0.0/10"),
}

// defaultRefused are the classes refused when dynamic_refuse is not set;
// loopback is accepted when the source itself asks loopback resolvers.
var defaultRefused = []string{classLoopback, classLinkLocal, classMetadata, classUnspecified}

// nat64 is the well-known NAT64 prefix (RFC 6052): an IPv4 address
// embedded in it is checked as that address.
var nat64 = netip.MustParsePrefix("64:ff9b::/96")

func prefixes(ss ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParsePrefix(s)
	}
	return out
}

// addrRange is one refused range: a class name or a prefix, as configured.
type addrRange struct {
	name   string
	prefix netip.Prefix
}

// addrPolicy is the ranges a handler refuses for its dynamic upstreams.
// The zero value refuses nothing.
type addrPolicy struct {
	ranges []addrRange
}

// parseAddrPolicy reads dynamic_refuse's values: class names, CIDR
// prefixes or single addresses, or `none` alone.
func parseAddrPolicy(values []string) (*addrPolicy, error) {
	p := &addrPolicy{}
	for _, v := range values {
		switch {
		case v == classNone:
			if len(values) != 1 {
				return nil, fmt.Errorf("dynamic_refuse: %q goes alone", classNone)
			}
			return p, nil
		case addressClasses[v] != nil:
			for _, pr := range addressClasses[v] {
				p.ranges = append(p.ranges, addrRange{v, pr})
			}
		case strings.Contains(v, "/"):
			pr, err := netip.ParsePrefix(v)
			if err != nil {
				return nil, fmt.Errorf("dynamic_refuse %q: %w", v, err)
			}
			p.ranges = append(p.ranges, addrRange{v, pr.Masked()})
		default:
			a, err := netip.ParseAddr(v)
			if err != nil {
				return nil, fmt.Errorf("dynamic_refuse %q: want loopback, link_local, metadata, unspecified, private, none, a CIDR prefix or an address", v)
			}
			a = a.Unmap()
			p.ranges = append(p.ranges, addrRange{v, netip.PrefixFrom(a, a.BitLen())})
		}
	}
	return p, nil
}

// refuses returns the range that refuses a, if any. An IPv4 address
// mapped into IPv6 (::ffff:a.b.c.d), or embedded in the NAT64 prefix, is
// checked as itself too.
func (p *addrPolicy) refuses(a netip.Addr) (string, bool) {
	if p == nil || !a.IsValid() {
		return "", false
	}
	a = a.Unmap().WithZone("")
	candidates := []netip.Addr{a}
	if nat64.Contains(a) {
		b := a.As16()
		candidates = append(candidates, netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}))
	}
	for _, c := range candidates {
		for _, r := range p.ranges {
			if r.prefix.Contains(c) {
				return r.name, true
			}
		}
	}
	return "", false
}

// sourceOnLoopback reports whether a dynamic upstream source (its JSON
// config, as configured) asks only resolvers on loopback: an `a` or `srv`
// source with `resolvers` that are all loopback addresses (or
// `localhost`), or a `multi` whose every source does. A source using the
// system's resolvers is not on loopback, whatever they are.
func sourceOnLoopback(raw []byte) bool {
	src := gjson.ParseBytes(raw)
	switch src.Get("source").String() {
	case "a", "srv":
		addrs := src.Get("resolver.addresses").Array()
		if len(addrs) == 0 {
			return false
		}
		for _, a := range addrs {
			if !loopbackResolver(a.String()) {
				return false
			}
		}
		return true
	case "multi":
		srcs := src.Get("sources").Array()
		if len(srcs) == 0 {
			return false
		}
		for _, s := range srcs {
			if !sourceOnLoopback([]byte(s.Raw)) {
				return false
			}
		}
		return true
	}
	return false
}

// loopbackResolver reports whether a resolver address ([network/]host[:port])
// names a loopback host.
func loopbackResolver(s string) bool {
	if i := strings.Index(s, "/"); i >= 0 {
		s = s[i+1:]
	}
	host := s
	if h, _, err := net.SplitHostPort(s); err == nil {
		host = h
	}
	if host == "localhost" {
		return true
	}
	a, err := netip.ParseAddr(strings.Trim(host, "[]"))
	return err == nil && a.Unmap().IsLoopback()
}

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
