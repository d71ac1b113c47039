package tests

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/tests/support"
)

// fullDuplex serves h, an httputil.ReverseProxy in front of an MCP server,
// with the request body left to it while it writes the response. Without
// it the HTTP/1 server closes the request body as the proxy writes the
// upstream's response headers, and a proxy whose upstream answered before
// its transport finished the body fails that body's last read (after
// Content-Length bytes the transport reads once more for EOF; on a loaded
// machine that read can come after the answer): the transport then closes
// the upstream connection under the answer it is streaming ("use of closed
// network connection"), and the gateway behind sees the stream break.
func fullDuplex(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := http.NewResponseController(w).EnableFullDuplex(); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// TestProxyFixturesFullDuplex: the test's proxies in front of MCP servers
// (authRecorder, traceContextTap, forwardProxy) relay an answer the
// upstream streams before it has read the whole request body, and pass on
// that whole body.
// The upstream is a fixture of its own (no MCP server answers before
// reading its request): it answers once it has the body's first half, and
// the client sends the rest only once the answer's headers have reached
// it, so a proxy that takes the body from its transport when it writes the
// headers holds them back for good (the client gives up after 10 s).
func TestProxyFixturesFullDuplex(t *testing.T) {
	t.Parallel()
	const first, rest = `{"jsonrpc":"2.0","id":1,`, `"method":"ping"}`
	upstream := support.Serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		_ = rc.EnableFullDuplex()
		head := make([]byte, len(first))
		if _, err := io.ReadFull(r.Body, head); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: started\n\n")
		_ = rc.Flush()
		tail, err := io.ReadAll(r.Body)
		if err != nil {
			return // the proxy broke the request: the stream ends without the echo
		}
		fmt.Fprintf(w, "data: %s%s\n\n", head, tail)
	}))
	backend, err := url.Parse(upstream)
	if err != nil {
		t.Fatal(err)
	}
	forward, err := url.Parse(newForwardProxy(t, backend.Host).url)
	if err != nil {
		t.Fatal(err)
	}
	viaForward := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(forward)}}
	t.Cleanup(viaForward.CloseIdleConnections)
	for name, through := range map[string]struct {
		url    string
		client *http.Client
	}{
		"authRecorder":    {newAuthRecorder(t, upstream).url, http.DefaultClient},
		"traceContextTap": {newTraceContextTap(t, upstream).url, http.DefaultClient},
		"forwardProxy":    {"http://mcp.invalid/mcp", viaForward},
	} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			body, send := io.Pipe()
			context.AfterFunc(ctx, func() { _ = body.CloseWithError(ctx.Err()) }) // or the client waits on its own writer
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, through.url, body)
			if err != nil {
				t.Fatal(err)
			}
			req.ContentLength = int64(len(first + rest))
			go func() { _, _ = io.WriteString(send, first) }()
			resp, err := through.client.Do(req)
			if err != nil {
				t.Fatalf("no answer before the whole body was sent: %v", err)
			}
			defer resp.Body.Close()
			if _, err := io.WriteString(send, rest); err != nil {
				t.Fatal(err)
			}
			_ = send.Close()
			var events []string
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() {
				if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
					events = append(events, data)
				}
			}
			if err := sc.Err(); err != nil || len(events) != 2 || events[1] != first+rest {
				t.Fatalf("want the events started and %s, got %q (%v)", first+rest, events, err)
			}
		})
	}
}
