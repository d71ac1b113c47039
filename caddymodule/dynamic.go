package caddymodule

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
)

// Dynamic upstreams: a reverse_proxy upstream source (`a`, `srv`, `multi`,
// or any other http.reverse_proxy.upstreams module) returns addresses
// (host:port); each becomes the MCP endpoint URL made from the
// `dynamic_endpoint` template — its scheme and path, the address as host —
// with the template's per-upstream options. What the gateway learns about
// an address (its era, its health) is kept while the source returns it,
// and forgotten once the source has not returned it for dynamicForget.

// dynamicForget is how long the state of an address the source stopped
// returning is kept (its era and health, should it come back).
const dynamicForget = time.Hour

// defaultDynamicEndpoint is the dynamic_endpoint template by default.
const defaultDynamicEndpoint = "http:///mcp"

// dynamicUpstreams is a handler's dynamic source and what it returned.
type dynamicUpstreams struct {
	source   reverseproxy.UpstreamSource
	template Upstream // URL: scheme:///path[?query], no host
	// ready completes an upstream the source returned for the first time
	// (Handler.upstreamTarget).
	ready    func(*Upstream)
	endpoint *url.URL
	static   map[string]bool // the static upstreams' URLs, which win
	logger   *zap.Logger
	server   string // the federated block's server it is of ("" for none)
	// refuse is the ranges its addresses may not be in (dynamic_refuse);
	// nil refuses none.
	refuse *addrPolicy

	mu        sync.Mutex
	released  bool                     // the configuration was unloaded
	known     map[string]*dynamicEntry // by URL
	current   []*Upstream              // the source's last answer
	lastPrune time.Time
	refused   map[string]bool // addresses refused and logged, by URL
}

type dynamicEntry struct {
	up       *Upstream
	lastSeen time.Time
}

// checkEndpointTemplate reports what is wrong with a dynamic_endpoint URL.
func checkEndpointTemplate(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return nil, fmt.Errorf("dynamic_endpoint %q: %w", raw, err)
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("dynamic_endpoint %q: scheme must be http or https", raw)
	case u.Host != "" || u.User != nil || u.Opaque != "":
		return nil, fmt.Errorf("dynamic_endpoint %q: no host goes here (the source gives it): write %s:///path", raw, u.Scheme)
	case u.Fragment != "":
		return nil, fmt.Errorf("dynamic_endpoint %q: fragments are not allowed", raw)
	}
	return u, nil
}

// provisionDynamic loads the dynamic upstream source, if one is configured.
func (h *Handler) provisionDynamic(ctx caddy.Context) error {
	if h.DynamicUpstreamsRaw == nil {
		if h.DynamicEndpoint != nil {
			return errors.New("dynamic_endpoint: needs a dynamic upstream source (dynamic)")
		}
		if h.DynamicRefuse != nil {
			return errors.New("dynamic_refuse: needs a dynamic upstream source (dynamic)")
		}
		return nil
	}
	onLoopback := sourceOnLoopback(h.DynamicUpstreamsRaw) // LoadModule empties it
	src, _, err := loadAs[reverseproxy.UpstreamSource](ctx, h, "DynamicUpstreamsRaw", "dynamic upstream source")
	if err != nil {
		return err
	}
	tpl := Upstream{URL: defaultDynamicEndpoint}
	if h.DynamicEndpoint != nil {
		tpl = *h.DynamicEndpoint
		tpl.state, tpl.proxy = nil, nil
	}
	endpoint, err := checkEndpointTemplate(tpl.URL)
	if err != nil {
		return err
	}
	if err := checkEra(tpl.Era); err != nil {
		return fmt.Errorf("dynamic_endpoint: %w", err)
	}
	if err := checkGather(tpl.Gather); err != nil {
		return fmt.Errorf("dynamic_endpoint: %w", err)
	}
	if err := checkGetStream(tpl.GetStream); err != nil {
		return fmt.Errorf("dynamic_endpoint: %w", err)
	}
	if err := checkOnOff("resume", tpl.Resume); err != nil {
		return fmt.Errorf("dynamic_endpoint: %w", err)
	}
	if err := checkOnOff("tasks", tpl.Tasks); err != nil {
		return fmt.Errorf("dynamic_endpoint: %w", err)
	}
	static := make(map[string]bool, len(h.Upstreams))
	for _, u := range h.Upstreams {
		if u != nil {
			static[u.URL] = true
		}
	}
	refuse, err := h.dynamicRefusePolicy(onLoopback)
	if err != nil {
		return err
	}
	h.dynamic = &dynamicUpstreams{source: src, template: tpl, ready: h.upstreamTarget, endpoint: endpoint, static: static,
		server: h.serverName, logger: h.logger, known: map[string]*dynamicEntry{}, refuse: refuse, refused: map[string]bool{}}
	return nil
}

// endpointURL maps an address the source returned (reverseproxy.Upstream's
// Dial: `host:port`, or `network/host:port` with a TCP network) to an MCP
// endpoint URL. A trailing dot of a fully qualified host name (SRV
// targets) is dropped, so that the Host header is the plain name.
func (d *dynamicUpstreams) endpointURL(dial string) (string, error) {
	addr, err := caddy.ParseNetworkAddress(dial)
	if err != nil {
		return "", err
	}
	switch addr.Network {
	case "", "tcp", "tcp4", "tcp6":
	default:
		return "", fmt.Errorf("network %q: an MCP upstream is reached over TCP", addr.Network)
	}
	if addr.PortRangeSize() != 1 || addr.StartPort == 0 {
		return "", errors.New("want host:port")
	}
	host := strings.TrimSuffix(addr.Host, ".")
	if host == "" {
		return "", errors.New("no host")
	}
	u := *d.endpoint
	u.Host = net.JoinHostPort(host, strconv.FormatUint(uint64(addr.StartPort), 10))
	return u.String(), nil
}

// get returns the upstreams the source returns for r, mapped and with
// their state. When the source fails, the last answer it gave stays in use
// (and the failure is logged): sessions pinned to its upstreams go on.
func (d *dynamicUpstreams) get(r *http.Request) []*Upstream {
	found, err := d.source.GetUpstreams(r)
	d.mu.Lock()
	defer d.mu.Unlock()
	if err != nil || d.released {
		if err != nil {
			d.logger.Error("dynamic upstream source failed; keeping its last answer", zap.Error(err))
		}
		return d.current
	}
	now := time.Now()
	cur := make([]*Upstream, 0, len(found))
	seen := make(map[string]bool, len(found))
	for _, f := range found {
		if f == nil {
			continue
		}
		u, err := d.endpointURL(f.Dial)
		if err != nil {
			d.logger.Warn("dynamic upstream address skipped", zap.String("address", f.Dial), zap.Error(err))
			continue
		}
		if seen[u] || d.static[u] {
			continue
		}
		seen[u] = true
		if d.refusedAddress(u) {
			continue
		}
		e := d.known[u]
		if e == nil {
			// Every per-upstream option of the template, the URL made
			// from the address.
			up := new(Upstream)
			*up = d.template
			up.URL = u
			if err := up.provision(d.server); err != nil {
				d.logger.Warn("dynamic upstream skipped", zap.String("upstream", u), zap.Error(err))
				continue
			}
			if d.ready != nil {
				d.ready(up)
			}
			e = &dynamicEntry{up: up}
			d.known[u] = e
			d.watch(u)
		}
		e.lastSeen = now
		cur = append(cur, e.up)
	}
	d.current = cur
	if now.Sub(d.lastPrune) > dynamicForget/60 {
		d.lastPrune = now
		d.prune(now.Add(-dynamicForget))
	}
	return cur
}

// prune forgets the addresses last seen before cutoff. d.mu is held.
func (d *dynamicUpstreams) prune(cutoff time.Time) {
	for u, e := range d.known {
		if e.lastSeen.Before(cutoff) {
			delete(d.known, u)
			d.unwatch(u)
			_, _ = upstreamStates.Delete(u)
		}
	}
}

// release lets go of every address's state (the configuration is unloaded).
func (d *dynamicUpstreams) release() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for u := range d.known {
		d.unwatch(u)
		_, _ = upstreamStates.Delete(u)
	}
	clear(d.known)
	d.released = true
}

// backgroundRequest is a request for a dynamic source outside any client
// request (the active health checker's rounds): it carries ctx and an empty
// placeholder replacer, as the sources expect.
func backgroundRequest(ctx context.Context) *http.Request {
	ctx = context.WithValue(ctx, caddy.ReplacerCtxKey, caddy.NewReplacer())
	r, _ := http.NewRequestWithContext(ctx, http.MethodGet, "/", nil)
	return r
}

// dynamic_refuse applied to a dynamic source's answers: an address the
// source answers is checked at once; a name, each time the gateway
// connects to it (addrpolicy.go).

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
