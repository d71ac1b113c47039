package caddymodule

import (
	"net"
	"net/http"
	"time"
)

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
