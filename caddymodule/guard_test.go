package caddymodule

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestCheckOrigin(t *testing.T) {
	h := &Handler{
		allowedOrigin: map[string]bool{"https://app.example.com": true},
		allowedHost:   map[string]bool{"mcp.internal": true},
	}
	loopback := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 9100}
	public := &net.TCPAddr{IP: net.IPv4(192, 0, 2, 10), Port: 443}
	cases := []struct {
		name   string
		local  net.Addr
		host   string
		origin string
		ok     bool
	}{
		{"loopback host", loopback, "127.0.0.1:9100", "", true},
		{"localhost host", loopback, "localhost:9100", "", true},
		{"ipv6 loopback", loopback, "[::1]:9100", "", true},
		{"allowed host", loopback, "mcp.internal:9100", "", true},
		{"rebinding host", loopback, "evil.example.com:9100", "", false},
		{"rebinding host and origin", loopback, "evil.example.com", "http://evil.example.com", false},
		{"same-host origin", loopback, "localhost:9100", "http://localhost:9100", true},
		{"foreign origin", loopback, "localhost:9100", "http://evil.example.com", false},
		{"allowed origin", loopback, "localhost:9100", "https://app.example.com", true},
		{"null origin", loopback, "localhost:9100", "null", false},
		{"public listener any host", public, "mcp.example.com", "", true},
		{"public listener foreign origin", public, "mcp.example.com", "https://evil.example.com", false},
		{"public listener same origin", public, "mcp.example.com", "https://mcp.example.com", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
			r.Host = c.host
			if c.origin != "" {
				r.Header.Set("Origin", c.origin)
			}
			r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, c.local))
			err := h.checkOrigin(r)
			if (err == nil) != c.ok {
				t.Fatalf("checkOrigin = %v, want ok=%v", err, c.ok)
			}
			if err != nil && err.HTTPStatus != http.StatusForbidden {
				t.Fatalf("status %d, want 403", err.HTTPStatus)
			}
		})
	}
}
