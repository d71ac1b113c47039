package caddymodule

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/legacy"
)

// The transport option: Caddy's own http.reverse_proxy.transport modules
// (reverseproxy.HTTPTransport above all) carry every request the gateway
// sends upstream, so that `transport http { tls_trust_pool …;
// tls_client_auth …; dial_timeout …; resolvers … }` means what it means
// under reverse_proxy. The forward bridge keeps its own HTTP/1.1
// connections (legacy.ConnClient), made with the transport's dialer and
// TLS configuration, unless the transport asks for something those
// connections cannot do (forwardBridgeClient says what).

// noRedirect keeps redirects from being followed: an MCP endpoint does not
// redirect, and following one could leak tokens.
func noRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// provisionTransport sets the clients this handler reaches its upstreams
// with: h.client (pass-through, probes and health checks), and, when a
// transport is configured, h.reverseClient (the reverse bridge's: h.client)
// and h.bridgeClient (the forward bridge's upstream sessions); without one
// the shared bridges keep their own. (LoadModule empties TransportRaw.)
func (h *Handler) provisionTransport(ctx caddy.Context) error {
	if h.fed != nil {
		// A federated block's one upstream is its merged endpoint.
		h.client = &http.Client{Transport: inProcess{serve: h.serveInProcess}, CheckRedirect: noRedirect}
		h.reverseClient = h.client
		return nil
	}
	if h.TransportRaw == nil {
		h.client = newUpstreamClient(64)
		return nil
	}
	mod, rt, err := loadTransport(ctx, h, "TransportRaw", "transport")
	if err != nil {
		return err
	}
	h.client = &http.Client{Transport: rt, CheckRedirect: noRedirect}
	h.reverseClient = h.client
	ht, _ := mod.(*reverseproxy.HTTPTransport)
	h.guardTransport(ht)
	isHTTPS := func(u *Upstream) bool { return strings.HasPrefix(u.URL, "https:") }
	if ht != nil && ht.TLS != nil && !slices.ContainsFunc(h.Upstreams, isHTTPS) && (h.DynamicEndpoint == nil || !isHTTPS(h.DynamicEndpoint)) {
		h.logger.Warn("transport: tls options are set but no upstream URL is https: TLS is used for https upstreams only")
	}
	var why string
	h.bridgeClient, why = h.forwardBridgeClient(ht)
	if why != "" {
		h.logger.Info("transport: the forward bridge sends through the transport itself, not its own connections", zap.String("because", why))
	}
	return nil
}

// guardTransport puts the dial guard (dynamic_refuse, addrpolicy.go) on the
// dialers of ht, the http transport (nil: another transport module, whose
// connections cannot be checked: a warning is logged when this handler's
// dynamic upstreams have ranges to refuse).
func (h *Handler) guardTransport(ht *reverseproxy.HTTPTransport) {
	if ht == nil || ht.Transport == nil {
		if h.dynamic != nil && h.dynamic.refuse != nil {
			h.logger.Warn("transport: not the http transport: the addresses dynamic upstream names resolve to are not checked (dynamic_refuse applies to the addresses the source answers only)")
		}
		return
	}
	if t := ht.Transport; t.DialContext != nil {
		t.DialContext = guardDial(t.DialContext)
	}
	if t := ht.Transport; t.DialTLSContext != nil {
		t.DialTLSContext = guardDial(t.DialTLSContext)
	}
}

// loadTransport loads the transport module in field of the struct that
// structPtr points to (an http.reverse_proxy.transport module), checks it
// can serve the gateway, and returns it and the RoundTripper to use.
func loadTransport(ctx caddy.Context, structPtr any, field, option string) (any, http.RoundTripper, error) {
	rt, mod, err := loadAs[http.RoundTripper](ctx, structPtr, field, option)
	if err != nil {
		return nil, nil, err
	}
	if pp, ok := mod.(reverseproxy.ProxyProtocolTransport); ok && pp.ProxyProtocolEnabled() {
		// The PROXY header names the client of the request being
		// proxied; the gateway's upstream sessions and probes have none.
		return nil, nil, fmt.Errorf("%s: proxy_protocol is not supported by mcp_gateway", option)
	}
	return mod, caddyTransport{rt}, nil
}

// caddyTransport adapts a reverse_proxy transport to the gateway's
// requests, which do not all come from a client's request: it gives them a
// replacer when they have none (a tls_server_name with placeholders reads
// it), and reports a connection never made as the *net.OpError "dial" the
// gateway recognizes (reverseproxy.DialError does not unwrap).
type caddyTransport struct{ rt http.RoundTripper }

// RoundTrip implements http.RoundTripper.
func (t caddyTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if _, ok := req.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer); !ok {
		req = req.WithContext(context.WithValue(req.Context(), caddy.ReplacerCtxKey, caddy.NewReplacer()))
	}
	resp, err := t.rt.RoundTrip(req)
	return resp, asDialError(err)
}

// asDialError returns a reverseproxy.DialError as a *net.OpError "dial",
// and other errors as they are.
func asDialError(err error) error {
	var de reverseproxy.DialError
	if err != nil && errors.As(err, &de) {
		return &net.OpError{Op: "dial", Err: de}
	}
	return err
}

// forwardBridgeClient returns the client of the forward bridge's upstream
// sessions with transport ht (nil: not the http transport): a
// legacy.ConnClient with ht's dialer (dial_timeout, resolvers,
// local_address, keepalive probes, read and write timeouts), TLS
// configuration (trust pool, client certificate, server name, ...) and
// TLS handshake timeout, idle pool and response header limit. The
// upstreams the transport reaches through a proxy from the environment
// are reached through h.client instead: h.viaProxy says which, for each
// upstream once (upstreamTarget). When ConnClient cannot do what the
// transport asks, every request goes through h.client, and why says what.
func (h *Handler) forwardBridgeClient(ht *reverseproxy.HTTPTransport) (client legacy.Doer, why string) {
	if ht == nil {
		return h.client, "the transport is not the http transport"
	}
	t := ht.Transport
	switch {
	case !slices.Contains(ht.Versions, "1.1"):
		return h.client, "versions excludes 1.1"
	case t.DialTLSContext != nil:
		return h.client, "tls_server_name has placeholders"
	case len(ht.NetworkProxyRaw) > 0 || ht.ForwardProxyURL != "":
		return h.client, "a network proxy is configured"
	case t.ResponseHeaderTimeout > 0:
		return h.client, "response_header_timeout is set"
	case t.MaxConnsPerHost > 0:
		return h.client, "max_conns_per_host is set"
	case t.DisableKeepAlives:
		return h.client, "keepalive is off"
	}
	// t's dialers are guarded already (guardTransport).
	dial := guardDial((&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext)
	if t.DialContext != nil {
		dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
			nc, err := t.DialContext(ctx, network, addr)
			return nc, asDialError(err)
		}
	}
	conn := legacy.NewConnClient(legacy.ConnOptions{
		Dial:                dial,
		TLSHandshakeTimeout: t.TLSHandshakeTimeout,
		TLSConfig:           t.TLSClientConfig,
		MaxIdlePerHost:      t.MaxIdleConnsPerHost,
		IdleTimeout:         t.IdleConnTimeout,
		MaxHeaderBytes:      int(t.MaxResponseHeaderBytes),
		Spares:              upstreamSpares,
	})
	if proxy := t.Proxy; proxy != nil {
		// A proxy from the environment (HTTP_PROXY, HTTPS_PROXY,
		// NO_PROXY), as the transport itself would use it.
		h.viaProxy = func(u *Upstream) bool {
			parsed, err := url.Parse(u.URL)
			if err != nil {
				return false
			}
			p, err := proxy(&http.Request{Method: http.MethodPost, URL: parsed, Header: http.Header{}})
			return err != nil || p != nil
		}
	}
	return conn, ""
}

// provisionPeerTransport loads peer_transport, the client of forwarding
// between instances (h.peerClient; nil keeps the built-in one,
// newPeerClient).
func (h *Handler) provisionPeerTransport(ctx caddy.Context) error {
	if h.Fleet.PeerTransportRaw == nil {
		return nil
	}
	_, rt, err := loadTransport(ctx, &h.Fleet, "PeerTransportRaw", "peer_transport")
	if err != nil {
		return err
	}
	h.peerClient = &http.Client{Transport: rt, CheckRedirect: noRedirect}
	return nil
}

// newPeerClient is the built-in client of forwarding between instances:
// HTTP/1.1 on the calling goroutine (legacy.ConnClient, as for the
// bridge's upstream sessions: no hand-offs to a transport's goroutines on
// every relayed request), direct (no proxy from the environment), the
// system's roots, bounded dial and TLS handshake, no redirects. A
// forwarded request says Expect: 100-continue (relay.go) but its body goes
// with its headers, without waiting for the owner's "100 Continue": that
// wait would cost every relayed request a round trip between the
// instances.
func newPeerClient() *http.Client {
	return &http.Client{
		Transport: legacy.NewConnClient(legacy.ConnOptions{
			DialTimeout: forwardDialTimeout, TLSHandshakeTimeout: forwardDialTimeout, MaxIdlePerHost: 32,
		}),
		CheckRedirect: noRedirect,
	}
}

// connBufferSize is the read and the write buffer of each upstream
// connection (net/http's default is 4 KiB each). A parked call holds two
// connections open for minutes; MCP messages are mostly far smaller, and
// larger ones only take more reads.
const connBufferSize = 1 << 10

// newUpstreamClient returns the HTTP client the gateway reaches upstreams
// with: direct (no proxy from the environment), bounded dial and TLS
// handshake, keep-alive pooling with up to idlePerHost idle connections per
// upstream, small connection buffers, the dial guard (dynamic_refuse), and
// no redirects (an MCP endpoint does
// not redirect, and following one could leak tokens).
func newUpstreamClient(idlePerHost int) *http.Client {
	return &http.Client{
		Transport: &http.Transport{
			Proxy:                 nil,
			DialContext:           guardDial((&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext),
			MaxIdleConns:          4 * idlePerHost,
			MaxIdleConnsPerHost:   idlePerHost,
			IdleConnTimeout:       90 * time.Second,
			TLSHandshakeTimeout:   10 * time.Second,
			ExpectContinueTimeout: time.Second,
			ReadBufferSize:        connBufferSize,
			WriteBufferSize:       connBufferSize,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}
