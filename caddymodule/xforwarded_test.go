package caddymodule

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

func TestSetForwarded(t *testing.T) {
	type want struct{ xff, proto, host, forwarded string }
	cases := []struct {
		name    string
		remote  string
		trust   string // "", "proxy" (trusted_proxies) or "fleet" (a verified forwarded request)
		tls     bool
		headers map[string][]string
		want    want
	}{
		{"no headers", "192.0.2.1:5000", "", false, nil, want{"192.0.2.1", "http", "mcp.example.com", ""}},
		{"tls", "192.0.2.1:5000", "", true, nil, want{"192.0.2.1", "https", "mcp.example.com", ""}},
		{"spoofed, untrusted", "192.0.2.1:5000", "", false, map[string][]string{
			"X-Forwarded-For": {"6.6.6.6"}, "X-Forwarded-Proto": {"https"}, "X-Forwarded-Host": {"bank.example"},
			"Forwarded": {"for=6.6.6.6"}, "X-Real-Ip": {"6.6.6.6"},
		}, want{"192.0.2.1", "http", "mcp.example.com", ""}},
		{"trusted proxy", "10.0.0.2:5000", "proxy", false, map[string][]string{
			"X-Forwarded-For": {"198.51.100.7, 10.0.0.9"}, "X-Forwarded-Proto": {"https"}, "X-Forwarded-Host": {"mcp.example.org"},
			"Forwarded": {"for=198.51.100.7"},
		}, want{"198.51.100.7, 10.0.0.9, 10.0.0.2", "https", "mcp.example.org", "for=198.51.100.7"}},
		{"trusted proxy, several lines", "10.0.0.2:5000", "proxy", false, map[string][]string{
			"X-Forwarded-For": {"198.51.100.7", "", "10.0.0.9"}, "X-Forwarded-Proto": {"http", "https"},
		}, want{"198.51.100.7, 10.0.0.9, 10.0.0.2", "https", "mcp.example.com", ""}},
		{"trusted proxy, nothing forwarded", "10.0.0.2:5000", "proxy", true, nil, want{"10.0.0.2", "https", "mcp.example.com", ""}},
		{"fleet instance", "10.0.0.12:5000", "fleet", false, map[string][]string{
			"X-Forwarded-For": {"198.51.100.7"}, "X-Forwarded-Proto": {"https"}, "X-Forwarded-Host": {"mcp.example.org"},
		}, want{"198.51.100.7, 10.0.0.12", "https", "mcp.example.org", ""}},
		{"ipv6 with zone", "[fe80::1%eth0]:5000", "", false, nil, want{"fe80::1", "http", "mcp.example.com", ""}},
		{"unix socket, untrusted", "@", "", false, map[string][]string{"X-Forwarded-For": {"6.6.6.6"}}, want{"", "http", "mcp.example.com", ""}},
		{"unix socket, trusted", "@", "proxy", false, map[string][]string{"X-Forwarded-For": {"198.51.100.7"}}, want{"198.51.100.7", "http", "mcp.example.com", ""}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "http://mcp.example.com/mcp", nil)
			r.RemoteAddr = c.remote
			if c.tls {
				r.TLS = &tls.ConnectionState{}
			}
			for k, vs := range c.headers {
				r.Header[k] = vs
			}
			ctx := context.WithValue(r.Context(), caddyhttp.VarsCtxKey, map[string]any{caddyhttp.TrustedProxyVarKey: c.trust == "proxy"})
			if c.trust == "fleet" {
				ctx = context.WithValue(ctx, forwardedKey{}, true)
			}
			hdr := (&Handler{}).upstreamHeader(r.WithContext(ctx))
			got := want{hdr.Get("X-Forwarded-For"), hdr.Get("X-Forwarded-Proto"), hdr.Get("X-Forwarded-Host"), hdr.Get("Forwarded")}
			if got != c.want {
				t.Fatalf("got %+v, want %+v", got, c.want)
			}
			if n := len(hdr.Values("X-Forwarded-For")); n > 1 {
				t.Fatalf("%d X-Forwarded-For lines, want one", n)
			}
			if c.trust == "" && hdr.Get("X-Real-Ip") != "" {
				t.Fatalf("X-Real-Ip %q passed from an untrusted client", hdr.Get("X-Real-Ip"))
			}
		})
	}
}

// TestSetForwardedOutsideCaddy: without Caddy's variables (no server
// prepared the request), nobody is trusted.
func TestSetForwardedOutsideCaddy(t *testing.T) {
	r := httptest.NewRequest(http.MethodPost, "http://mcp.example.com/mcp", nil)
	r.RemoteAddr = "192.0.2.1:5000"
	r.Header.Set("X-Forwarded-For", "6.6.6.6")
	if got := (&Handler{}).upstreamHeader(r).Get("X-Forwarded-For"); got != "192.0.2.1" {
		t.Fatalf("X-Forwarded-For %q, want 192.0.2.1", got)
	}
}

// TestSetForwardedInto: setForwarded reads r and writes another request's
// headers, as a relay's Rewrite would (httputil.ProxyRequest: In, Out,
// whose X-Forwarded-* the proxy removed).
func TestSetForwardedInto(t *testing.T) {
	in := httptest.NewRequest(http.MethodPost, "http://gw.internal/mcp", nil)
	in.RemoteAddr = "10.0.0.2:5000"
	in.Header.Set("X-Forwarded-For", "198.51.100.7")
	in.Header.Set("X-Forwarded-Proto", "https")
	in.Header.Set("X-Forwarded-Host", "mcp.example.org")
	in.Header.Set("X-Real-Ip", "198.51.100.7")
	for _, trusted := range []bool{false, true} {
		r := in.WithContext(context.WithValue(in.Context(), caddyhttp.VarsCtxKey, map[string]any{caddyhttp.TrustedProxyVarKey: trusted}))
		out := http.Header{"X-Real-Ip": {"198.51.100.7"}}
		setForwarded(out, r)
		want := http.Header{"X-Forwarded-For": {"10.0.0.2"}, "X-Forwarded-Proto": {"http"}, "X-Forwarded-Host": {"gw.internal"}}
		if trusted {
			want = http.Header{"X-Forwarded-For": {"198.51.100.7, 10.0.0.2"}, "X-Forwarded-Proto": {"https"},
				"X-Forwarded-Host": {"mcp.example.org"}, "X-Real-Ip": {"198.51.100.7"}}
		}
		if fmt.Sprint(out) != fmt.Sprint(want) {
			t.Errorf("trusted=%v: %v, want %v", trusted, out, want)
		}
	}
}
