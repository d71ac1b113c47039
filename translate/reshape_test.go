package translate

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
	"github.com/tidwall/gjson"
)

const testServerInfo = `{"name":"legacy-server","version":"1.2.3"}`

func TestReshapeResult(t *testing.T) {
	si := ReshapeOptions{ServerInfo: []byte(testServerInfo)}
	metaSI := `"_meta":{"io.modelcontextprotocol/serverInfo":` + testServerInfo + `}`
	tests := []struct {
		name    string
		method  string
		in      string
		o       ReshapeOptions
		want    string
		wantErr error
	}{
		// resultType
		{name: "empty ack", method: "tools/call", in: `{}`, want: `{"resultType":"complete"}`},
		{name: "empty ack with spaces", method: "x", in: " { } \n", want: `{"resultType":"complete" }`},
		{name: "call result", method: "tools/call", in: `{"content":[{"type":"text","text":"hi"}]}`,
			want: `{"content":[{"type":"text","text":"hi"}],"resultType":"complete"}`},
		{name: "resultType kept", method: "tools/call", in: `{"resultType":"complete","content":[]}`, want: `{"resultType":"complete","content":[]}`},
		{name: "input_required kept", method: "tools/call", in: `{"resultType":"input_required","requestState":"s"}`, want: `{"resultType":"input_required","requestState":"s"}`},
		{name: "unknown resultType kept", method: "tools/call", in: `{"resultType":"task"}`, want: `{"resultType":"task"}`},
		{name: "non-string resultType replaced", method: "tools/call", in: `{"resultType":7,"content":[]}`, want: `{"resultType":"complete","content":[]}`},
		{name: "whitespace and escapes preserved", method: "prompts/get", in: "{\n  \"messages\" : [ {\"a\":\"\\u00e9\"} ],\n  \"x\": 1.50\n}",
			want: "{\n  \"messages\" : [ {\"a\":\"\\u00e9\"} ],\n  \"x\": 1.50,\"resultType\":\"complete\"\n}"},

		// cache hints: exactly the six methods
		{name: "tools/list hints", method: "tools/list", in: `{"tools":[]}`, want: `{"tools":[],"resultType":"complete","ttlMs":0,"cacheScope":"private"}`},
		{name: "prompts/list hints", method: "prompts/list", in: `{"prompts":[]}`, want: `{"prompts":[],"resultType":"complete","ttlMs":0,"cacheScope":"private"}`},
		{name: "resources/list hints", method: "resources/list", in: `{"resources":[]}`, want: `{"resources":[],"resultType":"complete","ttlMs":0,"cacheScope":"private"}`},
		{name: "templates hints", method: "resources/templates/list", in: `{"resourceTemplates":[]}`, want: `{"resourceTemplates":[],"resultType":"complete","ttlMs":0,"cacheScope":"private"}`},
		{name: "resources/read hints", method: "resources/read", in: `{"contents":[]}`, want: `{"contents":[],"resultType":"complete","ttlMs":0,"cacheScope":"private"}`},
		{name: "server/discover hints", method: "server/discover", in: `{"supportedVersions":[]}`, want: `{"supportedVersions":[],"resultType":"complete","ttlMs":0,"cacheScope":"private"}`},
		{name: "configured hints", method: "tools/list", in: `{"tools":[]}`, o: ReshapeOptions{TTLMs: 60000, CacheScope: "public"}, want: `{"tools":[],"resultType":"complete","ttlMs":60000,"cacheScope":"public"}`},
		{name: "no hints on tools/call", method: "tools/call", in: `{"content":[]}`, o: ReshapeOptions{TTLMs: 5}, want: `{"content":[],"resultType":"complete"}`},
		{name: "no hints on prompts/get", method: "prompts/get", in: `{"messages":[]}`, want: `{"messages":[],"resultType":"complete"}`},
		{name: "no hints on completion", method: "completion/complete", in: `{"completion":{"values":[]}}`, want: `{"completion":{"values":[]},"resultType":"complete"}`},
		{name: "no hints on input_required read", method: "resources/read", in: `{"resultType":"input_required","requestState":"s"}`, want: `{"resultType":"input_required","requestState":"s"}`},
		{name: "upstream hints kept", method: "tools/list", in: `{"tools":[],"ttlMs":1e3,"cacheScope":"public"}`, o: ReshapeOptions{TTLMs: 5}, want: `{"tools":[],"ttlMs":1e3,"cacheScope":"public","resultType":"complete"}`},
		{name: "invalid upstream hints replaced", method: "resources/read", in: `{"ttlMs":-1,"cacheScope":"shared","contents":[]}`, o: ReshapeOptions{TTLMs: 9},
			want: `{"ttlMs":9,"cacheScope":"private","contents":[],"resultType":"complete"}`},
		{name: "fractional ttl replaced", method: "tools/list", in: `{"ttlMs":1.5,"cacheScope":1}`, want: `{"ttlMs":0,"cacheScope":"private","resultType":"complete"}`},
		{name: "string ttl replaced", method: "tools/list", in: `{"ttlMs":"10"}`, want: `{"ttlMs":0,"resultType":"complete","cacheScope":"private"}`},

		// serverInfo
		{name: "serverInfo added", method: "tools/call", in: `{"content":[]}`, o: si, want: `{"content":[],"resultType":"complete",` + metaSI + `}`},
		{name: "serverInfo into existing meta", method: "tools/call", in: `{"_meta":{"progressToken":1, "x":{"y":2}},"content":[]}`, o: si,
			want: `{"_meta":{"progressToken":1, "x":{"y":2},"io.modelcontextprotocol/serverInfo":` + testServerInfo + `},"content":[],"resultType":"complete"}`},
		{name: "serverInfo into empty meta", method: "tools/call", in: `{"_meta":{ },"content":[]}`, o: si,
			want: `{"_meta":{"io.modelcontextprotocol/serverInfo":` + testServerInfo + ` },"content":[],"resultType":"complete"}`},
		{name: "existing serverInfo kept", method: "tools/call", in: `{"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"up","version":"9"}}}`, o: si,
			want: `{"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"up","version":"9"}},"resultType":"complete"}`},
		{name: "escaped serverInfo key kept", method: "tools/call", in: `{"_meta":{"io.modelcontextprotocol\/serverInfo":{"name":"up","version":"9"}}}`, o: si,
			want: `{"_meta":{"io.modelcontextprotocol\/serverInfo":{"name":"up","version":"9"}},"resultType":"complete"}`},
		{name: "null meta replaced", method: "tools/call", in: `{"_meta":null}`, o: si, want: `{` + metaSI + `,"resultType":"complete"}`},
		{name: "string meta replaced without serverInfo", method: "tools/call", in: `{"_meta":"x"}`, want: `{"_meta":{},"resultType":"complete"}`},
		{name: "serverInfo with spaces", method: "tools/call", in: `{}`, o: ReshapeOptions{ServerInfo: []byte(" {\"name\":\"s\"} ")},
			want: `{"resultType":"complete","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"s"}}}`},
		{name: "all additions", method: "tools/list", in: `{"tools":[]}`, o: ReshapeOptions{ServerInfo: []byte(testServerInfo), TTLMs: 1},
			want: `{"tools":[],"resultType":"complete","ttlMs":1,"cacheScope":"private",` + metaSI + `}`},

		// legacy-only fields
		{name: "tool execution dropped", method: "tools/list",
			in:   `{"tools":[{"name":"a","execution":{"taskSupport":"optional"},"inputSchema":{"type":"object"}}, {"name":"b", "inputSchema": {"type":"object"}}]}`,
			want: `{"tools":[{"name":"a","inputSchema":{"type":"object"}}, {"name":"b", "inputSchema": {"type":"object"}}],"resultType":"complete","ttlMs":0,"cacheScope":"private"}`},
		{name: "execution kept outside tools/list", method: "tools/call", in: `{"content":[],"tools":[{"execution":{}}]}`,
			want: `{"content":[],"tools":[{"execution":{}}],"resultType":"complete"}`},
		{name: "execution in nested schema kept", method: "tools/list", in: `{"tools":[{"name":"a","inputSchema":{"properties":{"execution":{}}}}]}`,
			want: `{"tools":[{"name":"a","inputSchema":{"properties":{"execution":{}}}}],"resultType":"complete","ttlMs":0,"cacheScope":"private"}`},
		{name: "2025 task result refused", method: "tools/call", in: `{"task":{"taskId":"t","status":"working"}}`, wantErr: ErrUpstreamResult},
		{name: "task member with content kept", method: "tools/call", in: `{"content":[],"task":{}}`, want: `{"content":[],"task":{},"resultType":"complete"}`},

		// bad input
		{name: "array result", method: "tools/call", in: `[]`, wantErr: ErrUpstreamResult},
		{name: "null result", method: "tools/call", in: `null`, wantErr: ErrUpstreamResult},
		{name: "invalid json", method: "tools/call", in: `{"a":`, wantErr: ErrUpstreamResult},
		{name: "empty", method: "tools/call", in: ``, wantErr: ErrUpstreamResult},
		{name: "duplicate member", method: "tools/call", in: `{"resultType":"complete","resultType":"input_required"}`, wantErr: ErrUpstreamResult},
		{name: "escaped duplicate", method: "tools/call", in: `{"a":1,"\u0061":2}`, wantErr: ErrUpstreamResult},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ReshapeResult(tt.method, []byte(tt.in), tt.o)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ReshapeResult: %v", err)
			}
			if string(got) != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
			if !json.Valid(got) {
				t.Errorf("output is not valid JSON: %s", got)
			}
			again, err := ReshapeResult(tt.method, got, tt.o)
			if err != nil || string(again) != string(got) {
				t.Errorf("not idempotent: %s (%v)", again, err)
			}
		})
	}
}

func TestReshapeOptionsInvalid(t *testing.T) {
	for _, o := range []ReshapeOptions{
		{CacheScope: "shared"},
		{CacheScope: "Private"},
		{TTLMs: -1},
		{ServerInfo: []byte(`"s"`)},
		{ServerInfo: []byte(`{"a":`)},
		{ServerInfo: []byte{}},
	} {
		t.Run(fmt.Sprintf("%+v", o), func(t *testing.T) {
			if _, err := ReshapeResult("tools/list", []byte(`{}`), o); err == nil {
				t.Error("ReshapeResult accepted invalid options")
			}
			if _, err := BuildDiscoverResult([]byte(`{"capabilities":{}}`), o); err == nil {
				t.Error("BuildDiscoverResult accepted invalid options")
			}
		})
	}
}

func TestReshapeError(t *testing.T) {
	malformed := `{"code":-32603,"message":"Internal error: malformed upstream error"}`
	tests := []struct {
		name     string
		in       string
		wantCode int
		want     string
	}{
		{name: "resource not found", in: `{"code":-32002,"message":"Resource not found","data":{"uri":"file:///nonexistent.txt"}}`,
			wantCode: -32602, want: `{"code":-32602,"message":"Resource not found","data":{"uri":"file:///nonexistent.txt"}}`},
		{name: "resource not found spaced", in: ` { "message" : "gone", "code" : -32002 , "data":{"uri":"x://y","extra":[1]} } `,
			wantCode: -32602, want: `{ "message" : "gone", "code" : -32602 , "data":{"uri":"x://y","extra":[1]} }`},
		{name: "resource not found float code", in: `{"code":-32002.0,"message":"m"}`, wantCode: -32602, want: `{"code":-32602,"message":"m"}`},
		{name: "missing capability unchanged", in: `{"code":-32021,"message":"m","data":{"requiredCapabilities":{"sampling":{}}}}`,
			wantCode: -32021, want: `{"code":-32021,"message":"m","data":{"requiredCapabilities":{"sampling":{}}}}`},
		{name: "invalid params unchanged", in: `{"code":-32602,"message":"Unknown tool"}`, wantCode: -32602, want: `{"code":-32602,"message":"Unknown tool"}`},
		{name: "url elicitation unchanged", in: `{"code":-32042,"message":"m","data":{"elicitations":[]}}`, wantCode: -32042, want: `{"code":-32042,"message":"m","data":{"elicitations":[]}}`},
		{name: "sdk error unchanged", in: `{"code":-32000,"message":"Bad Request"}`, wantCode: -32000, want: `{"code":-32000,"message":"Bad Request"}`},
		{name: "no code", in: `{"message":"m"}`, wantCode: jsonrpc.InternalError, want: malformed},
		{name: "string code", in: `{"code":"-32002","message":"m"}`, wantCode: jsonrpc.InternalError, want: malformed},
		{name: "fractional code", in: `{"code":-32002.5,"message":"m"}`, wantCode: jsonrpc.InternalError, want: malformed},
		{name: "no message", in: `{"code":-32002}`, wantCode: jsonrpc.InternalError, want: malformed},
		{name: "duplicate code", in: `{"code":-32002,"code":1,"message":"m"}`, wantCode: jsonrpc.InternalError, want: malformed},
		{name: "not an object", in: `[1]`, wantCode: jsonrpc.InternalError, want: malformed},
		{name: "not json", in: `{`, wantCode: jsonrpc.InternalError, want: malformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out := ReshapeError([]byte(tt.in))
			if code != tt.wantCode || string(out) != tt.want {
				t.Errorf("got %d %s\nwant %d %s", code, out, tt.wantCode, tt.want)
			}
			if got := gjson.GetBytes(out, "code").Int(); int(got) != code {
				t.Errorf("returned code %d but object says %d", code, got)
			}
		})
	}
}

// goSDKInitResult is an InitializeResult shaped like the one the go-sdk and
// the TypeScript SDK send, with 2025 tasks.
const goSDKInitResult = `{"capabilities":{"completions":{},"logging":{},"prompts":{"listChanged":true},` +
	`"resources":{"listChanged":true,"subscribe":true},"tasks":{"list":{},"cancel":{},"requests":{"tools":{"call":{}}}},` +
	`"tools":{"listChanged":true}},"instructions":"Use the tools.","protocolVersion":"2025-11-25",` +
	`"serverInfo":{"name":"everything-server","title":"Everything","version":"v1.0.0"}}`

func TestBuildDiscoverResult(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		o       ReshapeOptions
		want    string
		wantErr bool
	}{
		{
			name: "go-sdk initialize result",
			in:   goSDKInitResult,
			want: `{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{"completions":{},"logging":{},` +
				`"prompts":{"listChanged":true},"resources":{"listChanged":true,"subscribe":true},"tools":{"listChanged":true}},` +
				`"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"everything-server","title":"Everything","version":"v1.0.0"}},` +
				`"instructions":"Use the tools.","ttlMs":0,"cacheScope":"private"}`,
		},
		{
			name: "options override serverInfo and hints",
			in:   `{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"a","version":"1"}}`,
			o:    ReshapeOptions{ServerInfo: []byte(`{"name":"b","version":"2"}`), TTLMs: 3600000, CacheScope: "public"},
			want: `{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{"tools":{}},` +
				`"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"b","version":"2"}},"ttlMs":3600000,"cacheScope":"public"}`,
		},
		{
			name: "meta kept, capabilities verbatim",
			in:   `{"capabilities":{ "tools" : {} },"serverInfo":{"name":"a","version":"1"},"_meta":{"k":1},"instructions":"a\u00e9"}`,
			want: `{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{ "tools" : {} },` +
				`"_meta":{"k":1,"io.modelcontextprotocol/serverInfo":{"name":"a","version":"1"}},"instructions":"a\u00e9","ttlMs":0,"cacheScope":"private"}`,
		},
		{
			name: "no serverInfo, no capabilities",
			in:   `{"protocolVersion":"2025-11-25","instructions":5}`,
			want: `{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{},"ttlMs":0,"cacheScope":"private"}`,
		},
		{name: "capabilities not object", in: `{"capabilities":[]}`, wantErr: true},
		{name: "not an object", in: `"x"`, wantErr: true},
		{name: "duplicate", in: `{"capabilities":{},"capabilities":{"tools":{}}}`, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := BuildDiscoverResult([]byte(tt.in), tt.o)
			if tt.wantErr {
				if !errors.Is(err, ErrUpstreamResult) {
					t.Fatalf("err = %v, want ErrUpstreamResult", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
			var d struct {
				ResultType        string          `json:"resultType"`
				SupportedVersions []string        `json:"supportedVersions"`
				Capabilities      json.RawMessage `json:"capabilities"`
				TTLMs             *int64          `json:"ttlMs"`
				CacheScope        string          `json:"cacheScope"`
			}
			if err := json.Unmarshal(got, &d); err != nil {
				t.Fatal(err)
			}
			if d.ResultType != "complete" || len(d.SupportedVersions) != 1 || d.SupportedVersions[0] != ModernVersion ||
				d.TTLMs == nil || d.CacheScope == "" || gjson.GetBytes(d.Capabilities, "tasks").Exists() {
				t.Errorf("discover result misses required fields: %+v", d)
			}
			// The result passes ReshapeResult unchanged.
			again, err := ReshapeResult("server/discover", got, tt.o)
			if err != nil || string(again) != string(got) {
				t.Errorf("ReshapeResult changed the discover result: %s (%v)", again, err)
			}
		})
	}
}

func FuzzReshapeResult(f *testing.F) {
	for _, s := range []string{
		`{}`, `{"tools":[{"name":"a","execution":{}}]}`, `{"_meta":null,"resultType":1}`,
		`{"ttlMs":-1,"cacheScope":"x","contents":[]}`, `{"task":{}}`, `{"a":1,"a":2}`, `[`, ` {"_meta":{"a":{}} } `,
	} {
		f.Add("tools/list", []byte(s))
		f.Add("tools/call", []byte(s))
	}
	o := ReshapeOptions{ServerInfo: []byte(testServerInfo), TTLMs: 7, CacheScope: "public"}
	f.Fuzz(func(t *testing.T, method string, in []byte) {
		out, err := ReshapeResult(method, in, o)
		if err != nil {
			if !errors.Is(err, ErrUpstreamResult) {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		if !json.Valid(out) || !gjson.ValidBytes(out) {
			t.Fatalf("invalid output %q for %q", out, in)
		}
		if gjson.GetBytes(out, "resultType").Type != gjson.String || !gjson.GetBytes(out, MetaPath("", MetaServerInfo)).Exists() {
			t.Fatalf("output lacks resultType or serverInfo: %s", out)
		}
		again, err := ReshapeResult(method, out, o)
		if err != nil || string(again) != string(out) {
			t.Fatalf("not idempotent:\n%s\n%s (%v)", out, again, err)
		}
	})
}

// toolsListResult is a tools/list result of n tools of about 600 bytes each.
func toolsListResult(n int, execution bool) []byte {
	var b strings.Builder
	b.WriteString(`{"tools":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"name":"tool_%d","title":"Tool %d","description":"Does thing %d with the given input and returns a summary of what happened.",`+
			`"inputSchema":{"type":"object","properties":{"query":{"type":"string","description":"The query"},"limit":{"type":"integer","minimum":1,"maximum":100},`+
			`"region":{"type":"string","enum":["eu","us","ap"],"x-mcp-header":"Region"}},"required":["query"]},`+
			`"annotations":{"readOnlyHint":true,"openWorldHint":false},"_meta":{"com.example/owner":"team-%d"}`, i, i, i, i)
		if execution {
			b.WriteString(`,"execution":{"taskSupport":"optional"}`)
		}
		b.WriteByte('}')
	}
	b.WriteString(`],"nextCursor":"abc"}`)
	return []byte(b.String())
}

func BenchmarkReshapeResult(b *testing.B) {
	o := ReshapeOptions{ServerInfo: []byte(testServerInfo), TTLMs: 60000}
	for _, exec := range []bool{false, true} {
		in := toolsListResult(50, exec)
		b.Run(fmt.Sprintf("tools=50/execution=%v", exec), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(in)))
			for b.Loop() {
				if _, err := ReshapeResult("tools/list", in, o); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
