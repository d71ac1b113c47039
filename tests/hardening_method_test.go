package tests

// Hardening, third round: a legacy client's method
// name, however long, must not become an upstream's Mcp-Method header or a
// log line of its length.

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/tests/support"
)

// methodRecorder is a stateless go-sdk server (the modern protocol; one
// tool, echo) behind a handler that records the longest Mcp-Method header
// and the largest request body it received.
type methodRecorder struct {
	url                        string
	mu                         sync.Mutex
	longestMethod, largestBody int
}

func newMethodRecorder(t *testing.T) *methodRecorder {
	t.Helper()
	server := mcp.NewServer(&mcp.Implementation{Name: "method-recorder", Version: "1"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "echo", Description: "Answers its text."},
		func(_ context.Context, _ *mcp.CallToolRequest, in struct {
			Text string `json:"text"`
		}) (*mcp.CallToolResult, any, error) {
			return support.Text(in.Text), nil, nil
		})
	sdk := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, &mcp.StreamableHTTPOptions{Stateless: true})
	rec := &methodRecorder{}
	rec.url = support.Serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		rec.mu.Lock()
		rec.longestMethod = max(rec.longestMethod, len(r.Header.Get("Mcp-Method")))
		rec.largestBody = max(rec.largestBody, len(body))
		rec.mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(body))
		sdk.ServeHTTP(w, r)
	}))
	return rec
}

func (rec *methodRecorder) seen() (method, body int) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return rec.longestMethod, rec.largestBody
}

// longestLine is the length of the longest line of log.
func longestLine(log string) int {
	n := 0
	for _, l := range strings.Split(log, "\n") {
		n = max(n, len(l))
	}
	return n
}

// TestHardeningReverseMethodLength: through the reverse bridge, a request
// whose method is 512 KiB long (or just over 256 bytes) gets 400 -32600
// and nothing reaches the upstream; it used to go upstream as a 512 KiB
// Mcp-Method header and into an info-level "bridged call" line of that
// length. A method of 256 bytes still goes upstream (which does not know
// it), and its log line stays short; the access log (with
// {http.mcp_gateway.method}) has no long line either.
func TestHardeningReverseMethodLength(t *testing.T) {
	t.Parallel()
	up := newMethodRecorder(t)
	g := startGatewayWith(t, "", accessLogSite, upstreamBlock(up.url, "modern"))
	sid, _ := initReverse(t, g.URL, "2025-11-25", `{}`, nil)
	_, baseline := up.seen() // server/discover

	for _, n := range []int{512 << 10, 257} {
		body := `{"jsonrpc":"2.0","id":2,"method":"` + strings.Repeat("m", n) + `"}`
		r := post(t, g.URL, legacyHeaders(sid), body)
		if code, msg := rpcErrorOf(t, r); r.StatusCode != http.StatusBadRequest || code != -32600 || !strings.Contains(msg, "256") {
			t.Errorf("a method of %d bytes: HTTP %d, %d %q; want 400, -32600 naming the bound", n, r.StatusCode, code, msg)
		}
	}
	if method, body := up.seen(); method > 256 || body > baseline+1024 {
		t.Errorf("the upstream received an Mcp-Method of %d bytes, a body of %d bytes", method, body)
	}

	r := post(t, g.URL, legacyHeaders(sid), `{"jsonrpc":"2.0","id":3,"method":"`+strings.Repeat("m", 256)+`"}`)
	_, _ = io.Copy(io.Discard, r.Body)
	if method, _ := up.seen(); method != 256 {
		t.Errorf("a method of 256 bytes: the upstream's longest Mcp-Method is %d bytes, want 256", method)
	}
	if line := waitLogLines(t, g, "bridged call", 1)[0]; len(line["method"].(string)) != 256 {
		t.Errorf("bridged call line: %v", line)
	}
	if n := longestLine(g.Log()); n > 4096 {
		t.Errorf("the gateway wrote a log line of %d bytes", n)
	}
}
