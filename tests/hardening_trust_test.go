package tests

// What the gateway trusts in request headers:
// X-Forwarded-* only from Caddy's trusted_proxies, and allowed_hosts on
// every listener.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/tests/support"
)

// forwardedSeen is what an upstream received of one JSON-RPC request.
type forwardedSeen struct {
	method string
	header http.Header
}

// headerRecorder is a go-sdk server in the test process, legacy (with
// sessions) or modern (stateless), with one tool, `whoami`, wrapped in a
// handler that records the headers of every JSON-RPC request it receives:
// what an upstream is told about the client (X-Forwarded-*).
type headerRecorder struct {
	url  string
	seen chan forwardedSeen
}

func newHeaderRecorder(t *testing.T, modern bool) *headerRecorder {
	t.Helper()
	rec := &headerRecorder{seen: make(chan forwardedSeen, 64)}
	server := mcp.NewServer(&mcp.Implementation{Name: "header-recorder", Version: "1"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "whoami", Description: "Answers ok."},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server },
		&mcp.StreamableHTTPOptions{Stateless: modern})
	rec.url = support.Serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			var msg struct {
				Method string `json:"method"`
			}
			_ = json.Unmarshal(body, &msg)
			select {
			case rec.seen <- forwardedSeen{msg.Method, r.Header.Clone()}:
			default:
			}
		}
		h.ServeHTTP(w, r)
	}))
	return rec
}

// received returns the headers of the next request for method the upstream
// received, failing after notHang.
func (rec *headerRecorder) received(t *testing.T, method string) http.Header {
	t.Helper()
	deadline := time.After(notHang)
	for {
		select {
		case s := <-rec.seen:
			if s.method == method {
				return s.header
			}
		case <-deadline:
			t.Fatalf("the upstream received no %s within %v", method, notHang)
		}
	}
}

// TestHardeningForwardedFor: a client's X-Forwarded-For, -Proto and -Host
// reach the upstream only when the client is one of Caddy's
// trusted_proxies; otherwise the upstream learns the client's real address
// (what Caddy's reverse_proxy does), in the pinned cell (legacy ↔ legacy)
// and in the modern cell alike.
func TestHardeningForwardedFor(t *testing.T) {
	t.Parallel()
	legacyUp, modernUp := newHeaderRecorder(t, false), newHeaderRecorder(t, true)
	block := "\t\tupstream " + legacyUp.url + " {\n\t\t\tera legacy\n\t\t}\n\t\tupstream " + modernUp.url + " {\n\t\t\tera modern\n\t\t}"
	spoofed := map[string]string{"X-Forwarded-For": "6.6.6.6", "X-Forwarded-Proto": "https", "X-Forwarded-Host": "bank.example"}

	// check sends a legacy initialize and a modern tools/call with the
	// spoofed headers and checks what each upstream received.
	check := func(t *testing.T, g *gateway, xff, proto, host string) {
		t.Helper()
		self := fmt.Sprintf("127.0.0.1:%d", g.Port)
		if host == "" {
			host = self
		}
		initAs(t, g.URL, spoofed)
		hdr := modernHeaders(modernVersion, "tools/call", "whoami")
		for k, v := range spoofed {
			hdr[k] = v
		}
		body := rpcBody(t, 7, "tools/call", map[string]any{"name": "whoami", "arguments": map[string]any{}, "_meta": meta(modernVersion)})
		checkToolResult(t, postRPC(t, g.URL, hdr, body, 7), 7)
		for name, got := range map[string]http.Header{
			"pinned (legacy upstream)": legacyUp.received(t, "initialize"),
			"modern upstream":          modernUp.received(t, "tools/call"),
		} {
			if v := got.Values("X-Forwarded-For"); len(v) != 1 || v[0] != xff {
				t.Errorf("%s: X-Forwarded-For %q, want %q", name, v, xff)
			}
			if v := got.Get("X-Forwarded-Proto"); v != proto {
				t.Errorf("%s: X-Forwarded-Proto %q, want %q", name, v, proto)
			}
			if v := got.Get("X-Forwarded-Host"); v != host {
				t.Errorf("%s: X-Forwarded-Host %q, want %q", name, v, host)
			}
		}
	}

	t.Run("untrusted client", func(t *testing.T) {
		check(t, startGateway(t, block), "127.0.0.1", "http", "")
	})
	t.Run("trusted proxy", func(t *testing.T) {
		g := startGatewayWith(t, "\tservers {\n\t\ttrusted_proxies static 127.0.0.1/32\n\t}", "", block)
		check(t, g, "6.6.6.6, 127.0.0.1", "https", "bank.example")
	})
}

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
	t.Parallel()
	up := newFailingLegacy(t)
	withHosts := up.block() + "\n\t\tallowed_hosts mcp.internal *.mcp.example"
	g := startGatewayWith(t, "\tservers {\n\t\tlistener_wrappers {\n\t\t\tproxy_protocol {\n\t\t\t\tallow 127.0.0.1/32\n\t\t\t}\n\t\t}\n\t}", "", withHosts)
	lan, direct := proxyClient("192.0.2.10"), http.DefaultClient
	t.Cleanup(lan.CloseIdleConnections)

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
