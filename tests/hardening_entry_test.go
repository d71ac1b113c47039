package tests

// Hardening, third round: what an anonymous client can make the
// gateway do at the entry, before any session or credential is checked —
// JSON-RPC batches walked before the session check (finding 3), and a
// pinned legacy request's own SEP-2243 headers passed upstream (finding 9).

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/tests/support"
)

// seenRequest is a request as a recording upstream received it.
type seenRequest struct {
	header http.Header
	body   string
}

// recordingLegacy is a go-sdk legacy server (sessions; one tool, echo)
// behind a handler that records every request it receives.
type recordingLegacy struct {
	url  string
	mu   sync.Mutex
	seen []seenRequest
}

func newRecordingLegacy(t *testing.T) *recordingLegacy {
	t.Helper()
	server := mcp.NewServer(&mcp.Implementation{Name: "recording-legacy", Version: "1"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "echo", Description: "Answers its text."},
		func(_ context.Context, _ *mcp.CallToolRequest, in struct {
			Text string `json:"text"`
		}) (*mcp.CallToolResult, any, error) {
			return support.Text(in.Text), nil, nil
		})
	sdk := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
	rec := &recordingLegacy{}
	rec.url = support.Serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		rec.mu.Lock()
		rec.seen = append(rec.seen, seenRequest{header: r.Header.Clone(), body: string(body)})
		rec.mu.Unlock()
		r.Body = io.NopCloser(strings.NewReader(string(body)))
		sdk.ServeHTTP(w, r)
	}))
	return rec
}

// received returns the requests received so far whose body contains s.
func (rec *recordingLegacy) received(s string) []seenRequest {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	var out []seenRequest
	for _, r := range rec.seen {
		if strings.Contains(r.body, s) {
			out = append(out, r)
		}
	}
	return out
}

// tinyBatch is a JSON-RPC batch of n notifications, each of them marked
// with mark in its params.
func tinyBatch(n int, mark string) string {
	el := `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"` + mark + `","progress":1}}`
	return "[" + strings.TrimSuffix(strings.Repeat(el+",", n), ",") + "]"
}

// open20250326 opens a pinned 2025-03-26 session with raw HTTP (no
// MCP-Protocol-Version header afterwards, as that revision's clients).
func open20250326(t *testing.T, url string) map[string]string {
	t.Helper()
	resp := post(t, url, nil, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || sid == "" {
		t.Fatalf("initialize: HTTP %d, session %q", resp.StatusCode, sid)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	hdr := map[string]string{"Mcp-Session-Id": sid}
	if r := post(t, url, hdr, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); r.StatusCode != http.StatusAccepted {
		t.Fatalf("notifications/initialized: HTTP %d", r.StatusCode)
	}
	return hdr
}

// TestHardeningBatchBeforeSession: a batch is judged
// by its session before any element is looked at — without a session it
// gets 400 -32000, with an unknown one 404 -32001, whatever its elements
// (they used to be walked, and an invalid one named, first) — and a batch
// of more than 100 elements (the TypeScript SDK's bound) is refused with
// 400 -32600 before anything reaches the upstream; 100 still pass.
func TestHardeningBatchBeforeSession(t *testing.T) {
	t.Parallel()
	up := newRecordingLegacy(t)
	g := startGateway(t, upstreamBlock(up.url, "legacy"))
	bad := `[{"jsonrpc":"2.0","id":1,"method":"tools/list"},7]`

	t.Run("no session: the elements are not looked at", func(t *testing.T) {
		r := post(t, g.URL, nil, bad)
		if code, msg := rpcErrorOf(t, r); r.StatusCode != http.StatusBadRequest || code != -32000 {
			t.Errorf("HTTP %d, %d %q; want 400, -32000 (session required)", r.StatusCode, code, msg)
		}
	})
	t.Run("unknown session: the elements are not looked at", func(t *testing.T) {
		r := post(t, g.URL, map[string]string{"Mcp-Session-Id": "forged"}, bad)
		if code, msg := rpcErrorOf(t, r); r.StatusCode != http.StatusNotFound || code != -32001 {
			t.Errorf("HTTP %d, %d %q; want 404, -32001", r.StatusCode, code, msg)
		}
	})

	old := open20250326(t, g.URL)
	t.Run("101 elements are refused, nothing sent", func(t *testing.T) {
		r := post(t, g.URL, old, tinyBatch(101, "too-many"))
		if code, msg := rpcErrorOf(t, r); r.StatusCode != http.StatusBadRequest || code != -32600 || !strings.Contains(msg, "100") {
			t.Errorf("HTTP %d, %d %q; want 400, -32600 naming the bound of 100", r.StatusCode, code, msg)
		}
		if n := len(up.received("too-many")); n != 0 {
			t.Errorf("the upstream received the refused batch (%d requests)", n)
		}
	})
	t.Run("100 elements pass", func(t *testing.T) {
		r := post(t, g.URL, old, tinyBatch(100, "just-enough"))
		_, _ = io.Copy(io.Discard, r.Body)
		if n := len(up.received("just-enough")); n != 1 {
			t.Errorf("HTTP %d; the upstream received the batch %d times, want once", r.StatusCode, n)
		}
	})
}

// batchBodies is how many sessionless 4 MiB batches
// TestHardeningBatchMemory sends at once, and batchHWMBound the most they
// may raise the gateway's peak resident memory: twice the target
// (128 MiB, met: BENCHMARKS.md has the figures), so that the test fails on
// the old code (+600 MiB) and not on a machine's noise.
const (
	batchBodies   = 16
	batchHWMBound = 256 << 10 // KiB
)

// TestHardeningBatchMemory: 16 concurrent 4 MiB
// batches of ~89,000 tiny elements each, sent without a session, raise the
// gateway's VmHWM by at most 256 MiB (measured: 56-96 MiB; each element
// used to be copied and kept while the batch was walked, before the
// session was checked: +600 to +709 MiB). Reproduce the figures with:
// go test -count=1 -run TestHardeningBatchMemory -v ./tests/
func TestHardeningBatchMemory(t *testing.T) {
	t.Parallel()
	up := newRecordingLegacy(t)
	g := startGateway(t, upstreamBlock(up.url, "legacy"))
	el := `{"jsonrpc":"2.0","id":1,"method":"tools/list"},`
	n := (4 << 20) / len(el)
	batch := "[" + strings.Repeat(el, n-1) + strings.TrimSuffix(el, ",") + "]"
	before := g.memKiB(t)
	postAtOnce(t, g, nil, batch, batchBodies)
	g.alive(t)
	after := g.memKiB(t)
	grew := after["VmHWM"] - before["VmHWM"]
	t.Logf("%d sessionless batches of %d elements (%d bytes) at once: VmHWM %d → %d KiB (+%d), VmRSS %d → %d KiB (+%d)",
		batchBodies, n, len(batch), before["VmHWM"], after["VmHWM"], grew, before["VmRSS"], after["VmRSS"], after["VmRSS"]-before["VmRSS"])
	if grew > batchHWMBound {
		t.Errorf("VmHWM grew by %d KiB, want at most %d KiB", grew, batchHWMBound)
	}
}

// TestHardeningLegacyRoutingHeaders: the SEP-2243
// headers (Mcp-Method, Mcp-Name, Mcp-Param-*) exist only in 2026-07-28,
// where the gateway checks them against the body; a legacy client's own
// ones are never checked, so they must not reach a pinned upstream, where a
// router that trusts them would see another tool than the one that runs.
// Its MCP-Protocol-Version and Authorization still pass.
func TestHardeningLegacyRoutingHeaders(t *testing.T) {
	t.Parallel()
	up := newRecordingLegacy(t)
	g := startGateway(t, upstreamBlock(up.url, "legacy"))
	lies := map[string]string{"Mcp-Method": "tools/list", "Mcp-Name": "harmless_tool", "Mcp-Param-Region": "eu", "Authorization": "Bearer pinned"}

	resp := post(t, g.URL, lies, strings.Replace(legacyInit, `"raw-test"`, `"routing-liar"`, 1))
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || sid == "" {
		t.Fatalf("initialize: HTTP %d, session %q", resp.StatusCode, sid)
	}
	hdr := legacyHeaders(sid)
	for k, v := range lies {
		hdr[k] = v
	}
	call := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"routed-by-body"}}}`
	if text := checkToolResult(t, readRPC(t, post(t, g.URL, hdr, call), 2), 2); text != "routed-by-body" {
		t.Fatalf("echo: %q", text)
	}
	for _, mark := range []string{"routing-liar", "routed-by-body"} {
		got := up.received(mark)
		if len(got) != 1 {
			t.Fatalf("the upstream received %d requests marked %q, want 1", len(got), mark)
		}
		for k := range got[0].header {
			if lk := strings.ToLower(k); lk == "mcp-method" || lk == "mcp-name" || strings.HasPrefix(lk, "mcp-param-") {
				t.Errorf("%s: %s: %q reached the upstream", mark, k, got[0].header.Values(k))
			}
		}
		if got[0].header.Get("Authorization") != "Bearer pinned" {
			t.Errorf("%s: Authorization did not reach the upstream", mark)
		}
		if mark == "routed-by-body" && got[0].header.Get("MCP-Protocol-Version") != "2025-11-25" {
			t.Errorf("MCP-Protocol-Version did not reach the upstream")
		}
	}
}
