package caddymodule

import (
	"net"
	"net/http"
	"strings"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

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
