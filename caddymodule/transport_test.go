package caddymodule

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"go.uber.org/zap"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/legacy"
)

// parsedHandler is the handler of an mcp_gateway block with one legacy
// upstream and the given lines.
func parsedHandler(t *testing.T, lines string) *Handler {
	t.Helper()
	var h Handler
	input := "mcp_gateway {\n upstream http://127.0.0.1:9/mcp {\n era legacy\n }\n" + lines + "\n}"
	if err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser(input)); err != nil {
		t.Fatal(err)
	}
	return &h
}

// TestUnmarshalTransport: transport and peer_transport take a reverse_proxy
// transport module with its own Caddyfile syntax.
func TestUnmarshalTransport(t *testing.T) {
	h := parsedHandler(t, " transport http {\n  tls_trust_pool file /ca.pem\n  dial_timeout 2s\n }\n peer_transport http {\n  tls_insecure_skip_verify\n }")
	if got, want := string(h.TransportRaw), `{"dial_timeout":2000000000,"protocol":"http","tls":{"ca":{"pem_files":["/ca.pem"],"provider":"file"}}}`; got != want {
		t.Errorf("transport:\n got  %s\n want %s", got, want)
	}
	if got, want := string(h.Fleet.PeerTransportRaw), `{"protocol":"http","tls":{"insecure_skip_verify":true}}`; got != want {
		t.Errorf("peer_transport:\n got  %s\n want %s", got, want)
	}

	for name, c := range map[string]struct{ input, want string }{
		"no module":        {"mcp_gateway {\n transport\n}", "wrong argument count"},
		"unknown module":   {"mcp_gateway {\n transport carrier_pigeon\n}", "carrier_pigeon"},
		"twice":            {"mcp_gateway {\n transport http\n transport http\n}", "transport already specified"},
		"peer twice":       {"mcp_gateway {\n peer_transport http\n peer_transport http\n}", "peer_transport already specified"},
		"bad module input": {"mcp_gateway {\n transport http {\n  dial_timeout soon\n }\n}", "soon"},
	} {
		t.Run(name, func(t *testing.T) {
			var h Handler
			err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser(c.input))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error = %v, want it to contain %q", err, c.want)
			}
		})
	}
}

// TestProvisionTransport: without a transport the bridges keep their own
// clients; with one, every client is the transport's, the forward bridge
// on its own connections unless the transport asks for what they cannot
// do; proxy_protocol is refused.
func TestProvisionTransport(t *testing.T) {
	t.Run("none", func(t *testing.T) {
		h := parsedHandler(t, "")
		if err := provisioned(t, h); err != nil {
			t.Fatal(err)
		}
		if h.client == nil || h.bridgeClient != nil || h.reverseClient != nil || h.bridgeOpts.Client != nil || h.reverseOpts.Client != nil {
			t.Fatalf("client %v, bridge %v, reverse %v: want the built-in client and the bridges' own", h.client, h.bridgeClient, h.reverseClient)
		}
		if _, ok := h.fleet.client.Transport.(caddyTransport); ok {
			t.Fatal("the fleet's client is a transport module's without peer_transport")
		}
	})
	t.Run("own connections", func(t *testing.T) {
		h := parsedHandler(t, " transport http {\n  dial_timeout 2s\n }\n peer_transport http")
		if err := provisioned(t, h); err != nil {
			t.Fatal(err)
		}
		if _, ok := h.client.Transport.(caddyTransport); !ok {
			t.Fatalf("client transport %T, want the module's", h.client.Transport)
		}
		if _, ok := h.bridgeClient.(*legacy.ConnClient); !ok || h.bridgeOpts.Client != h.bridgeClient {
			t.Fatalf("forward bridge client %T (options %T), want its own connections", h.bridgeClient, h.bridgeOpts.Client)
		}
		if h.reverseClient != h.client || h.reverseOpts.Client != h.client {
			t.Fatal("the reverse bridge does not send through the transport")
		}
		if _, ok := h.fleet.client.Transport.(caddyTransport); !ok {
			t.Fatalf("fleet transport %T, want peer_transport's", h.fleet.client.Transport)
		}
	})
	for _, c := range []struct{ lines, why string }{
		{"keepalive off", "keepalive is off"},
		{"versions h2c", "versions excludes 1.1"},
		{"response_header_timeout 5s", "response_header_timeout is set"},
		{"max_conns_per_host 4", "max_conns_per_host is set"},
		{"tls_server_name {http.request.host}", "tls_server_name has placeholders"},
	} {
		t.Run(c.why, func(t *testing.T) {
			h := parsedHandler(t, " transport http {\n  "+c.lines+"\n }")
			if err := provisioned(t, h); err != nil {
				t.Fatal(err)
			}
			if h.bridgeClient != legacy.Doer(h.client) {
				t.Fatalf("forward bridge client %T, want the transport itself", h.bridgeClient)
			}
			if _, why := h.forwardBridgeClient(h.client.Transport.(caddyTransport).rt.(*reverseproxy.HTTPTransport)); why != c.why {
				t.Fatalf("why %q, want %q", why, c.why)
			}
		})
	}
	t.Run("proxy_protocol", func(t *testing.T) {
		h := parsedHandler(t, " transport http {\n  proxy_protocol v2\n }")
		if err := provisioned(t, h); err == nil || !strings.Contains(err.Error(), "proxy_protocol is not supported") {
			t.Fatalf("Provision: %v", err)
		}
	})
}

// TestAsDialError: a transport's dial failure is a refused connection for
// the gateway; other errors pass as they are.
func TestAsDialError(t *testing.T) {
	cause := errors.New("connect: connection refused")
	err := asDialError(fmt.Errorf("round trip: %w", reverseproxy.NewDialError(cause)))
	if !refused(err) || !legacy.Refused(err) || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("%v: want a refused connection", err)
	}
	var op *net.OpError
	if other := asDialError(cause); errors.As(other, &op) || other != cause {
		t.Fatalf("%v: changed", other)
	}
	if asDialError(nil) != nil {
		t.Fatal("nil became an error")
	}
}

// TestForwardBridgeProxied: the forward bridge sends to an upstream the
// transport reaches through a proxy through the transport itself (its
// Target's client), and to the others on its own connections.
func TestForwardBridgeProxied(t *testing.T) {
	var direct, viaStd atomic.Int32
	ok := func(n *atomic.Int32) *httptest.Server {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { n.Add(1) }))
		t.Cleanup(srv.Close)
		return srv
	}
	proxied, plain := ok(&viaStd), ok(&direct)
	proxy, _ := url.Parse("http://proxy.invalid:3128")
	std := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		return http.DefaultTransport.RoundTrip(r) // stands for the transport and its proxy
	})}
	h := &Handler{logger: zap.NewNop(), client: std,
		Upstreams: []*Upstream{{URL: proxied.URL + "/mcp"}, {URL: plain.URL + "/mcp"}}}
	ht := &reverseproxy.HTTPTransport{Versions: []string{"1.1", "2"}, Transport: &http.Transport{
		Proxy: func(r *http.Request) (*url.URL, error) {
			if "http://"+r.URL.Host == proxied.URL {
				return proxy, nil
			}
			return nil, nil
		},
	}}
	client, why := h.forwardBridgeClient(ht)
	if why != "" {
		t.Fatalf("fell back: %s", why)
	}
	for _, u := range h.Upstreams {
		h.upstreamTarget(u)
		c := client
		if u.target.Client != nil {
			c = u.target.Client
		}
		req, _ := http.NewRequest(http.MethodGet, u.URL, nil)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	if direct.Load() != 1 || viaStd.Load() != 1 {
		t.Fatalf("direct %d, through the transport %d: want 1 and 1", direct.Load(), viaStd.Load())
	}
	if h.Upstreams[0].target.Client != legacy.Doer(std) || h.Upstreams[1].target.Client != nil {
		t.Fatalf("clients of the upstreams' targets: %v, %v", h.Upstreams[0].target.Client, h.Upstreams[1].target.Client)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
