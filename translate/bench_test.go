package translate

import (
	"net/http"
	"testing"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
)

// The per-request work of the gateway's hot paths, without I/O: what every
// modern request pays (classification and the validation ladder), what every
// legacy request pays (peeking), and what a forward-bridge round adds (the
// input_required result and the answer's validation).

const benchModernCall = `{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"search","arguments":{"query":"caddy","limit":10},` +
	`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{},"sampling":{}},` +
	`"io.modelcontextprotocol/clientInfo":{"name":"bench","version":"1"}}}}`

func benchModernHeader() http.Header {
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("Accept", "application/json, text/event-stream")
	h.Set("MCP-Protocol-Version", "2026-07-28")
	h.Set("Mcp-Method", "tools/call")
	h.Set("Mcp-Name", "search")
	return h
}

func BenchmarkModernRequest(b *testing.B) {
	h, body := benchModernHeader(), []byte(benchModernCall)
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if ClassifyRequest(h, body) != EraModern {
			b.Fatal("not modern")
		}
		if _, rerr := ValidateModern(http.MethodPost, h, body, []string{"2026-07-28"}); rerr != nil {
			b.Fatal(rerr.Message)
		}
	}
}

func BenchmarkPeekLegacy(b *testing.B) {
	body := []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}`)
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, err := jsonrpc.Peek(body); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkInputRound(b *testing.B) {
	params := []byte(`{"message":"How many people?","requestedSchema":{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}}`)
	answer := []byte(`{"action":"accept","content":{"n":4}}`)
	b.ReportAllocs()
	for b.Loop() {
		var kc KeyCounter
		ir, err := NewInputRequest("elicitation/create", params, &kc)
		if err != nil {
			b.Fatal(err)
		}
		_ = InputRequiredResult([]InputRequest{ir}, "state")
		if err := ValidateInputResponse(ir.Method, answer); err != nil {
			b.Fatal(err)
		}
	}
}

func TestUpstreamParams(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"name":"t","arguments":{"b":1,"a":"<&>"},"inputResponses":{"k":{}},"requestState":"s",` +
			`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","progressToken":7,"io.modelcontextprotocol/clientCapabilities":{}}}`,
			`{"name":"t","arguments":{"b":1,"a":"<&>"},"_meta":{"progressToken":7}}`},
		{`{"name":"t","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}`, `{"name":"t"}`},
		{`{}`, `{}`},
		{`[1]`, `[1]`},
	} {
		if got := string(UpstreamParams([]byte(tc.in))); got != tc.want {
			t.Errorf("upstreamParams(%s) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

func BenchmarkUpstreamParams(b *testing.B) {
	params := []byte(`{"name":"search","arguments":{"query":"caddy","limit":10},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
		`"io.modelcontextprotocol/clientCapabilities":{"elicitation":{}},"progressToken":"p1"}}`)
	b.ReportAllocs()
	for b.Loop() {
		_ = UpstreamParams(params)
		_ = LegacyCapabilities([]byte(`{"elicitation":{"form":{}},"sampling":{}}`))
	}
}
