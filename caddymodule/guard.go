package caddymodule

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
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

// Request targets. The gateway serves paths only: a request line in
// absolute form (`POST http://host/path HTTP/1.1`, meant for proxies) is
// refused at the door, and a request forwarded to its owner instance is
// sent to a URL built from parts — scheme and host from the owner's
// configured or sealed base URL, path and query from the client's request
// — so that nothing a client sends can change where it goes.

// originalRequest is the request as the client sent it, before any Caddy
// rewrite (handle_path, uri strip_prefix).
func originalRequest(r *http.Request) *http.Request {
	if orig, ok := r.Context().Value(caddyhttp.OriginalRequestCtxKey).(http.Request); ok && orig.URL != nil {
		return &orig
	}
	return r
}

// checkOriginForm refuses a request whose request target is not a path
// (origin form, RFC 9112 §3.2.1): absolute form, authority form or `*`,
// or a target holding a '#' (a request target has no fragment; Go's server
// leaves it in the path or query, which a forwarded URL could not carry).
func checkOriginForm(r *http.Request) *jsonrpc.RPCError {
	orig := originalRequest(r)
	u := orig.URL
	if strings.HasPrefix(orig.RequestURI, "/") && !strings.Contains(orig.RequestURI, "#") &&
		u.Scheme == "" && u.Host == "" && u.User == nil && u.Opaque == "" {
		return nil
	}
	return &jsonrpc.RPCError{HTTPStatus: http.StatusBadRequest, Code: jsonrpc.InvalidRequest,
		Message: "Bad Request: the request target must be a path (origin form): not an absolute URL, and no '#'"}
}

// What an upstream learns of the client from X-Forwarded-For, -Proto and
// -Host follows Caddy's reverse_proxy: headers a trusted sender set are
// kept (X-Forwarded-For appended to), anyone else's are replaced with what
// this gateway saw, so that a client cannot make an upstream believe it
// comes from another address.

// trustedSender reports whether the X-Forwarded-* headers of r may be
// believed: it came from a proxy in the server's `trusted_proxies`, or it
// is a request another instance of the fleet forwarded (its
// Mcp-Gateway-Forwarded header verified, relay.go). That instance set those
// headers itself; the MAC does not cover them, so between instances they
// are as trustworthy as the network, as with any trusted proxy: an
// attacker able to alter forwarded requests in flight (plain HTTP between
// instances) could change them, and could read the clients' credentials
// too.
func trustedSender(r *http.Request) bool {
	if trusted, _ := caddyhttp.GetVar(r.Context(), caddyhttp.TrustedProxyVarKey).(bool); trusted {
		return true
	}
	forwarded, _ := r.Context().Value(forwardedKey{}).(bool)
	return forwarded
}

// setForwarded writes X-Forwarded-For, X-Forwarded-Proto and
// X-Forwarded-Host into hdr, the headers of a request sent on behalf of r.
// From a trusted sender, r's own values are kept (the peer's address is
// appended to X-Forwarded-For); otherwise they are replaced by the peer's
// address, r's scheme and r's Host, and r's Forwarded and X-Real-IP, which
// this gateway does not write, are dropped.
func setForwarded(hdr http.Header, r *http.Request) {
	trusted := trustedSender(r)
	if !trusted {
		hdr.Del("Forwarded")
		hdr.Del("X-Real-Ip")
	}
	if xff := forwardedFor(r, trusted); xff != "" {
		hdr.Set("X-Forwarded-For", xff)
	} else {
		hdr.Del("X-Forwarded-For")
	}
	proto, host := "http", r.Host
	if r.TLS != nil {
		proto = "https"
	}
	if trusted {
		proto = lastValue(r.Header, "X-Forwarded-Proto", proto)
		host = lastValue(r.Header, "X-Forwarded-Host", host)
	}
	hdr.Set("X-Forwarded-Proto", proto)
	hdr.Set("X-Forwarded-Host", host)
}

// forwardedFor is the X-Forwarded-For to send on behalf of r: the peer's
// address, after r's own list if trusted ("" when neither is known: a
// peer on a Unix socket with no list).
func forwardedFor(r *http.Request, trusted bool) string {
	ip, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		ip = "" // a Unix socket: no address to add
	}
	ip, _, _ = strings.Cut(ip, "%") // an IPv6 zone names a local interface
	var list []string
	if trusted {
		for _, v := range r.Header.Values("X-Forwarded-For") {
			if v = strings.TrimSpace(v); v != "" {
				list = append(list, v)
			}
		}
	}
	if ip != "" {
		list = append(list, ip)
	}
	return strings.Join(list, ", ")
}

// lastValue is the last non-empty value of header k, or def.
func lastValue(h http.Header, k, def string) string {
	vs := h.Values(k)
	for i := len(vs) - 1; i >= 0; i-- {
		if v := strings.TrimSpace(vs[i]); v != "" {
			return v
		}
	}
	return def
}
