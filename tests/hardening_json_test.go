package tests

// JSON hygiene: nesting bombs from clients and
// from upstreams must neither crash the gateway nor cost it the stack a
// recursive validator spends on them, and a legacy client's repeated
// params members must not give the headers the gateway writes one value
// and the upstream another.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/tests/support"
)

// bombSize is the size of the nested arrays a hostile upstream answers
// with: within the gateway's 16 MiB bound on one upstream answer or event,
// and far beyond what a recursive validator survives (about 160 bytes of
// stack per level: 2.4 GiB, over Go's 1 GiB stack limit).
const bombSize = 15 << 20

// seenCall is a tools/call as a hostile upstream received it: the tool
// name its Mcp-Name header gave, and the one encoding/json reads from the
// body (the last of repeated members, as go-sdk and JSON.parse do).
type seenCall struct {
	header, body string
}

// bombUpstream is a hostile upstream written for these tests: a real go-sdk
// server (legacy with sessions, or modern and stateless) behind a handler
// that answers every tools/call of the tool "bomb" itself, with a JSON-RPC
// response whose result is bombSize bytes of "[": as a JSON answer when
// the argument form is "json", as one SSE event when it is "sse" (the
// stream is then held open until the gateway hangs up, which hangups
// reports). Every other request reaches the real server, whose tool "echo"
// answers "alive". Every tools/call received is reported on calls.
type bombUpstream struct {
	url     string
	era     string
	calls   chan seenCall
	hangups chan struct{}
}

func newBombUpstream(t *testing.T, modern bool) *bombUpstream {
	t.Helper()
	b := &bombUpstream{era: "legacy", calls: make(chan seenCall, 64), hangups: make(chan struct{}, 16)}
	if modern {
		b.era = "modern"
	}
	server := mcp.NewServer(&mcp.Implementation{Name: "bomb-" + b.era, Version: "1"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "echo", Description: "Answers alive."},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "alive"}}}, nil, nil
		})
	mcp.AddTool(server, &mcp.Tool{Name: "target", Description: "Runs against a target."},
		func(_ context.Context, _ *mcp.CallToolRequest, in struct {
			Target string `json:"target"`
		}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ran against " + in.Target}}}, nil, nil
		})
	opts := &mcp.StreamableHTTPOptions{Stateless: modern}
	sdk := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, opts)
	nested := strings.Repeat("[", bombSize)
	b.url = support.Serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			sdk.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Name      string `json:"name"`
				Arguments struct {
					Form string `json:"form"`
				} `json:"arguments"`
			} `json:"params"`
		}
		_ = json.Unmarshal(body, &msg)
		if msg.Method != "tools/call" {
			sdk.ServeHTTP(w, r)
			return
		}
		select {
		case b.calls <- seenCall{header: r.Header.Get("Mcp-Name"), body: msg.Params.Name}:
		default:
		}
		if msg.Params.Name != "bomb" {
			sdk.ServeHTTP(w, r)
			return
		}
		answer := `{"jsonrpc":"2.0","id":` + string(msg.ID) + `,"result":` + nested
		if msg.Params.Arguments.Form != "sse" {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, answer)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, "event: message\ndata: "+answer+"\n\n")
		http.NewResponseController(w).Flush()
		<-r.Context().Done()
		b.hangups <- struct{}{}
	}))
	return b
}

func (b *bombUpstream) block() string {
	return "\t\tupstream " + b.url + " {\n\t\t\tera " + b.era + "\n\t\t}"
}

// alive fails the test unless the gateway process is still running and
// answers a request; its last words are in the failure when it died.
func (g *gateway) alive(t *testing.T) {
	t.Helper()
	select {
	case <-g.done:
		t.Fatalf("the gateway process died: %s", lastWords(g.Log()))
	default:
	}
	resp, err := http.Get(strings.TrimSuffix(g.URL, "/mcp") + "/")
	if err != nil {
		<-g.done
		t.Fatalf("the gateway does not answer (%v); it died: %s", err, lastWords(g.Log()))
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
}

// lastWords is the fatal error of a crashed Go process, if its log has one.
func lastWords(log string) string {
	if i := strings.Index(log, "fatal error:"); i >= 0 {
		return strings.SplitN(log[i:], "\n", 2)[0]
	}
	return tail(log, 500)
}

// refusedAs posts a request body and asserts a 400 with the JSON-RPC code,
// the message naming want; a dead gateway fails the test with its last
// words.
func refusedAs(t *testing.T, g *gateway, hdr map[string]string, body string, code int, want string) {
	t.Helper()
	resp, err := tryPost(g.URL, hdr, body)
	if err != nil {
		g.alive(t)
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, msg := rpcErrorOf(t, resp)
	if resp.StatusCode != http.StatusBadRequest || got != code || !strings.Contains(msg, want) {
		t.Fatalf("HTTP %d, JSON-RPC %d %q; want 400, %d naming %q", resp.StatusCode, got, msg, code, want)
	}
}

// TestHardeningJSONRequestBomb: with max_request_body 12MiB, a 10 MiB body
// of "[" — a modern request, and a legacy one on an open session — is
// refused with 400 -32700 naming the depth limit, and the gateway goes on
// serving (a recursive validator would need ~1.6 GiB of stack: the process
// died of "fatal error: stack overflow").
func TestHardeningJSONRequestBomb(t *testing.T) {
	t.Parallel()
	up := newBombUpstream(t, false)
	bomb := strings.Repeat("[", 10<<20)
	block := up.block() + "\n\t\tmax_request_body 12MiB"
	t.Run("modern", func(t *testing.T) {
		g := startGateway(t, block)
		refusedAs(t, g, modernHeaders(modernVersion, "tools/call", "echo"), bomb, -32700, "nested deeper than 128 levels")
		g.alive(t)
		x := readRPC(t, modernCall(t, g.URL, 2, "echo", map[string]any{}, nil), 2)
		if got := checkToolResult(t, x, 2); got != "alive" {
			t.Fatalf("echo after the bomb: %q", got)
		}
	})
	t.Run("legacy", func(t *testing.T) {
		g := startGateway(t, block)
		sid := openLegacySession(t, g.URL)
		refusedAs(t, g, legacyHeaders(sid), `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"a":`+bomb,
			-32700, "nested deeper than 128 levels")
		g.alive(t)
		x := postRPC(t, g.URL, legacyHeaders(sid), `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{}}}`, 3)
		if got := checkToolResult(t, x, 3); got != "alive" {
			t.Fatalf("echo after the bomb: %q", got)
		}
	})
}

// TestHardeningJSONUpstreamBomb: an upstream answering a call with 15 MiB of
// nested arrays, as a JSON answer or as an SSE event, in the cells where
// the gateway parses upstream answers (the forward bridge: a modern client
// in front of a legacy upstream; the reverse bridge: a legacy client in
// front of a modern upstream), gets the client a -32603, its SSE stream is
// closed (nothing left hanging), and the gateway goes on serving. In the
// pass-through cells (modern ↔ modern, legacy ↔ legacy) the gateway relays
// the answer's bytes without parsing them: the client gets them as sent.
func TestHardeningJSONUpstreamBomb(t *testing.T) {
	t.Parallel()
	legacyUp, modernUp := newBombUpstream(t, false), newBombUpstream(t, true)
	for _, form := range []string{"json", "sse"} {
		t.Run("forward/"+form, func(t *testing.T) {
			g := startGateway(t, legacyUp.block())
			resp, err := tryPost(g.URL, modernHeaders(modernVersion, "tools/call", "bomb"), rpcBody(t, 1, "tools/call",
				map[string]any{"name": "bomb", "arguments": map[string]any{"form": form}, "_meta": meta(modernVersion)}))
			if err != nil {
				g.alive(t)
				t.Fatal(err)
			}
			checkRPCError(t, readRPC(t, resp, 1), http.StatusBadGateway, -32603, 1)
			if form == "sse" {
				legacyUp.awaitHangup(t)
			}
			g.alive(t)
			if got := checkToolResult(t, readRPC(t, modernCall(t, g.URL, 2, "echo", map[string]any{}, nil), 2), 2); got != "alive" {
				t.Fatalf("echo after the bomb: %q", got)
			}
		})
		t.Run("reverse/"+form, func(t *testing.T) {
			g := startGateway(t, modernUp.block())
			sid, _ := initReverse(t, g.URL, "2025-11-25", `{}`, nil)
			resp, err := tryPost(g.URL, legacyHeaders(sid), `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"bomb","arguments":{"form":"`+form+`"}}}`)
			if err != nil {
				g.alive(t)
				t.Fatal(err)
			}
			checkRPCError(t, readRPC(t, resp, 2), http.StatusBadGateway, -32603, 2)
			if form == "sse" {
				modernUp.awaitHangup(t)
			}
			g.alive(t)
			x := postRPC(t, g.URL, legacyHeaders(sid), `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{}}}`, 3)
			if got := checkToolResult(t, x, 3); got != "alive" {
				t.Fatalf("echo after the bomb: %q", got)
			}
		})
	}
	t.Run("pass-through", func(t *testing.T) {
		// Relayed, not parsed: the bytes arrive as the upstream sent them.
		relayed := func(t *testing.T, resp *http.Response) {
			t.Helper()
			defer resp.Body.Close()
			n, err := io.Copy(io.Discard, resp.Body)
			if err != nil || resp.StatusCode != http.StatusOK || n < bombSize {
				t.Fatalf("HTTP %d, %d bytes (%v); want the %d-byte answer relayed", resp.StatusCode, n, err, bombSize)
			}
		}
		g := startGateway(t, modernUp.block())
		relayed(t, post(t, g.URL, modernHeaders(modernVersion, "tools/call", "bomb"), rpcBody(t, 1, "tools/call",
			map[string]any{"name": "bomb", "arguments": map[string]any{"form": "json"}, "_meta": meta(modernVersion)})))
		g.alive(t)
		g = startGateway(t, legacyUp.block())
		sid := openLegacySession(t, g.URL)
		relayed(t, post(t, g.URL, legacyHeaders(sid), `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"bomb","arguments":{"form":"json"}}}`))
		g.alive(t)
	})
}

// awaitHangup waits until the gateway closed a bombed SSE stream.
func (b *bombUpstream) awaitHangup(t *testing.T) {
	t.Helper()
	select {
	case <-b.hangups:
	case <-time.After(notHang):
		t.Fatalf("the gateway still holds the bombed %s upstream stream after %v", b.era, notHang)
	}
}

// TestHardeningJSONDuplicateParams: a legacy client in front of a modern
// upstream (the reverse bridge, where the gateway writes Mcp-Name and
// Mcp-Param-* from the body) cannot send params whose repeated members
// would give the headers one value (gjson: the first) and the upstream
// another (the last): `"name":"echo",…,"name":"target"` is refused with
// 400 -32602 before anything reaches the upstream, and so are repeated
// argument names. The upstream's first tools/call is the valid one sent
// afterwards.
func TestHardeningJSONDuplicateParams(t *testing.T) {
	t.Parallel()
	up := newBombUpstream(t, true)
	g := startGateway(t, up.block())
	sid, _ := initReverse(t, g.URL, "2025-11-25", `{}`, nil)
	for _, params := range []string{
		`{"name":"echo","arguments":{},"name":"target"}`,
		`{"name":"target","arguments":{"target":"staging","target":"production"}}`,
		`{"name":"target","arguments":{"target":"staging"},"arguments":{"target":"production"}}`,
	} {
		refusedAs(t, g, legacyHeaders(sid), `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":`+params+`}`, -32602, "duplicate member")
	}
	x := postRPC(t, g.URL, legacyHeaders(sid), `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{}}}`, 3)
	if got := checkToolResult(t, x, 3); got != "alive" {
		t.Fatalf("echo: %q", got)
	}
	// The upstream answered echo, so it has reported every call it got.
	if c := <-up.calls; c != (seenCall{header: "echo", body: "echo"}) {
		t.Fatalf("the upstream received a tools/call for %q under Mcp-Name %q before the valid one", c.body, c.header)
	}
}

// TestHardeningJSONBombMemory measures (it does not assert) what 4 MiB
// request bodies of "[" cost the gateway: the growth of the process's peak
// resident memory (VmHWM) and of its resident memory (VmRSS) over one such
// body, then over 8 more sent one at a time, then over 8 more sent 4 at a
// time. Run it
// with: go test -count=1 -run TestHardeningJSONBombMemory -v ./tests/
func TestHardeningJSONBombMemory(t *testing.T) {
	t.Parallel()
	up := newBombUpstream(t, true)
	g := startGateway(t, up.block())
	sid, _ := initReverse(t, g.URL, "2025-11-25", `{}`, nil)
	bomb := strings.Repeat("[", 4<<20)
	for _, run := range []struct{ bodies, parallel int }{{1, 1}, {8, 1}, {8, 4}} {
		before := g.memKiB(t)
		for range run.bodies / run.parallel {
			postAtOnce(t, g, legacyHeaders(sid), bomb, run.parallel)
		}
		g.alive(t)
		after := g.memKiB(t)
		t.Logf("%d bodies of 4 MiB of \"[\", %d at a time: VmHWM %d → %d KiB (+%d), VmRSS %d → %d KiB (+%d)", run.bodies, run.parallel,
			before["VmHWM"], after["VmHWM"], after["VmHWM"]-before["VmHWM"], before["VmRSS"], after["VmRSS"], after["VmRSS"]-before["VmRSS"])
	}
}

// postAtOnce posts body to g n times at once, and fails unless every
// answer is 400 and g still runs.
func postAtOnce(t *testing.T, g *gateway, hdr map[string]string, body string, n int) {
	t.Helper()
	done := make(chan error, n)
	for range n {
		go func() {
			resp, err := tryPost(g.URL, hdr, body)
			if err == nil {
				_, err = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusBadRequest {
					err = fmt.Errorf("HTTP %d, want 400", resp.StatusCode)
				}
			}
			done <- err
		}()
	}
	for range n {
		if err := <-done; err != nil {
			g.alive(t)
			t.Fatal(err)
		}
	}
}

// memKiB reads VmHWM and VmRSS of the gateway process.
func (g *gateway) memKiB(t *testing.T) map[string]int {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", g.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && (f[0] == "VmHWM:" || f[0] == "VmRSS:") {
			out[strings.TrimSuffix(f[0], ":")], _ = strconv.Atoi(f[1])
		}
	}
	return out
}
