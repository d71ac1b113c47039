package caddymodule

import (
	"fmt"
	"net"
	"net/netip"
	"strings"

	"github.com/tidwall/gjson"
)

// Which addresses a dynamic upstream may have (dynamic_refuse): a DNS
// answer naming loopback, link-local or a cloud's metadata service would
// send clients' Authorization headers there. The ranges are named classes
// or CIDR prefixes; an answer in any of them is refused, both where the
// source answers an address and where a name it answered resolves when
// the gateway connects (dialguard.go).

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
