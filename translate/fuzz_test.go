package translate

import (
	"encoding/json"
	"net/http"
	"slices"
	"testing"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
)

func FuzzValidateModern(f *testing.F) {
	meta := `{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	seeds := []struct{ body, version, method, name string }{
		{reqJSON(`1`, "tools/list", `{"_meta":`+meta+`}`), ModernVersion, "tools/list", ""},
		{reqJSON(`1`, "tools/call", `{"name":"Hello","_meta":`+meta+`}`), ModernVersion, "tools/call", "=?base64?SGVsbG8=?="},
		{reqJSON(`1`, "tools/call", `{"name":"Hello","_meta":`+meta+`}`), ModernVersion, "tools/call", "=?base64?SGVsbG8?="},
		{reqJSON(`"r"`, "resources/read", `{"uri":"test://x","_meta":`+meta+`}`), ModernVersion, "resources/read", "  test://x "},
		{reqJSON(`301`, "server/discover", `{"_meta":{"io.modelcontextprotocol/protocolVersion":"v999.0.0","io.modelcontextprotocol/clientCapabilities":{}}}`), "v999.0.0", "server/discover", ""},
		{reqJSON(`101`, "server/discover", `{}`), ModernVersion, "server/discover", ""},
		{reqJSON(``, "notifications/cancelled", `{"requestId":1}`), ModernVersion, "", ""},
		{`{"jsonrpc":"2.0","id":1,"result":{}}`, ModernVersion, "", ""},
		{`[1]`, "", "", ""},
		{`{`, ModernVersion, "TOOLS/LIST", "\x00"},
	}
	for _, s := range seeds {
		f.Add([]byte(s.body), s.version, s.method, s.name, true)
	}
	f.Add([]byte(seeds[0].body), ModernVersion, "tools/list", "", false)
	supported := []string{ModernVersion, "2025-11-25"}

	f.Fuzz(func(t *testing.T, body []byte, version, method, name string, post bool) {
		h := http.Header{}
		if version != "" {
			h.Set("MCP-Protocol-Version", version)
		}
		if method != "" {
			h.Set("Mcp-Method", method)
		}
		if name != "" {
			h.Set("Mcp-Name", name)
		}
		_ = ClassifyRequest(h, body) // must not panic
		httpMethod := http.MethodPost
		if !post {
			httpMethod = http.MethodGet
		}
		req, err := ValidateModern(httpMethod, h, body, supported)
		if err != nil {
			if err.HTTPStatus < 400 || err.HTTPStatus > 499 {
				t.Fatalf("status %d outside 4xx", err.HTTPStatus)
			}
			var id json.RawMessage
			if req != nil {
				id = req.ID
			}
			if out := jsonrpc.ErrorResponse(id, err); !json.Valid(out) {
				t.Fatalf("jsonrpc.ErrorResponse is not valid JSON: %q", out)
			}
			return
		}
		if req == nil || (req.Kind != jsonrpc.KindRequest && req.Kind != jsonrpc.KindNotification) {
			t.Fatalf("success with %+v", req)
		}
		if !slices.Contains(supported, req.ProtocolVersion) {
			t.Fatalf("unsupported version %q accepted", req.ProtocolVersion)
		}
		if req.Kind == jsonrpc.KindRequest {
			if trimOWS(method) != req.Method {
				t.Fatalf("Mcp-Method %q accepted for method %q", method, req.Method)
			}
			if !json.Valid(req.ClientCapabilities) {
				t.Fatalf("ClientCapabilities %q", req.ClientCapabilities)
			}
			if NameSourceField(req.Method) != "" {
				if d, e := DecodeHeaderValue(name); e != nil || d != req.Name {
					t.Fatalf("Mcp-Name %q accepted for name %q", name, req.Name)
				}
			}
		}
	})
}

// FuzzInputs feeds what a legacy server and a modern client control into
// the input-round code: an in-line request (method and params) becomes an
// input request, a client's answer is validated against it, an error
// becomes URL elicitations; the input_required result built from them must
// be valid JSON.
func FuzzInputs(f *testing.F) {
	f.Add("elicitation/create", []byte(`{"message":"?","requestedSchema":{"type":"object","properties":{}},"_meta":{"io.github.caddy-mcp-gateway/inputKey":"k"}}`),
		[]byte(`{"action":"accept","content":{"a":"b"}}`), []byte(`{"code":-32042,"message":"x","data":{"elicitations":[{"mode":"url","url":"https://e.example","message":"m","elicitationId":"1"}]}}`))
	f.Add("sampling/createMessage", []byte(`{"messages":[],"maxTokens":5}`), []byte(`{"role":"assistant","model":"m","content":{"type":"text","text":"t"}}`), []byte(`{}`))
	f.Add("roots/list", []byte(nil), []byte(`{"roots":[{"uri":"file:///"}]}`), []byte(`null`))
	f.Add("elicitation/create", []byte(`{"mode":"url","url":"javascript:x","message":""}`), []byte(`{"action":"maybe"}`), []byte(`{"code":"x"}`))
	f.Fuzz(func(t *testing.T, method string, params, answer, errObj []byte) {
		var kc KeyCounter
		ir, err := NewInputRequest(method, params, &kc)
		if err == nil {
			_ = ValidateInputResponse(ir.Method, answer)
			if out := InputRequiredResult([]InputRequest{ir}, "state"); !json.Valid(out) {
				t.Fatalf("input_required result is not JSON: %s", out)
			}
		}
		if reqs, ok := URLElicitationFromError(errObj); ok {
			if out := InputRequiredResult(reqs, ""); !json.Valid(out) {
				t.Fatalf("input_required result from an error is not JSON: %s", out)
			}
		}
	})
}
