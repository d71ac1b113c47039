package tests

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Interop fixes found with third-party peers: fastmcp's -32601 for
// an unknown tool, 2025-03-26 batches, @ai-sdk/mcp's two GETs after
// initialize, and a modern server's -32021 reaching 2025 clients.

// startFastMCP runs tests/node/interop-fastmcp-server.mjs, a fastmcp server
// (legacy sessions; one tool, echo) on 127.0.0.1, and returns its URL.
func startFastMCP(t *testing.T) string {
	t.Helper()
	node := nodeBin(t)
	nodeFile(t, "fastmcp/package.json")
	port := freePort(t)
	u := fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
	cmd := exec.Command(node, filepath.Join(testsDir(t), "node", "interop-fastmcp-server.mjs"), fmt.Sprint(port))
	cmd.Dir = testsDir(t)
	startPeer(t, "fastmcp", cmd).waitUp(t, u)
	return u
}

// upstreamBlock is a gateway block whose only upstream is url, of era.
func upstreamBlock(url, era string) string {
	return "\t\tupstream " + url + " {\n\t\t\tera " + era + "\n\t\t}"
}

// TestInteropUnknownToolInBand: fastmcp answers a tools/call for an unknown
// tool with -32601. Through the forward bridge, the TypeScript SDK 2.x
// client (pinned to 2026-07-28) must get that JSON-RPC error as a protocol
// error with its code, which needs HTTP 200: on a 404 it reports a
// transport failure and the code is lost. A method the upstream does not
// offer (no prompts capability) or that the gateway does not serve still
// gets 404 / -32601.
func TestInteropUnknownToolInBand(t *testing.T) {
	t.Parallel()
	g := startGateway(t, upstreamBlock(startFastMCP(t), "legacy"))

	t.Run("TypeScript SDK 2.x client", func(t *testing.T) {
		out, err := runNodeScript(t, "interop-call-error.mjs", g.URL, "no_such_tool")
		if err != nil {
			t.Fatal(err)
		}
		var got struct {
			Era   string
			Error *struct {
				Name    string
				Code    *int
				Message string
			}
		}
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("%s: %v", out, err)
		}
		if got.Era != "modern" || got.Error == nil {
			t.Fatalf("want a modern session and an error: %s", out)
		}
		if got.Error.Code == nil || *got.Error.Code != -32601 || !strings.Contains(got.Error.Message, "Unknown tool") {
			t.Fatalf("the client lost the upstream's JSON-RPC error (want code -32601, fastmcp's message): %s", out)
		}
	})

	t.Run("raw", func(t *testing.T) {
		call := func(id int, method, name string, params map[string]any) rpcExchange {
			params["_meta"] = meta(modernVersion)
			return postRPC(t, g.URL, modernHeaders(modernVersion, method, name), rpcBody(t, id, method, params), id)
		}
		x := call(1, "tools/call", "no_such_tool", map[string]any{"name": "no_such_tool", "arguments": map[string]any{}})
		if e := checkRPCError(t, x, http.StatusOK, -32601, 1); e != nil && !strings.Contains(e.Error.Message, "Unknown tool") {
			t.Errorf("not fastmcp's message: %s", x)
		}
		// fastmcp declares no prompts: prompts/list is a method it lacks.
		checkRPCError(t, call(2, "prompts/list", "", map[string]any{}), http.StatusNotFound, -32601, 2)
		// A method the gateway does not serve for a legacy upstream (2025's
		// tasks/list; the 2026 extension has none).
		checkRPCError(t, call(3, "tasks/list", "", map[string]any{}), http.StatusNotFound, -32601, 3)
		// tasks/get is the gateway's own (it hosts tasks): without the
		// extension it asks for the capability, it is not a missing method.
		checkRPCError(t, call(5, "tasks/get", "t", map[string]any{"taskId": "t"}), http.StatusBadRequest, -32021, 5)
		// And what the upstream does serve still works.
		if text := checkToolResult(t, call(4, "tools/call", "echo", map[string]any{"name": "echo", "arguments": map[string]any{"text": "hi"}}), 4); text != "hi" {
			t.Errorf("echo: %q", text)
		}
	})
}

// TestInteropBatches20250326: the TypeScript SDK 1.12 client speaks
// 2025-03-26 and POSTs JSON-RPC batches; fastmcp, pinned, accepts them. The
// gateway passes a valid batch of a 2025-03-26 session through, checks every
// element as it checks a single message, and refuses batches (400, -32600)
// where the session's revision has none (2025-06-18 and later, which send
// MCP-Protocol-Version) and in gateway-held sessions.
func TestInteropBatches20250326(t *testing.T) {
	t.Parallel()
	g := startGateway(t, upstreamBlock(startFastMCP(t), "legacy"))

	t.Run("SDK 1.12 client", func(t *testing.T) {
		out, err := runNodeScript(t, "interop-batch-client.mjs", g.URL, "echo", `{"text":"batched"}`)
		if err != nil {
			t.Fatal(err)
		}
		var got struct {
			ProtocolVersion string
			Error           string
			Responses       []struct {
				ID     string
				Result *toolResult
				Error  any
			}
		}
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("%s: %v", out, err)
		}
		if got.Error != "" || len(got.Responses) != 2 {
			t.Fatalf("want the batch's two responses: %s", out)
		}
		for _, r := range got.Responses {
			if r.Result == nil || r.Error != nil {
				t.Errorf("%s: no result: %s", r.ID, out)
			}
			if r.ID == "batch-2" && r.Result != nil && r.Result.text() != "batched" {
				t.Errorf("tools/call in the batch: %s", out)
			}
		}
	})

	// A 2025-03-26 session opened with raw HTTP (no MCP-Protocol-Version
	// header afterwards, as that revision's clients).
	resp := post(t, g.URL, nil, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || sid == "" {
		t.Fatalf("initialize: HTTP %d, session %q", resp.StatusCode, sid)
	}
	old := map[string]string{"Mcp-Session-Id": sid}
	if r := post(t, g.URL, old, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); r.StatusCode != http.StatusAccepted {
		t.Fatalf("notifications/initialized: HTTP %d", r.StatusCode)
	}
	list := `{"jsonrpc":"2.0","id":7,"method":"tools/list"}`

	t.Run("raw batch of notifications", func(t *testing.T) {
		r := post(t, g.URL, old, `[{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"x","progress":1}}]`)
		if r.StatusCode != http.StatusAccepted {
			t.Errorf("HTTP %d, want 202 from the upstream", r.StatusCode)
		}
	})

	refused := []struct {
		name string
		hdr  map[string]string
		body string
		want string
	}{
		{"empty batch", old, `[]`, "empty batch"},
		{"an element that is not an object", old, `[` + list + `,7]`, "batch element 1"},
		{"an element without jsonrpc", old, `[` + list + `,{"id":8,"method":"tools/list"}]`, "batch element 1"},
		{"an element with a bad id", old, `[{"jsonrpc":"2.0","id":{},"method":"tools/list"}]`, "batch element 0"},
		{"an element with a repeated member", old, `[{"jsonrpc":"2.0","id":1,"method":"tools/list","method":"ping"}]`, "batch element 0"},
		{"initialize in a batch", old, `[{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}]`, "initialize"},
		{"responses mixed with requests", old, `[` + list + `,{"jsonrpc":"2.0","id":"a","result":{}}]`, "not both"},
		{"a 2025-06-18 session", map[string]string{"Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-06-18"}, `[` + list + `]`, "2025-06-18"},
		{"a 2025-11-25 session", map[string]string{"Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"}, `[` + list + `]`, "2025-11-25"},
	}
	for _, c := range refused {
		t.Run("refused: "+c.name, func(t *testing.T) {
			r := post(t, g.URL, c.hdr, c.body)
			code, msg := rpcErrorOf(t, r)
			if r.StatusCode != http.StatusBadRequest || code != -32600 || !strings.Contains(msg, c.want) {
				t.Errorf("HTTP %d, %d %q; want 400, -32600 naming %q", r.StatusCode, code, msg, c.want)
			}
		})
	}
	t.Run("refused: nested too deep, before it is parsed", func(t *testing.T) {
		body := `[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"a":` + strings.Repeat("[", 200) + strings.Repeat("]", 200) + `}}}]`
		r := post(t, g.URL, old, body)
		if code, msg := rpcErrorOf(t, r); r.StatusCode != http.StatusBadRequest || code != -32700 || !strings.Contains(msg, "nested deeper") {
			t.Errorf("HTTP %d, %d %q; want 400, -32700", r.StatusCode, code, msg)
		}
	})
	t.Run("refused: a modern request", func(t *testing.T) {
		body := `[` + rpcBody(t, 9, "tools/list", map[string]any{"_meta": meta(modernVersion)}) + `]`
		r := post(t, g.URL, modernHeaders(modernVersion, "tools/list", ""), body)
		if code, _ := rpcErrorOf(t, r); r.StatusCode != http.StatusBadRequest || code != -32600 {
			t.Errorf("HTTP %d, %d; want 400, -32600", r.StatusCode, code)
		}
	})
}

// slowDiscoverModern is a modern-only go-sdk server (stateless) written for
// these tests. It advertises no notifications (tools without listChanged,
// no resources), so a legacy session in front of it has no GET stream; its
// server/discover results carry ttlMs 0 (the gateway asks every time) and
// take 300 ms to come (a fixture wrapper delays them), so that two GETs
// of one session overlap while the gateway asks. Its tool `needs_elicitation`
// answers -32021 (MissingRequiredClientCapability, with
// data.requiredCapabilities) unless the request's client capabilities hold
// elicitation.
func slowDiscoverModern(t *testing.T) string {
	t.Helper()
	server := mcp.NewServer(&mcp.Implementation{Name: "interop-modern", Version: "1"}, &mcp.ServerOptions{
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}},
		SetCacheable: func(_ context.Context, _ mcp.Request, c *mcp.Cacheable) { c.TTLMs = 0 },
	})
	mcp.AddTool(server, &mcp.Tool{Name: "needs_elicitation", Description: "Needs the elicitation capability."},
		func(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			if caps := req.ClientCapabilities(); caps == nil || caps.Elicitation == nil {
				return nil, nil, &jsonrpc.Error{Code: -32021, Message: "needs_elicitation needs the elicitation capability",
					Data: json.RawMessage(`{"requiredCapabilities":{"elicitation":{}}}`)}
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil, nil
		})
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, &mcp.StreamableHTTPOptions{Stateless: true})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Mcp-Method") == "server/discover" {
			select {
			case <-time.After(300 * time.Millisecond):
			case <-r.Context().Done():
				return
			}
		}
		handler.ServeHTTP(w, r)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String() + "/mcp"
}

// TestInteropReverseConcurrentGETs: @ai-sdk/mcp, as a legacy client, opens
// the GET stream twice right after initialize. In front of a modern upstream
// that advertises no notifications there is no stream: both GETs must get
// 405 (which the client takes as "no stream"), never 409 (which it reports
// as an error), however they overlap.
func TestInteropReverseConcurrentGETs(t *testing.T) {
	t.Parallel()
	g := startGateway(t, upstreamBlock(slowDiscoverModern(t), "modern"))

	t.Run("@ai-sdk/mcp", func(t *testing.T) {
		nodeFile(t, "@ai-sdk/mcp/package.json")
		out, err := runNodeScript(t, "interop-aisdk-gets.mjs", g.URL)
		if err != nil {
			t.Fatal(err)
		}
		var got struct {
			Gets   []int
			Errors []string
			Tools  []string
		}
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("%s: %v", out, err)
		}
		if len(got.Gets) < 2 || len(got.Errors) > 0 {
			t.Errorf("want two GETs and no error: %s", out)
		}
		for _, s := range got.Gets {
			if s != http.StatusMethodNotAllowed {
				t.Errorf("a GET got %d, want 405: %s", s, out)
			}
		}
		if len(got.Tools) != 1 || got.Tools[0] != "needs_elicitation" {
			t.Errorf("tools: %s", out)
		}
	})

	t.Run("raw, four GETs at once", func(t *testing.T) {
		sid, _ := initReverse(t, g.URL, "2025-11-25", `{}`, nil)
		var wg sync.WaitGroup
		statuses := make([]int, 4)
		for i := range statuses {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, g.URL, nil)
				req.Header.Set("Accept", "text/event-stream")
				req.Header.Set("Mcp-Session-Id", sid)
				req.Header.Set("MCP-Protocol-Version", "2025-11-25")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					statuses[i] = -1
					return
				}
				resp.Body.Close()
				statuses[i] = resp.StatusCode
			}()
		}
		wg.Wait()
		for i, s := range statuses {
			if s != http.StatusMethodNotAllowed {
				t.Errorf("GET %d: %d, want 405 (all: %v)", i, s, statuses)
			}
		}
	})

	t.Run("raw, a batch in a held session", func(t *testing.T) {
		sid, _ := initReverse(t, g.URL, "2025-03-26", `{}`, nil)
		r := post(t, g.URL, map[string]string{"Mcp-Session-Id": sid}, `[{"jsonrpc":"2.0","id":2,"method":"tools/list"}]`)
		if code, _ := rpcErrorOf(t, r); r.StatusCode != http.StatusBadRequest || code != -32600 {
			t.Errorf("HTTP %d, %d; want 400, -32600", r.StatusCode, code)
		}
	})
}

// TestInteropMissingCapabilityForLegacy: a modern upstream's -32021
// (MissingRequiredClientCapability) does not exist in 2025 revisions. Through
// the reverse bridge a 2025-11-25 client gets -32600 (Invalid Request, what
// 2025-11-25 answers a request lacking what the receiver requires), with the
// upstream's message and data, in-band (HTTP 200).
func TestInteropMissingCapabilityForLegacy(t *testing.T) {
	t.Parallel()
	g := startGateway(t, upstreamBlock(slowDiscoverModern(t), "modern"))
	const message = "needs_elicitation needs the elicitation capability"

	t.Run("go-sdk legacy client", func(t *testing.T) {
		cs := connectGo(t, g.URL, "2025-11-25", nil)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "needs_elicitation", Arguments: map[string]any{}})
		var werr *jsonrpc.Error
		if !errors.As(err, &werr) || werr.Code != -32600 || werr.Message != message {
			t.Fatalf("got %v (%#v), want -32600 %q", err, werr, message)
		}
	})

	t.Run("raw", func(t *testing.T) {
		sid, _ := initReverse(t, g.URL, "2025-11-25", `{}`, nil)
		x := postRPC(t, g.URL, legacyHeaders(sid), `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"needs_elicitation","arguments":{}}}`, 3)
		e := checkRPCError(t, x, http.StatusOK, -32600, 3)
		if e == nil {
			return
		}
		if e.Error.Message != message {
			t.Errorf("message %q, want the upstream's %q", e.Error.Message, message)
		}
		if !strings.Contains(string(e.Error.Data), `"requiredCapabilities":{"elicitation":{}}`) {
			t.Errorf("data.requiredCapabilities lost: %s", x)
		}
	})
}
