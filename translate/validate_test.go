package translate

import (
	"encoding/json"
	"net/http"
	"reflect"
	"slices"
	"testing"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
)

// reqJSON builds a JSON-RPC message; an empty id or params is left out.

// decodedError is an error response as decoded by encoding/json.
type decodedError struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Error   struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
}

func reqJSON(id, method, params string) string {
	s := `{"jsonrpc":"2.0"`
	if id != "" {
		s += `,"id":` + id
	}
	s += `,"method":"` + method + `"`
	if params != "" {
		s += `,"params":` + params
	}
	return s + "}"
}

// metaJSON is a complete modern request _meta for version.
func metaJSON(version string) string {
	return `{"io.modelcontextprotocol/protocolVersion":"` + version +
		`","io.modelcontextprotocol/clientInfo":{"name":"test","version":"1"},"io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}`
}

// withMeta returns params with a complete _meta for version added in front
// of the other members (extra is either "" or `"k":v,...`).
func withMeta(version, extra string) string {
	if extra != "" {
		extra = "," + extra
	}
	return `{"_meta":` + metaJSON(version) + extra + `}`
}

// modernHdr returns conformant headers for a modern request plus kv.
func modernHdr(method string, kv ...string) http.Header {
	h := hdr("MCP-Protocol-Version", ModernVersion, "Mcp-Method", method)
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

func TestValidateModern(t *testing.T) {
	const v = ModernVersion
	toolCall := func(name string) string {
		return reqJSON(`1`, "tools/call", withMeta(v, `"name":`+name+`,"arguments":{}`))
	}

	tests := []struct {
		name       string
		httpMethod string // default POST
		header     http.Header
		body       string
		supported  []string

		wantStatus int // 0 means success
		wantCode   int
		wantID     string // raw id expected on the returned request ("" = nil)

		// checked on success
		wantKind jsonrpc.Kind
		wantName string
		wantLog  string
	}{
		// Successes.
		{name: "tools/list", header: modernHdr("tools/list"), body: reqJSON(`1`, "tools/list", withMeta(v, "")), wantID: `1`, wantKind: jsonrpc.KindRequest},
		{name: "string id", header: modernHdr("tools/list"), body: reqJSON(`"req-9"`, "tools/list", withMeta(v, "")), wantID: `"req-9"`, wantKind: jsonrpc.KindRequest},
		{name: "server/discover without clientInfo", header: modernHdr("server/discover"),
			body:   reqJSON(`2`, "server/discover", `{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}`),
			wantID: `2`, wantKind: jsonrpc.KindRequest},
		{name: "tools/call", header: modernHdr("tools/call", "Mcp-Name", "get_weather"), body: toolCall(`"get_weather"`), wantID: `1`, wantKind: jsonrpc.KindRequest, wantName: "get_weather"},
		{name: "prompts/get", header: modernHdr("prompts/get", "Mcp-Name", "p1"), body: reqJSON(`1`, "prompts/get", withMeta(v, `"name":"p1"`)), wantID: `1`, wantKind: jsonrpc.KindRequest, wantName: "p1"},
		{name: "resources/read", header: modernHdr("resources/read", "Mcp-Name", "file:///a/b.json"), body: reqJSON(`1`, "resources/read", withMeta(v, `"uri":"file:///a/b.json"`)), wantID: `1`, wantKind: jsonrpc.KindRequest, wantName: "file:///a/b.json"},
		{name: "log level", header: modernHdr("tools/list"),
			body:   reqJSON(`1`, "tools/list", `{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/logLevel":"info"}}`),
			wantID: `1`, wantKind: jsonrpc.KindRequest, wantLog: "info"},
		{name: "escaped member names", header: modernHdr("tools/call", "Mcp-Name", "t"),
			body:   `{"jsonrpc":"2.0","id":1,"m\u0065thod":"tools/call","params":{"n\u0061me":"t","_meta":{"io.modelcontextprotocol\/protocolVersion":"2026-07-28","io.modelcontextprotocol\/clientCapabilities":{}}}}`,
			wantID: `1`, wantKind: jsonrpc.KindRequest, wantName: "t"},
		{name: "removed method still passes the ladder", header: modernHdr("ping"), body: reqJSON(`1`, "ping", withMeta(v, "")), wantID: `1`, wantKind: jsonrpc.KindRequest},
		{name: "dual-era supported list", header: hdr("MCP-Protocol-Version", "2025-11-25", "Mcp-Method", "tools/list"),
			body: reqJSON(`1`, "tools/list", withMeta("2025-11-25", "")), supported: []string{v, "2025-11-25"}, wantID: `1`, wantKind: jsonrpc.KindRequest},

		// Rung 1: HTTP method.
		{name: "GET", httpMethod: http.MethodGet, header: modernHdr("tools/list"), wantStatus: 405},
		{name: "DELETE", httpMethod: http.MethodDelete, header: modernHdr("tools/list"), body: reqJSON(`1`, "tools/list", withMeta(v, "")), wantStatus: 405},

		// Rung 2: JSON-RPC shape.
		{name: "garbage", header: modernHdr("tools/list"), body: `{{{`, wantStatus: 400, wantCode: jsonrpc.ParseError},
		{name: "batch", header: modernHdr("tools/list"), body: `[` + reqJSON(`1`, "tools/list", withMeta(v, "")) + `]`, wantStatus: 400, wantCode: jsonrpc.InvalidRequest},
		{name: "bad jsonrpc keeps id", header: modernHdr("tools/list"), body: `{"jsonrpc":"1.0","id":77,"method":"tools/list"}`, wantStatus: 400, wantCode: jsonrpc.InvalidRequest, wantID: `77`},
		{name: "duplicate top-level method", header: modernHdr("tools/list"),
			body:       `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":` + withMeta(v, "") + `,"method":"tools/call"}`,
			wantStatus: 400, wantCode: jsonrpc.InvalidRequest, wantID: `1`},

		// Rung 3: responses.
		{name: "response", header: modernHdr("tools/list"), body: `{"jsonrpc":"2.0","id":4,"result":{}}`, wantStatus: 400, wantCode: jsonrpc.InvalidRequest, wantID: `4`},

		// Rung 4: protocol version header.
		{name: "header missing", header: hdr("Mcp-Method", "tools/list"), body: reqJSON(`1`, "tools/list", withMeta(v, "")), wantStatus: 400, wantCode: jsonrpc.HeaderMismatch, wantID: `1`},
		{name: "header missing beats missing meta", header: hdr("Mcp-Method", "tools/list"), body: reqJSON(`1`, "tools/list", `{}`), wantStatus: 400, wantCode: jsonrpc.HeaderMismatch, wantID: `1`},
		{name: "header empty", header: hdr("MCP-Protocol-Version", " ", "Mcp-Method", "tools/list"), body: reqJSON(`1`, "tools/list", withMeta(v, "")), wantStatus: 400, wantCode: jsonrpc.HeaderMismatch, wantID: `1`},
		{name: "header repeated", header: modernHdr("tools/list", "MCP-Protocol-Version", v), body: reqJSON(`1`, "tools/list", withMeta(v, "")), wantStatus: 400, wantCode: jsonrpc.HeaderMismatch, wantID: `1`},

		// Rung 5: envelope, before any version comparison.
		{name: "missing meta", header: modernHdr("server/discover"), body: reqJSON(`101`, "server/discover", `{}`), wantStatus: 400, wantCode: jsonrpc.InvalidParams, wantID: `101`},
		{name: "missing params", header: modernHdr("server/discover"), body: reqJSON(`101`, "server/discover", ``), wantStatus: 400, wantCode: jsonrpc.InvalidParams, wantID: `101`},
		{name: "params array", header: modernHdr("server/discover"), body: reqJSON(`101`, "server/discover", `[]`), wantStatus: 400, wantCode: jsonrpc.InvalidParams, wantID: `101`},
		{name: "meta not object", header: modernHdr("server/discover"), body: reqJSON(`101`, "server/discover", `{"_meta":"x"}`), wantStatus: 400, wantCode: jsonrpc.InvalidParams, wantID: `101`},
		{name: "missing protocolVersion", header: modernHdr("server/discover"),
			body:       reqJSON(`102`, "server/discover", `{"_meta":{"io.modelcontextprotocol/clientCapabilities":{}}}`),
			wantStatus: 400, wantCode: jsonrpc.InvalidParams, wantID: `102`},
		{name: "missing clientCapabilities", header: modernHdr("server/discover"),
			body:       reqJSON(`104`, "server/discover", `{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}`),
			wantStatus: 400, wantCode: jsonrpc.InvalidParams, wantID: `104`},
		{name: "clientCapabilities null", header: modernHdr("tools/list"),
			body:       reqJSON(`1`, "tools/list", `{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":null}}`),
			wantStatus: 400, wantCode: jsonrpc.InvalidParams, wantID: `1`},
		{name: "clientCapabilities array", header: modernHdr("tools/list"),
			body:       reqJSON(`1`, "tools/list", `{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":[]}}`),
			wantStatus: 400, wantCode: jsonrpc.InvalidParams, wantID: `1`},
		{name: "protocolVersion number", header: modernHdr("tools/list"),
			body:       reqJSON(`1`, "tools/list", `{"_meta":{"io.modelcontextprotocol/protocolVersion":20260728,"io.modelcontextprotocol/clientCapabilities":{}}}`),
			wantStatus: 400, wantCode: jsonrpc.InvalidParams, wantID: `1`},
		{name: "missing meta with v999 header is -32602", header: hdr("MCP-Protocol-Version", "v999.0.0", "Mcp-Method", "tools/list"),
			body: reqJSON(`1`, "tools/list", `{}`), wantStatus: 400, wantCode: jsonrpc.InvalidParams, wantID: `1`},
		{name: "partial meta with mismatching version is -32602", header: modernHdr("tools/list"),
			body:       reqJSON(`1`, "tools/list", `{"_meta":{"io.modelcontextprotocol/protocolVersion":"v999.0.0"}}`),
			wantStatus: 400, wantCode: jsonrpc.InvalidParams, wantID: `1`},
		{name: "duplicate meta key", header: modernHdr("tools/list"),
			body:       reqJSON(`1`, "tools/list", `{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/protocolVersion":"v9"}}`),
			wantStatus: 400, wantCode: jsonrpc.InvalidParams, wantID: `1`},
		{name: "duplicate params name", header: modernHdr("tools/call", "Mcp-Name", "a"),
			body: reqJSON(`1`, "tools/call", withMeta(v, `"name":"a","name":"b"`)), wantStatus: 400, wantCode: jsonrpc.InvalidParams, wantID: `1`},

		// Rung 6: header/meta mismatch beats unsupported.
		{name: "header 2026 meta v999", header: modernHdr("server/discover"), body: reqJSON(`201`, "server/discover", withMeta("v999.0.0", "")), wantStatus: 400, wantCode: jsonrpc.HeaderMismatch, wantID: `201`},
		{name: "header v999 meta 2026", header: hdr("MCP-Protocol-Version", "v999.0.0", "Mcp-Method", "tools/list"), body: reqJSON(`1`, "tools/list", withMeta(v, "")), wantStatus: 400, wantCode: jsonrpc.HeaderMismatch, wantID: `1`},
		{name: "case differs", header: hdr("MCP-Protocol-Version", "V1", "Mcp-Method", "tools/list"), body: reqJSON(`1`, "tools/list", withMeta("v1", "")), wantStatus: 400, wantCode: jsonrpc.HeaderMismatch, wantID: `1`},

		// Rung 7: unsupported version (checked with data below).
		{name: "both v999", header: hdr("MCP-Protocol-Version", "v999.0.0", "Mcp-Method", "server/discover"), body: reqJSON(`301`, "server/discover", withMeta("v999.0.0", "")), wantStatus: 400, wantCode: jsonrpc.UnsupportedProtocolVersion, wantID: `301`},
		{name: "legacy version in meta", header: hdr("MCP-Protocol-Version", "2025-11-25", "Mcp-Method", "tools/list"), body: reqJSON(`1`, "tools/list", withMeta("2025-11-25", "")), wantStatus: 400, wantCode: jsonrpc.UnsupportedProtocolVersion, wantID: `1`},
		{name: "unsupported beats bad Mcp-Method", header: hdr("MCP-Protocol-Version", "v9", "Mcp-Method", "nope"), body: reqJSON(`1`, "tools/list", withMeta("v9", "")), wantStatus: 400, wantCode: jsonrpc.UnsupportedProtocolVersion, wantID: `1`},

		// Rung 8: log level.
		{name: "bad log level", header: modernHdr("tools/list"),
			body:       reqJSON(`1`, "tools/list", `{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/logLevel":"loud"}}`),
			wantStatus: 400, wantCode: jsonrpc.InvalidParams, wantID: `1`},
		{name: "log level not a string", header: modernHdr("tools/list"),
			body:       reqJSON(`1`, "tools/list", `{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/logLevel":3}}`),
			wantStatus: 400, wantCode: jsonrpc.InvalidParams, wantID: `1`},

		// Rung 9: Mcp-Method.
		{name: "Mcp-Method missing", header: hdr("MCP-Protocol-Version", v), body: reqJSON(`1`, "tools/list", withMeta(v, "")), wantStatus: 400, wantCode: jsonrpc.HeaderMismatch, wantID: `1`},
		{name: "Mcp-Method other method", header: modernHdr("prompts/list"), body: reqJSON(`1`, "tools/list", withMeta(v, "")), wantStatus: 400, wantCode: jsonrpc.HeaderMismatch, wantID: `1`},
		{name: "Mcp-Method upper case value", header: modernHdr("TOOLS/LIST"), body: reqJSON(`1`, "tools/list", withMeta(v, "")), wantStatus: 400, wantCode: jsonrpc.HeaderMismatch, wantID: `1`},
		{name: "Mcp-Method repeated", header: modernHdr("tools/list", "Mcp-Method", "tools/list"), body: reqJSON(`1`, "tools/list", withMeta(v, "")), wantStatus: 400, wantCode: jsonrpc.HeaderMismatch, wantID: `1`},
		{name: "Mcp-Method repeated under two spellings", header: http.Header{"Mcp-Protocol-Version": {v}, "Mcp-Method": {"tools/list"}, "mcp-method": {"tools/call"}},
			body: reqJSON(`1`, "tools/list", withMeta(v, "")), wantStatus: 400, wantCode: jsonrpc.HeaderMismatch, wantID: `1`},
		{name: "header names lower case", header: http.Header{"mcp-protocol-version": {v}, "mcp-method": {"tools/list"}}, body: reqJSON(`1`, "tools/list", withMeta(v, "")), wantID: `1`, wantKind: jsonrpc.KindRequest},
		{name: "header names upper case", header: http.Header{"MCP-PROTOCOL-VERSION": {v}, "MCP-METHOD": {"tools/list"}}, body: reqJSON(`1`, "tools/list", withMeta(v, "")), wantID: `1`, wantKind: jsonrpc.KindRequest},
		{name: "header names via Set", header: hdr("mcp-protocol-version", v, "MCP-METHOD", "tools/list"), body: reqJSON(`1`, "tools/list", withMeta(v, "")), wantID: `1`, wantKind: jsonrpc.KindRequest},
		{name: "Mcp-Method with OWS", header: modernHdr(" \ttools/list "), body: reqJSON(`1`, "tools/list", withMeta(v, "")), wantID: `1`, wantKind: jsonrpc.KindRequest},

		// Rung 10: Mcp-Name.
		{name: "Mcp-Name missing", header: modernHdr("tools/call"), body: toolCall(`"t"`), wantStatus: 400, wantCode: jsonrpc.HeaderMismatch, wantID: `1`},
		{name: "Mcp-Name wrong", header: modernHdr("tools/call", "Mcp-Name", "wrong_tool_name"), body: toolCall(`"t"`), wantStatus: 400, wantCode: jsonrpc.HeaderMismatch, wantID: `1`},
		{name: "Mcp-Name case differs", header: modernHdr("tools/call", "Mcp-Name", "T"), body: toolCall(`"t"`), wantStatus: 400, wantCode: jsonrpc.HeaderMismatch, wantID: `1`},
		{name: "Mcp-Name repeated", header: modernHdr("tools/call", "Mcp-Name", "t", "Mcp-Name", "t"), body: toolCall(`"t"`), wantStatus: 400, wantCode: jsonrpc.HeaderMismatch, wantID: `1`},
		{name: "Mcp-Name with OWS", header: modernHdr("tools/call", "Mcp-Name", "  tool  "), body: toolCall(`"tool"`), wantID: `1`, wantKind: jsonrpc.KindRequest, wantName: "tool"},
		{name: "Mcp-Name lower-case header name", header: http.Header{"Mcp-Protocol-Version": {v}, "mcp-method": {"tools/call"}, "mcp-name": {"tool"}}, body: toolCall(`"tool"`), wantID: `1`, wantKind: jsonrpc.KindRequest, wantName: "tool"},
		{name: "Mcp-Name base64", header: modernHdr("tools/call", "Mcp-Name", "=?base64?SGVsbG8=?="), body: toolCall(`"Hello"`), wantID: `1`, wantKind: jsonrpc.KindRequest, wantName: "Hello"},
		{name: "Mcp-Name base64 unicode", header: modernHdr("prompts/get", "Mcp-Name", "=?base64?SGVsbG8sIOS4lueVjA==?="), body: reqJSON(`1`, "prompts/get", withMeta(v, `"name":"Hello, \u4e16\u754c"`)), wantID: `1`, wantKind: jsonrpc.KindRequest, wantName: "Hello, 世界"},
		{name: "Mcp-Name base64 bad padding", header: modernHdr("tools/call", "Mcp-Name", "=?base64?SGVsbG8?="), body: toolCall(`"Hello"`), wantStatus: 400, wantCode: jsonrpc.HeaderMismatch, wantID: `1`},
		{name: "Mcp-Name base64 bad chars", header: modernHdr("tools/call", "Mcp-Name", "=?base64?SGVs!!!bG8=?="), body: toolCall(`"Hello"`), wantStatus: 400, wantCode: jsonrpc.HeaderMismatch, wantID: `1`},
		{name: "Mcp-Name literal base64 text", header: modernHdr("tools/call", "Mcp-Name", "SGVsbG8="), body: toolCall(`"SGVsbG8="`), wantID: `1`, wantKind: jsonrpc.KindRequest, wantName: "SGVsbG8="},
		{name: "Mcp-Name literal missing suffix", header: modernHdr("tools/call", "Mcp-Name", "=?base64?SGVsbG8="), body: toolCall(`"=?base64?SGVsbG8="`), wantID: `1`, wantKind: jsonrpc.KindRequest, wantName: "=?base64?SGVsbG8="},
		{name: "Mcp-Name literal is not decoded", header: modernHdr("tools/call", "Mcp-Name", "SGVsbG8="), body: toolCall(`"Hello"`), wantStatus: 400, wantCode: jsonrpc.HeaderMismatch, wantID: `1`},
		{name: "Mcp-Name non-ASCII literal", header: modernHdr("tools/call", "Mcp-Name", "caf\xc3\xa9"), body: toolCall(`"café"`), wantStatus: 400, wantCode: jsonrpc.HeaderMismatch, wantID: `1`},
		{name: "resources/read uri mismatch", header: modernHdr("resources/read", "Mcp-Name", "test://a"), body: reqJSON(`1`, "resources/read", withMeta(v, `"uri":"test://b"`)), wantStatus: 400, wantCode: jsonrpc.HeaderMismatch, wantID: `1`},
		{name: "resources/read name instead of uri", header: modernHdr("resources/read", "Mcp-Name", "test://a"), body: reqJSON(`1`, "resources/read", withMeta(v, `"name":"test://a"`)), wantStatus: 400, wantCode: jsonrpc.InvalidParams, wantID: `1`},
		{name: "tools/call name missing", header: modernHdr("tools/call", "Mcp-Name", "t"), body: reqJSON(`1`, "tools/call", withMeta(v, `"arguments":{}`)), wantStatus: 400, wantCode: jsonrpc.InvalidParams, wantID: `1`},
		{name: "tools/call name number", header: modernHdr("tools/call", "Mcp-Name", "1"), body: toolCall(`1`), wantStatus: 400, wantCode: jsonrpc.InvalidParams, wantID: `1`},
		{name: "Mcp-Name ignored on tools/list", header: modernHdr("tools/list", "Mcp-Name", "whatever"), body: reqJSON(`1`, "tools/list", withMeta(v, "")), wantID: `1`, wantKind: jsonrpc.KindRequest},
		{name: "Mcp-Param headers not validated", header: modernHdr("tools/call", "Mcp-Name", "t", "Mcp-Param-Region", "=?base64?!!?="), body: toolCall(`"t"`), wantID: `1`, wantKind: jsonrpc.KindRequest, wantName: "t"},

		// Notifications.
		{name: "notification without meta", header: hdr("MCP-Protocol-Version", v), body: reqJSON(``, "notifications/cancelled", `{"requestId":1}`), wantKind: jsonrpc.KindNotification},
		{name: "notification without params", header: hdr("MCP-Protocol-Version", v, "Mcp-Method", "notifications/x"), body: reqJSON(``, "notifications/x", ``), wantKind: jsonrpc.KindNotification},
		{name: "notification with meta", header: hdr("MCP-Protocol-Version", v, "Mcp-Method", "notifications/cancelled"), body: reqJSON(``, "notifications/cancelled", withMeta(v, `"requestId":1`)), wantKind: jsonrpc.KindNotification},
		{name: "notification without header", body: reqJSON(``, "notifications/cancelled", `{"requestId":1}`), wantStatus: 400, wantCode: jsonrpc.HeaderMismatch},
		{name: "notification meta mismatch", header: hdr("MCP-Protocol-Version", v), body: reqJSON(``, "notifications/cancelled", withMeta("v9", "")), wantStatus: 400, wantCode: jsonrpc.HeaderMismatch},
		{name: "notification unsupported", header: hdr("MCP-Protocol-Version", "v9"), body: reqJSON(``, "notifications/cancelled", `{}`), wantStatus: 400, wantCode: jsonrpc.UnsupportedProtocolVersion},
		{name: "notification Mcp-Method mismatch", header: hdr("MCP-Protocol-Version", v, "Mcp-Method", "notifications/other"), body: reqJSON(``, "notifications/cancelled", `{}`), wantStatus: 400, wantCode: jsonrpc.HeaderMismatch},
		{name: "notification params not object", header: hdr("MCP-Protocol-Version", v), body: reqJSON(``, "notifications/cancelled", `[1]`), wantStatus: 400, wantCode: jsonrpc.InvalidParams},
		{name: "notification caps not object", header: hdr("MCP-Protocol-Version", v), body: reqJSON(``, "notifications/cancelled", `{"_meta":{"io.modelcontextprotocol/clientCapabilities":1}}`), wantStatus: 400, wantCode: jsonrpc.InvalidParams},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			method := tt.httpMethod
			if method == "" {
				method = http.MethodPost
			}
			req, err := ValidateModern(method, tt.header, []byte(tt.body), tt.supported)
			if tt.wantStatus != 0 {
				if err == nil {
					t.Fatalf("ValidateModern succeeded, want %d/%d", tt.wantStatus, tt.wantCode)
				}
				if err.HTTPStatus != tt.wantStatus || err.Code != tt.wantCode {
					t.Fatalf("error = %d/%d (%s), want %d/%d", err.HTTPStatus, err.Code, err.Message, tt.wantStatus, tt.wantCode)
				}
				var id json.RawMessage
				if req != nil {
					id = req.ID
				}
				if string(id) != tt.wantID {
					t.Errorf("ID = %q, want %q", id, tt.wantID)
				}
				if tt.wantID != "" {
					var got decodedError
					if e := json.Unmarshal(jsonrpc.ErrorResponse(id, err), &got); e != nil || string(got.ID) != tt.wantID || got.Error.Code != tt.wantCode {
						t.Errorf("jsonrpc.ErrorResponse = %+v (%v), want id %s code %d", got, e, tt.wantID, tt.wantCode)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("ValidateModern: %v", err)
			}
			if req.Kind != tt.wantKind || string(req.ID) != tt.wantID {
				t.Errorf("Kind/ID = %v/%s, want %v/%s", req.Kind, req.ID, tt.wantKind, tt.wantID)
			}
			if req.Name != tt.wantName {
				t.Errorf("Name = %q, want %q", req.Name, tt.wantName)
			}
			if req.LogLevel != tt.wantLog {
				t.Errorf("LogLevel = %q, want %q", req.LogLevel, tt.wantLog)
			}
			if req.ProtocolVersion == "" || string(req.Raw) != tt.body {
				t.Errorf("ProtocolVersion %q / Body not set", req.ProtocolVersion)
			}
			if req.Kind == jsonrpc.KindRequest && !json.Valid(req.ClientCapabilities) {
				t.Errorf("ClientCapabilities = %q, want a JSON object", req.ClientCapabilities)
			}
		})
	}
}

func TestValidateModernResultFields(t *testing.T) {
	body := reqJSON(`"x"`, "tools/call", withMeta(ModernVersion, `"name":"t","arguments":{"a":1}`))
	req, err := ValidateModern(http.MethodPost, modernHdr("tools/call", "Mcp-Name", "t"), []byte(body), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := &ModernRequest{
		Message:            jsonrpc.Message{ID: json.RawMessage(`"x"`), Method: "tools/call", Kind: jsonrpc.KindRequest, Raw: []byte(body)},
		ProtocolVersion:    ModernVersion,
		Name:               "t",
		ClientCapabilities: []byte(`{"elicitation":{}}`),
	}
	if !reflect.DeepEqual(req, want) {
		t.Errorf("got %+v\nwant %+v", req, want)
	}
}

func TestValidateModernUnsupportedData(t *testing.T) {
	tests := []struct {
		name          string
		supported     []string
		wantSupported []string
	}{
		{name: "default", wantSupported: []string{ModernVersion}},
		{name: "explicit", supported: []string{ModernVersion, "2025-11-25"}, wantSupported: []string{ModernVersion, "2025-11-25"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := hdr("MCP-Protocol-Version", "v999.0.0", "Mcp-Method", "server/discover")
			body := reqJSON(`301`, "server/discover", withMeta("v999.0.0", ""))
			req, err := ValidateModern(http.MethodPost, h, []byte(body), tt.supported)
			if err == nil || err.Code != jsonrpc.UnsupportedProtocolVersion || err.HTTPStatus != 400 {
				t.Fatalf("err = %v, want -32022/400", err)
			}
			data, ok := err.Data.(jsonrpc.UnsupportedVersionData)
			if !ok {
				t.Fatalf("Data = %T, want jsonrpc.UnsupportedVersionData", err.Data)
			}
			if data.Requested != "v999.0.0" || !slices.Equal(data.Supported, tt.wantSupported) {
				t.Errorf("Data = %+v, want supported %v requested v999.0.0", data, tt.wantSupported)
			}
			if tt.supported != nil {
				data.Supported[0] = "mutated"
				if tt.supported[0] == "mutated" {
					t.Error("Data.Supported aliases the caller's slice")
				}
			}
			var got decodedError
			if e := json.Unmarshal(jsonrpc.ErrorResponse(req.ID, err), &got); e != nil {
				t.Fatal(e)
			}
			var d jsonrpc.UnsupportedVersionData
			if e := json.Unmarshal(got.Error.Data, &d); e != nil || d.Requested != "v999.0.0" || len(d.Supported) == 0 || string(got.ID) != "301" {
				t.Errorf("wire error = %s (%v)", jsonrpc.ErrorResponse(req.ID, err), e)
			}
		})
	}
}

func TestRemovedMethod(t *testing.T) {
	removed := []string{
		"initialize", "ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe",
		"tasks/list", "tasks/result",
		"notifications/initialized", "notifications/roots/list_changed", "notifications/elicitation/complete",
	}
	kept := []string{
		"server/discover", "tools/list", "tools/call", "prompts/list", "prompts/get", "resources/list",
		"resources/templates/list", "resources/read", "completion/complete", "subscriptions/listen",
		"notifications/cancelled", "notifications/progress", "tasks/get", "tasks/cancel", "tasks/update",
		"sampling/createMessage", "elicitation/create", "roots/list", "Ping", "INITIALIZE", "",
	}
	for _, m := range removed {
		if !RemovedMethod(m) {
			t.Errorf("RemovedMethod(%q) = false, want true", m)
		}
	}
	for _, m := range kept {
		if RemovedMethod(m) {
			t.Errorf("RemovedMethod(%q) = true, want false", m)
		}
	}
}
