package caddymodule

import (
	"net/netip"
	"net/url"

	"go.uber.org/zap"
)

// dynamic_refuse applied to a dynamic source's answers: an address the
// source answers is checked at once; a name, each time the gateway
// connects to it (dialguard.go).

// maxRefusedLogged bounds the addresses whose refusal was logged (each
// once, until that many were).
const maxRefusedLogged = 1024

// dynamicRefusePolicy returns the ranges this handler refuses for its
// dynamic upstreams: dynamic_refuse as configured, or by default
// loopback, link-local, metadata and unspecified addresses — loopback
// accepted when the source asks only resolvers on loopback (a test or
// development setup: onLoopback). nil: none refused.
func (h *Handler) dynamicRefusePolicy(onLoopback bool) (*addrPolicy, error) {
	values := h.DynamicRefuse
	if values == nil {
		for _, c := range defaultRefused {
			if c == classLoopback && onLoopback {
				continue
			}
			values = append(values, c)
		}
	}
	p, err := parseAddrPolicy(values)
	if err != nil || len(p.ranges) == 0 {
		return nil, err
	}
	return p, nil
}

// refusedAddress reports whether the upstream URL u names an address
// (not a name) that d refuses, and logs the first refusal of each. d.mu is
// held.
func (d *dynamicUpstreams) refusedAddress(u string) bool {
	if d.refuse == nil {
		return false
	}
	parsed, err := url.Parse(u)
	if err != nil {
		return true
	}
	a, err := netip.ParseAddr(parsed.Hostname())
	if err != nil {
		return false // a name: checked when connecting
	}
	name, refused := d.refuse.refuses(a)
	if refused && !d.refused[u] {
		if len(d.refused) >= maxRefusedLogged {
			clear(d.refused)
		}
		d.refused[u] = true
		d.logger.Warn("dynamic upstream refused: its address is in a refused range (dynamic_refuse)",
			zap.String("upstream", u), zap.String("range", name))
	}
	return refused
}

// watch makes every connection to u's host:port checked against d's
// ranges; unwatch stops it.
func (d *dynamicUpstreams) watch(u string) {
	if parsed, err := url.Parse(u); err == nil && d.refuse != nil {
		dialGuards.watch(parsed.Host, d, d.refuse)
	}
}

func (d *dynamicUpstreams) unwatch(u string) {
	if parsed, err := url.Parse(u); err == nil {
		dialGuards.forget(parsed.Host, d)
	}
}
