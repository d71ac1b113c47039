package tests

// What the gateway trusts in request headers (issue 12, findings 8 and 11).

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
)

// proxyClient is an HTTP client whose every connection begins with a PROXY
// protocol v1 header, as an L4 load balancer in front of Caddy sends: with
// Caddy's proxy_protocol listener wrapper, the gateway then sees the
// connection arrive on dst, a non-loopback address, although every socket
// of the test is on 127.0.0.1.
func proxyClient(dst string) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			_, port, _ := net.SplitHostPort(addr)
			if _, err := fmt.Fprintf(c, "PROXY TCP4 203.0.113.7 %s 40000 %s\r\n", dst, port); err != nil {
				c.Close()
				return nil, err
			}
			return c, nil
		},
	}}
}

// TestHardeningAllowedHosts: with allowed_hosts, a request on any listener
// whose Host is not listed is refused with 403 (-32600) before anything
// reaches the upstream; a loopback listener also accepts loopback names.
// The non-loopback listener is Caddy behind an L4 load balancer speaking
// the PROXY protocol (proxyClient): the address the gateway checks is the
// one the connection reached at the balancer, 192.0.2.10.
func TestHardeningAllowedHosts(t *testing.T) {
	up := newFailingLegacy(t)
	withHosts := up.block() + "\n\t\tallowed_hosts mcp.internal *.mcp.example"
	g := startGatewayWith(t, "\tservers {\n\t\tlistener_wrappers {\n\t\t\tproxy_protocol {\n\t\t\t\tallow 127.0.0.1/32\n\t\t\t}\n\t\t}\n\t}", "", withHosts)
	lan, direct := proxyClient("192.0.2.10"), http.DefaultClient

	// initialize sends a legacy initialize with this Host and returns the
	// HTTP status and JSON-RPC error code (0 when it succeeded).
	initialize := func(t *testing.T, c *http.Client, host string) (int, int) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, g.URL, strings.NewReader(legacyInit))
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			_, _ = io.Copy(io.Discard, resp.Body)
			return resp.StatusCode, 0
		}
		code, _ := rpcErrorOf(t, resp)
		return resp.StatusCode, code
	}
	refused := func(t *testing.T, c *http.Client, host string) {
		t.Helper()
		up.untouched(t, "Host "+host, func() {
			if status, code := initialize(t, c, host); status != http.StatusForbidden || code != -32600 {
				t.Errorf("Host %s: HTTP %d code %d, want 403 and -32600", host, status, code)
			}
		})
	}
	served := func(t *testing.T, c *http.Client, host string) {
		t.Helper()
		if status, code := initialize(t, c, host); status != http.StatusOK {
			t.Errorf("Host %s: HTTP %d code %d, want 200", host, status, code)
		}
	}
	port := fmt.Sprint(":", g.Port)

	t.Run("non-loopback listener", func(t *testing.T) {
		refused(t, lan, "evil.example.com"+port) // a DNS-rebinding page's own name
		refused(t, lan, "127.0.0.1"+port)        // loopback names are for loopback listeners
		refused(t, lan, "a.b.mcp.example")       // the wildcard is one label
		served(t, lan, "mcp.internal"+port)
		served(t, lan, "MCP.Internal")
		served(t, lan, "eu.mcp.example"+port)
	})
	t.Run("loopback listener", func(t *testing.T) {
		refused(t, direct, "evil.example.com"+port)
		served(t, direct, "127.0.0.1"+port)
		served(t, direct, "localhost"+port)
		served(t, direct, "mcp.internal"+port)
	})
	t.Run("without allowed_hosts", func(t *testing.T) {
		// Unchanged: a non-loopback listener accepts any Host (documented:
		// Caddy's site address, if it names a host, is the check).
		g.reload(t, up.block())
		served(t, lan, "evil.example.com"+port)
		refused(t, direct, "evil.example.com"+port)
	})
}
