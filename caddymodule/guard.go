package caddymodule

import (
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
)

// checkOrigin defends against DNS rebinding and cross-origin browser calls
// (MCP transports, "Security Warning"): a request that reached a loopback
// listener must name a loopback (or allowed) host, and a request with an
// Origin must come from an allowed origin or from its own host.
func (h *Handler) checkOrigin(r *http.Request) *translate.RPCError {
	if onLoopback(r) && !h.hostAllowed(hostOnly(r.Host)) {
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

func forbidden(msg string) *translate.RPCError {
	return &translate.RPCError{HTTPStatus: http.StatusForbidden, Code: translate.InvalidRequest, Message: msg}
}

// hostAllowed reports whether host (no port) may be named on a loopback
// listener.
func (h *Handler) hostAllowed(host string) bool {
	host = strings.ToLower(host)
	if host == "localhost" || h.allowedHost[host] {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
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
