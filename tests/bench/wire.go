package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"mime"
	"net/http"
	"time"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/sse"
)

// requestHeader is sent with every request of every client: compare's -H
// (an Authorization header for a gateway with auth).
var requestHeader = http.Header{}

// client sends JSON-RPC messages to one MCP endpoint over keep-alive
// connections, with nothing between the measurement and the wire but
// net/http: no SDK, so the figures are the server's, not a client library's.
type client struct {
	hc  *http.Client
	url string
}

func newClient(url string, conns int) *client {
	tr := &http.Transport{
		MaxIdleConns:        4 * conns,
		MaxIdleConnsPerHost: 4 * conns,
		IdleConnTimeout:     time.Minute,
		DisableCompression:  true,
	}
	return &client{hc: &http.Client{Transport: tr}, url: url}
}

// at is a client for url that shares c's transport, so its keep-alive
// connections too (a transport keeps idle connections per host).
func (c *client) at(url string) *client { return &client{hc: c.hc, url: url} }

func (c *client) close() { c.hc.CloseIdleConnections() }

// post sends body with hdr and hands each JSON-RPC message of the answer (a
// JSON body, or the data of each SSE event) to each, until each returns done
// or the answer ends. The rest of an SSE stream is drained so that the
// connection can be reused. With a nil each, only a 2xx status is checked.
// It returns the response headers.
func (c *client) post(ctx context.Context, hdr map[string]string, body []byte, each func(msg []byte) (done bool, err error)) (http.Header, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range requestHeader {
		req.Header[k] = v
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if each == nil || resp.StatusCode == http.StatusAccepted {
		// A notification or an answer: only the status matters.
		_, _ = io.Copy(io.Discard, resp.Body)
		if resp.StatusCode/100 != 2 {
			return nil, fmt.Errorf("HTTP %d", resp.StatusCode)
		}
		return resp.Header, nil
	}
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if ct != "text/event-stream" {
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return nil, fmt.Errorf("reading the answer: %w", err)
		}
		if ct != "application/json" {
			return nil, fmt.Errorf("HTTP %d %q: %.200s", resp.StatusCode, ct, b)
		}
		_, err = each(b)
		return resp.Header, err
	}
	r := sse.NewReader(resp.Body, 0)
	for {
		ev, err := r.Next()
		if err == io.EOF {
			return resp.Header, fmt.Errorf("the stream ended without an answer")
		}
		if err != nil {
			return nil, fmt.Errorf("reading the stream: %w", err)
		}
		if len(ev.Data) == 0 {
			continue // a priming event
		}
		done, err := each(ev.Data)
		if err != nil || done {
			_, _ = io.Copy(io.Discard, resp.Body)
			return resp.Header, err
		}
	}
}
