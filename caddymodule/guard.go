package caddymodule

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
	"github.com/caddyserver/caddy/v2"
)

// hostGuard is what the Host check accepts (allowed_hosts, provisioned).
type hostGuard struct {
	// restrict is set when allowed_hosts is: listeners on other addresses
	// than loopback ones then check the Host too.
	restrict bool
	names    map[string]bool // lower case, no port, no brackets
	// suffixes are the wildcard entries, "*.example.com" kept as
	// ".example.com": they match one label more.
	suffixes []string
}

// provisionHosts builds the Host check from allowed_hosts, adding the hosts
// of this instance's own fleet addresses (advertise, and its entry in the
// peer list), which are what the other instances name when they forward a
// request here. It needs the fleet.
func (h *Handler) provisionHosts() error {
	g := hostGuard{restrict: len(h.Security.AllowedHosts) > 0, names: make(map[string]bool, len(h.Security.AllowedHosts)+2)}
	for _, raw := range h.Security.AllowedHosts {
		host, err := allowedHostEntry(raw)
		if err != nil {
			return fmt.Errorf("allowed_hosts: %w", err)
		}
		if rest, ok := strings.CutPrefix(host, "*"); ok {
			g.suffixes = append(g.suffixes, rest)
			continue
		}
		g.names[host] = true
	}
	own := []string{h.fleet.address}
	if u, ok := h.Fleet.Peers[h.fleet.instance]; ok {
		own = append(own, caddy.NewReplacer().ReplaceAll(u, ""))
	}
	for _, addr := range own {
		if u, err := url.Parse(addr); err == nil && u.Hostname() != "" {
			g.names[strings.ToLower(u.Hostname())] = true
		}
	}
	h.hosts = g
	return nil
}

// allowedHostEntry checks one allowed_hosts entry and returns it in lower
// case: a host name or IP address without port (an IPv6 address with or
// without brackets), or a wildcard `*.` followed by a domain.
func allowedHostEntry(raw string) (string, error) {
	host := strings.ToLower(strings.TrimSuffix(strings.TrimPrefix(raw, "["), "]"))
	name := strings.TrimPrefix(host, "*.")
	switch {
	case host == "":
		return "", fmt.Errorf("an empty host")
	case net.ParseIP(host) != nil:
		return host, nil
	case strings.ContainsAny(host, ":/@ "):
		return "", fmt.Errorf("%q: want a host name without scheme, port or path", raw)
	case name == "" || strings.Contains(name, "*") || strings.HasPrefix(name, "."):
		return "", fmt.Errorf("%q: a wildcard may only be a whole first label, as in *.example.com", raw)
	}
	return host, nil
}

// allows reports whether host (no port) may be named on a request that
// arrived on a loopback listener (loopback set) or another one.
func (g hostGuard) allows(host string, loopback bool) bool {
	host = strings.ToLower(host)
	if loopback && isLoopbackName(host) {
		return true
	}
	if !loopback && !g.restrict {
		return true // no allowed_hosts: Caddy's site address matches the Host, if it names one
	}
	if g.names[host] {
		return true
	}
	for _, suffix := range g.suffixes {
		label, ok := strings.CutSuffix(host, suffix)
		if ok && label != "" && !strings.Contains(label, ".") {
			return true
		}
	}
	return false
}

// isLoopbackName reports whether host (no port, lower case) names this
// machine: `localhost` or a loopback address.
func isLoopbackName(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// checkOrigin defends against DNS rebinding and cross-origin browser calls
// (MCP transports, "Security Warning"): a request must name an allowed host
// (on a loopback listener, a loopback name or one in allowed_hosts; on
// another listener, when allowed_hosts is set, one in it), and a request
// with an Origin must come from an allowed origin or from its own host.
func (h *Handler) checkOrigin(r *http.Request) *jsonrpc.RPCError {
	if !h.hosts.allows(hostOnly(r.Host), onLoopback(r)) {
		return forbidden("Forbidden: invalid Host header")
	}
	origin := r.Header.Get("Origin")
	if origin == "" || h.allowedOrigin["*"] || h.allowedOrigin[strings.ToLower(origin)] {
		return nil
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" || !strings.EqualFold(u.Host, r.Host) {
		return forbidden("Forbidden: invalid Origin header")
	}
	return nil
}

func forbidden(msg string) *jsonrpc.RPCError {
	return &jsonrpc.RPCError{HTTPStatus: http.StatusForbidden, Code: jsonrpc.InvalidRequest, Message: msg}
}

// onLoopback reports whether r arrived on a loopback address.
func onLoopback(r *http.Request) bool {
	addr, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok {
		return false
	}
	host, _, err := net.SplitHostPort(addr.String())
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// hostOnly strips the port, and the brackets of an IPv6 literal.
func hostOnly(hostport string) string {
	if host, _, err := net.SplitHostPort(hostport); err == nil {
		return host
	}
	return strings.Trim(hostport, "[]")
}
