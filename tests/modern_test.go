package tests

// Modern (2026-07-28) traffic through the gateway: the validation ladder
// (translate.ValidateModern; the refusals in docs/behaviour.md) with raw HTTP, the modern SDK client against modern and
// legacy upstreams, and the Host/Origin checks.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

const modernVersion = "2026-07-28"

// rpcResponse is a JSON-RPC response as received.
type rpcResponse struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result"`
	Error   *struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
}

// rpcExchange is one HTTP exchange with the gateway.
type rpcExchange struct {
	Status int
	Header http.Header
	Raw    string       // the body as read (up to the response, for SSE)
	Resp   *rpcResponse // nil when no JSON-RPC response was found
}

func (x rpcExchange) String() string {
	return fmt.Sprintf("HTTP %d %s: %s", x.Status, x.Header.Get("Content-Type"), tail(x.Raw, 2000))
}

// meta returns a modern request _meta for version.
func meta(version string) map[string]any {
	return map[string]any{
		"io.modelcontextprotocol/protocolVersion":    version,
		"io.modelcontextprotocol/clientCapabilities": map[string]any{},
		"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "modern-test", "version": "1.0.0"},
	}
}

// rpcBody renders a JSON-RPC request.
func rpcBody(t *testing.T, id any, method string, params map[string]any) string {
	t.Helper()
	msg := map[string]any{"jsonrpc": "2.0", "id": id, "method": method}
	if params != nil {
		msg["params"] = params
	}
	b, err := json.Marshal(msg)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// modernHeaders returns the standard headers of a modern request.
func modernHeaders(version, method, name string) map[string]string {
	h := map[string]string{"MCP-Protocol-Version": version, "Mcp-Method": method}
	if name != "" {
		h["Mcp-Name"] = name
	}
	return h
}

// postRPC POSTs body with post and reads the JSON-RPC response for id, from
// a JSON body or from an SSE stream.
func postRPC(t *testing.T, url string, hdr map[string]string, body string, id any) rpcExchange {
	t.Helper()
	return readRPC(t, post(t, url, hdr, body), id)
}

// readRPC reads resp (closing it) and finds the response to id.
func readRPC(t *testing.T, resp *http.Response, id any) rpcExchange {
	t.Helper()
	defer resp.Body.Close()
	x := rpcExchange{Status: resp.StatusCode, Header: resp.Header}
	type read struct {
		raw  string
		resp *rpcResponse
		err  error
	}
	done := make(chan read, 1)
	go func() {
		mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
		if mt == "text/event-stream" {
			raw, r, err := readSSEResponse(resp.Body, id)
			done <- read{raw, r, err}
			return
		}
		data, err := io.ReadAll(resp.Body)
		if err != nil || len(bytes.TrimSpace(data)) == 0 {
			done <- read{string(data), nil, err}
			return
		}
		var r rpcResponse
		if err := json.Unmarshal(data, &r); err != nil {
			done <- read{string(data), nil, fmt.Errorf("body is not a JSON-RPC response: %v", err)}
			return
		}
		done <- read{string(data), &r, nil}
	}()
	select {
	case r := <-done:
		x.Raw, x.Resp = r.raw, r.resp
		if r.err != nil {
			t.Errorf("reading the response (HTTP %d): %v\n%s", x.Status, r.err, tail(r.raw, 2000))
		}
	case <-time.After(30 * time.Second):
		resp.Body.Close()
		t.Fatalf("no response within 30s (HTTP %d, %s)", x.Status, resp.Header.Get("Content-Type"))
	}
	return x
}

// readSSEResponse reads SSE events until the JSON-RPC response whose id is
// id (a result or an error), and returns what it read.
func readSSEResponse(r io.Reader, id any) (string, *rpcResponse, error) {
	var raw strings.Builder
	var data []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		raw.WriteString(line + "\n")
		switch {
		case line == "":
			if len(data) == 0 {
				continue
			}
			payload := strings.Join(data, "\n")
			data = nil
			var m rpcResponse
			if json.Unmarshal([]byte(payload), &m) != nil || (m.Result == nil && m.Error == nil) {
				continue // a notification, or not JSON-RPC
			}
			if sameID(m.ID, id) {
				return raw.String(), &m, nil
			}
		case strings.HasPrefix(line, "data:"):
			data = append(data, strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
		}
	}
	if err := sc.Err(); err != nil {
		return raw.String(), nil, err
	}
	return raw.String(), nil, fmt.Errorf("the SSE stream ended without a response to id %v", id)
}

// sameID reports whether the raw JSON id equals want (a string or a number).
func sameID(raw json.RawMessage, want any) bool {
	if len(raw) == 0 {
		return false
	}
	var got any
	if err := json.Unmarshal(raw, &got); err != nil {
		return false
	}
	w, err := json.Marshal(want)
	if err != nil {
		return false
	}
	var wantv any
	_ = json.Unmarshal(w, &wantv)
	return reflect.DeepEqual(got, wantv)
}

// checkRPCError asserts an HTTP status, a JSON-RPC error code and the echoed
// id; it returns the error for further checks (nil if there was none).
func checkRPCError(t *testing.T, x rpcExchange, status, code int, id any) *rpcResponse {
	t.Helper()
	if x.Status != status {
		t.Errorf("HTTP status %d, want %d; %s", x.Status, status, x)
	}
	if x.Resp == nil || x.Resp.Error == nil {
		t.Errorf("no JSON-RPC error in the response, want code %d; %s", code, x)
		return nil
	}
	if x.Resp.Error.Code != code {
		t.Errorf("JSON-RPC error code %d (%q), want %d; %s", x.Resp.Error.Code, x.Resp.Error.Message, code, x)
	}
	if !sameID(x.Resp.ID, id) {
		t.Errorf("response id %s, want the request id %v; %s", x.Resp.ID, id, x)
	}
	if x.Resp.JSONRPC != "2.0" {
		t.Errorf(`jsonrpc %q, want "2.0"`, x.Resp.JSONRPC)
	}
	return x.Resp
}

// toolResult is the part of a CallToolResult the tests look at.
type toolResult struct {
	IsError bool `json:"isError"`
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
}

func (r toolResult) text() string {
	var b strings.Builder
	for _, c := range r.Content {
		b.WriteString(c.Text)
	}
	return b.String()
}

// checkToolResult asserts a 200 response with a successful tool result for id
// and returns its text.
func checkToolResult(t *testing.T, x rpcExchange, id any) string {
	t.Helper()
	if x.Status != http.StatusOK {
		t.Errorf("HTTP status %d, want 200; %s", x.Status, x)
	}
	if x.Resp == nil {
		t.Errorf("no JSON-RPC response; %s", x)
		return ""
	}
	if x.Resp.Error != nil {
		t.Errorf("JSON-RPC error %d %q, want a result; %s", x.Resp.Error.Code, x.Resp.Error.Message, x)
		return ""
	}
	if !sameID(x.Resp.ID, id) {
		t.Errorf("response id %s, want %v", x.Resp.ID, id)
	}
	var r toolResult
	if err := json.Unmarshal(x.Resp.Result, &r); err != nil {
		t.Errorf("result is not a CallToolResult: %v; %s", err, x)
		return ""
	}
	if r.IsError || len(r.Content) == 0 || r.text() == "" {
		t.Errorf("tool result is an error or empty: %s", x.Resp.Result)
	}
	return r.text()
}

// simpleTextCall returns the headers and body of a valid tools/call
// test_simple_text.
func simpleTextCall(t *testing.T, id any) (map[string]string, string) {
	t.Helper()
	return modernHeaders(modernVersion, "tools/call", "test_simple_text"),
		rpcBody(t, id, "tools/call", map[string]any{"name": "test_simple_text", "arguments": map[string]any{}, "_meta": meta(modernVersion)})
}

// TestModernLadder checks each rung of the modern validation ladder through
// a gateway in front of the stateless everything-server.
func TestModernLadder(t *testing.T) {
	t.Parallel()
	g := startGateway(t, "\t\tupstream "+startGoEverything(t, true))

	metaWithout := func(key string) map[string]any {
		m := meta(modernVersion)
		delete(m, key)
		return m
	}
	type ladderCase struct {
		name   string
		hdr    map[string]string
		id     any
		method string
		params map[string]any
		status int
		code   int
		check  func(t *testing.T, r *rpcResponse)
	}
	cases := []ladderCase{
		{
			name: "missing _meta", id: 101, method: "tools/list", params: map[string]any{},
			hdr:    modernHeaders(modernVersion, "tools/list", ""),
			status: 400, code: -32602,
		},
		{
			name: "_meta without protocolVersion", id: "ladder-102", method: "tools/list",
			params: map[string]any{"_meta": metaWithout("io.modelcontextprotocol/protocolVersion")},
			hdr:    modernHeaders(modernVersion, "tools/list", ""),
			status: 400, code: -32602,
		},
		{
			name: "_meta without clientCapabilities", id: 103, method: "server/discover",
			params: map[string]any{"_meta": metaWithout("io.modelcontextprotocol/clientCapabilities")},
			hdr:    modernHeaders(modernVersion, "server/discover", ""),
			status: 400, code: -32602,
		},
		{
			name: "missing MCP-Protocol-Version header", id: 104, method: "tools/list",
			params: map[string]any{"_meta": meta(modernVersion)},
			hdr:    map[string]string{"Mcp-Method": "tools/list"},
			status: 400, code: -32020,
		},
		{
			name: "header 2026-07-28, _meta v999.0.0", id: "ladder-201", method: "server/discover",
			params: map[string]any{"_meta": meta("v999.0.0")},
			hdr:    modernHeaders(modernVersion, "server/discover", ""),
			status: 400, code: -32020,
		},
		{
			name: "header and _meta v999.0.0", id: 301, method: "server/discover",
			params: map[string]any{"_meta": meta("v999.0.0")},
			hdr:    modernHeaders("v999.0.0", "server/discover", ""),
			status: 400, code: -32022,
			check: func(t *testing.T, r *rpcResponse) {
				var data struct {
					Supported []string `json:"supported"`
					Requested *string  `json:"requested"`
				}
				if err := json.Unmarshal(r.Error.Data, &data); err != nil {
					t.Fatalf("error data %s: %v", r.Error.Data, err)
				}
				if data.Requested == nil || *data.Requested != "v999.0.0" {
					t.Errorf(`data.requested is not "v999.0.0": data %s`, r.Error.Data)
				}
				if !slices.Contains(data.Supported, modernVersion) {
					t.Errorf("data.supported %v does not name %s; data %s", data.Supported, modernVersion, r.Error.Data)
				}
			},
		},
		{
			name: "Mcp-Method mismatch", id: 401, method: "tools/list",
			params: map[string]any{"_meta": meta(modernVersion)},
			hdr:    modernHeaders(modernVersion, "prompts/list", ""),
			status: 400, code: -32020,
		},
		{
			name: "Mcp-Method differs in case", id: 402, method: "tools/list",
			params: map[string]any{"_meta": meta(modernVersion)},
			hdr:    modernHeaders(modernVersion, "TOOLS/LIST", ""),
			status: 400, code: -32020,
		},
		{
			name: "missing Mcp-Name on tools/call", id: "ladder-501", method: "tools/call",
			params: map[string]any{"name": "test_simple_text", "arguments": map[string]any{}, "_meta": meta(modernVersion)},
			hdr:    modernHeaders(modernVersion, "tools/call", ""),
			status: 400, code: -32020,
		},
		{
			name: "Mcp-Name mismatch on tools/call", id: 502, method: "tools/call",
			params: map[string]any{"name": "test_simple_text", "arguments": map[string]any{}, "_meta": meta(modernVersion)},
			hdr:    modernHeaders(modernVersion, "tools/call", "wrong_tool_name"),
			status: 400, code: -32020,
		},
		{
			name: "ping with modern _meta", id: 601, method: "ping",
			params: map[string]any{"_meta": meta(modernVersion)},
			hdr:    modernHeaders(modernVersion, "ping", ""),
			status: 404, code: -32601,
		},
		{
			name: "initialize with modern _meta", id: "ladder-602", method: "initialize",
			params: map[string]any{
				"_meta":           meta(modernVersion),
				"protocolVersion": modernVersion,
				"capabilities":    map[string]any{},
				"clientInfo":      map[string]any{"name": "modern-test", "version": "1.0.0"},
			},
			hdr:    modernHeaders(modernVersion, "initialize", ""),
			status: 404, code: -32601,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			x := postRPC(t, g.URL, c.hdr, rpcBody(t, c.id, c.method, c.params), c.id)
			if r := checkRPCError(t, x, c.status, c.code, c.id); r != nil && c.check != nil {
				c.check(t, r)
			}
		})
	}

	for _, method := range []string{http.MethodGet, http.MethodDelete} {
		t.Run(method+" without session", func(t *testing.T) {
			req, err := http.NewRequest(method, g.URL, nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("MCP-Protocol-Version", modernVersion)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusMethodNotAllowed {
				t.Errorf("%s: HTTP %d, want 405: %s", method, resp.StatusCode, body)
			}
			if allow := resp.Header.Get("Allow"); !strings.Contains(allow, http.MethodPost) {
				t.Errorf("%s: Allow %q does not name POST", method, allow)
			}
		})
	}

	t.Run("valid tools/call test_simple_text", func(t *testing.T) {
		hdr, body := simpleTextCall(t, 701)
		text := checkToolResult(t, postRPC(t, g.URL, hdr, body, 701), 701)
		t.Logf("test_simple_text: %q", text)
	})

	t.Run("valid server/discover", func(t *testing.T) {
		id := "discover-801"
		x := postRPC(t, g.URL, modernHeaders(modernVersion, "server/discover", ""),
			rpcBody(t, id, "server/discover", map[string]any{"_meta": meta(modernVersion)}), id)
		if x.Status != http.StatusOK || x.Resp == nil || x.Resp.Error != nil || !sameID(x.Resp.ID, id) {
			t.Fatalf("want a 200 result for id %q; %s", id, x)
		}
		var res struct {
			SupportedVersions []string `json:"supportedVersions"`
		}
		if err := json.Unmarshal(x.Resp.Result, &res); err != nil || !slices.Contains(res.SupportedVersions, modernVersion) {
			t.Errorf("discover result does not list %s (%v): %s", modernVersion, err, x.Resp.Result)
		}
	})

	if t.Failed() {
		t.Logf("gateway %s", g.URL)
	}
}

// clientOutcome is what tests/node/{modern,legacy}-client.mjs print.
type clientOutcome struct {
	ProtocolVersion *string    `json:"protocolVersion"`
	Era             *string    `json:"era"`
	SessionID       *string    `json:"sessionId"`
	Elicitations    int        `json:"elicitations"`
	Samplings       int        `json:"samplings"`
	RootsLists      int        `json:"rootsLists"`
	Result          toolResult `json:"result"`
}

func runClient(t *testing.T, script string, args ...string) clientOutcome {
	t.Helper()
	start := time.Now()
	out, err := runNodeScript(t, script, args...)
	if err != nil {
		t.Fatal(err)
	}
	var got clientOutcome
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("decoding %q: %v", out, err)
	}
	t.Logf("%s (%v): %s", script, time.Since(start).Round(time.Millisecond), bytes.TrimSpace(out))
	return got
}

func strOrNil(s *string) string {
	if s == nil {
		return "<null>"
	}
	return *s
}

// TestModernClientThroughGateway: the 2.x SDK client in auto mode, through a
// gateway in front of the stateless everything-server, negotiates the modern
// protocol and calls a tool.
func TestModernClientThroughGateway(t *testing.T) {
	t.Parallel()
	nodeBin(t)
	g := startGateway(t, "\t\tupstream "+startGoEverything(t, true))
	got := runClient(t, "modern-client.mjs", g.URL, "test_simple_text")
	if strOrNil(got.ProtocolVersion) != modernVersion || strOrNil(got.Era) != "modern" {
		t.Errorf("negotiated %s (era %s), want %s (modern)", strOrNil(got.ProtocolVersion), strOrNil(got.Era), modernVersion)
	}
	if got.SessionID != nil {
		t.Errorf("a modern exchange made a session: %q", *got.SessionID)
	}
	if got.Result.IsError || got.Result.text() == "" {
		t.Errorf("test_simple_text result is an error or empty: %+v", got.Result)
	}
}

// TestModernHostAndOrigin checks the DNS-rebinding and Origin defences on a
// loopback listener.
func TestModernHostAndOrigin(t *testing.T) {
	t.Parallel()
	upstream := startGoEverything(t, true)
	g := startGateway(t, "\t\tupstream "+upstream)
	self := fmt.Sprintf("127.0.0.1:%d", g.Port)

	// send POSTs a valid tools/call with the given Host (empty: the URL's)
	// and Origin (empty: none).
	send := func(t *testing.T, gw *gateway, host, origin string, id any) rpcExchange {
		t.Helper()
		hdr, body := simpleTextCall(t, id)
		if origin != "" {
			hdr["Origin"] = origin
		}
		if host != "" {
			hdr = maps.Clone(hdr)
			hdr["Host"] = host
		}
		return postRPC(t, gw.URL, hdr, body, id)
	}
	forbidden := func(t *testing.T, x rpcExchange) {
		t.Helper()
		if x.Status != http.StatusForbidden {
			t.Errorf("HTTP %d, want 403; %s", x.Status, x)
		}
		if x.Resp != nil && x.Resp.Result != nil {
			t.Errorf("a forbidden request was served: %s", x)
		}
	}

	t.Run("Host evil.example.com", func(t *testing.T) {
		forbidden(t, send(t, g, "evil.example.com", "", 1))
	})
	t.Run("Host evil.example.com with port", func(t *testing.T) {
		forbidden(t, send(t, g, fmt.Sprintf("evil.example.com:%d", g.Port), "", 2))
	})
	t.Run("Host and Origin evil (legacy initialize)", func(t *testing.T) {
		// The dns-rebinding-protection probe of the 2025-11-25 suite.
		req, err := http.NewRequest(http.MethodPost, g.URL, strings.NewReader(rpcBody(t, 3, "initialize", map[string]any{
			"protocolVersion": "2025-11-25", "capabilities": map[string]any{},
			"clientInfo": map[string]any{"name": "modern-test", "version": "1.0.0"},
		})))
		if err != nil {
			t.Fatal(err)
		}
		req.Host = "evil.example.com"
		req.Header.Set("Origin", "http://evil.example.com")
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		forbidden(t, readRPC(t, resp, 3))
	})
	t.Run("Origin evil with localhost Host", func(t *testing.T) {
		forbidden(t, send(t, g, fmt.Sprintf("localhost:%d", g.Port), "http://evil.example.com", 4))
	})
	t.Run("Host localhost accepted", func(t *testing.T) {
		checkToolResult(t, send(t, g, fmt.Sprintf("localhost:%d", g.Port), fmt.Sprintf("http://localhost:%d", g.Port), 5), 5)
	})
	t.Run("Origin matching Host accepted", func(t *testing.T) {
		checkToolResult(t, send(t, g, "", "http://"+self, 6), 6)
	})
	t.Run("Origin on another port rejected", func(t *testing.T) {
		forbidden(t, send(t, g, "", fmt.Sprintf("http://127.0.0.1:%d", g.Port+1), 7))
	})
	t.Run("Origin not allowed without allowed_origins", func(t *testing.T) {
		forbidden(t, send(t, g, "", "https://app.example.com", 8))
	})

	t.Run("allowed_origins", func(t *testing.T) {
		ga := startGateway(t, "\t\tupstream "+upstream+"\n\t\tallowed_origins https://app.example.com")
		checkToolResult(t, send(t, ga, "", "https://app.example.com", 9), 9)
		forbidden(t, send(t, ga, "", "http://evil.example.com", 10))
		forbidden(t, send(t, ga, "evil.example.com", "https://app.example.com", 11))
	})
}
