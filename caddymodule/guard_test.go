package caddymodule

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
)

// guarded returns a provisioned Handler with these allowed_hosts and
// allowed_origins https://app.example.com.
func guarded(t *testing.T, hosts ...string) *Handler {
	t.Helper()
	h := &Handler{Security: SecurityConfig{AllowedHosts: hosts}, allowedOrigin: map[string]bool{"https://app.example.com": true}}
	if err := h.provisionHosts(); err != nil {
		t.Fatal(err)
	}
	return h
}

func TestCheckOrigin(t *testing.T) {
	open := guarded(t)                                    // no allowed_hosts
	listed := guarded(t, "MCP.internal", "*.example.net") // allowed_hosts set
	loopback := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 9100}
	public := &net.TCPAddr{IP: net.IPv4(192, 0, 2, 10), Port: 443}
	cases := []struct {
		name   string
		h      *Handler
		local  net.Addr
		host   string
		origin string
		ok     bool
	}{
		{"loopback host", listed, loopback, "127.0.0.1:9100", "", true},
		{"localhost host", listed, loopback, "localhost:9100", "", true},
		{"ipv6 loopback", listed, loopback, "[::1]:9100", "", true},
		{"allowed host", listed, loopback, "mcp.internal:9100", "", true},
		{"allowed host, other case", listed, loopback, "Mcp.Internal:9100", "", true},
		{"rebinding host", listed, loopback, "evil.example.com:9100", "", false},
		{"rebinding host and origin", listed, loopback, "evil.example.com", "http://evil.example.com", false},
		{"same-host origin", listed, loopback, "localhost:9100", "http://localhost:9100", true},
		{"foreign origin", listed, loopback, "localhost:9100", "http://evil.example.com", false},
		{"allowed origin", listed, loopback, "localhost:9100", "https://app.example.com", true},
		{"null origin", listed, loopback, "localhost:9100", "null", false},

		{"loopback listener, no allowed_hosts, loopback host", open, loopback, "127.0.0.1:9100", "", true},
		{"loopback listener, no allowed_hosts, rebinding host", open, loopback, "mcp.internal:9100", "", false},

		// A listener on another address: without allowed_hosts every Host
		// passes (Caddy's site address is the Host check, if it names one).
		{"public listener any host", open, public, "mcp.example.com", "", true},
		{"public listener foreign origin", open, public, "mcp.example.com", "https://evil.example.com", false},
		{"public listener same origin", open, public, "mcp.example.com", "https://mcp.example.com", true},

		// With allowed_hosts: only the listed names.
		{"public listener, listed host", listed, public, "mcp.internal", "", true},
		{"public listener, listed host with port", listed, public, "mcp.internal:443", "", true},
		{"public listener, rebinding host", listed, public, "evil.example.com", "", false},
		{"public listener, rebinding host and same-host origin", listed, public, "evil.example.com:443", "http://evil.example.com:443", false},
		{"public listener, loopback name is not listed", listed, public, "localhost", "", false},
		{"public listener, loopback address is not listed", listed, public, "127.0.0.1", "", false},
		{"public listener, listed host, foreign origin", listed, public, "mcp.internal", "https://evil.example.com", false},
		{"public listener, listed host, same origin", listed, public, "mcp.internal", "https://mcp.internal", true},
		{"wildcard, one label", listed, public, "a.example.net", "", true},
		{"wildcard, one label, loopback listener", listed, loopback, "B.example.net:9100", "", true},
		{"wildcard, two labels", listed, public, "a.b.example.net", "", false},
		{"wildcard, the domain itself", listed, public, "example.net", "", false},
		{"wildcard, no label", listed, public, ".example.net", "", false},
		{"wildcard, suffix of a label", listed, public, "evilexample.net", "", false},
		{"no local address", listed, nil, "evil.example.com", "", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
			r.Host = c.host
			if c.origin != "" {
				r.Header.Set("Origin", c.origin)
			}
			if c.local != nil {
				r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, c.local))
			}
			err := c.h.checkOrigin(r)
			if (err == nil) != c.ok {
				t.Fatalf("checkOrigin = %v, want ok=%v", err, c.ok)
			}
			if err != nil && (err.HTTPStatus != http.StatusForbidden || err.Code != -32600) {
				t.Fatalf("status %d code %d, want 403 and -32600", err.HTTPStatus, err.Code)
			}
		})
	}
}

// TestAllowedHostsFleet: the host of this instance's own advertise address
// and of its own peer entry are accepted (the other instances forward to
// them); another peer's is not.
func TestAllowedHostsFleet(t *testing.T) {
	h := &Handler{Security: SecurityConfig{AllowedHosts: []string{"mcp.internal"}}, Fleet: FleetConfig{Peers: map[string]string{
		"gw-a": "http://gw-a.internal:8080", "gw-b": "http://gw-b.internal:8080",
	}}}
	h.fleet.instance, h.fleet.address = "gw-a", "http://10.0.0.11:8080"
	if err := h.provisionHosts(); err != nil {
		t.Fatal(err)
	}
	for host, want := range map[string]bool{
		"mcp.internal": true, "10.0.0.11": true, "gw-a.internal": true, "gw-b.internal": false, "evil.example.com": false,
	} {
		if got := h.hosts.allows(host, false); got != want {
			t.Errorf("allows(%q) on a public listener = %v, want %v", host, got, want)
		}
	}
}

func TestAllowedHostsEntries(t *testing.T) {
	for _, ok := range []string{"mcp.internal", "MCP.Internal", "10.0.0.1", "::1", "[fd00::1]", "*.example.com"} {
		if _, err := allowedHostEntry(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "mcp.internal:8080", "http://mcp.internal", "mcp.internal/mcp", "*", "*.", "a.*.example.com", "*example.com", "**.example.com", ".example.com"} {
		if _, err := allowedHostEntry(bad); err == nil {
			t.Errorf("%q was accepted", bad)
		}
	}
}
