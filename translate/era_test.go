package translate

import (
	"net/http"
	"testing"

	"github.com/tidwall/gjson"
)

func TestClassifyRequest(t *testing.T) {
	modernMeta := `{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	tests := []struct {
		name   string
		header http.Header
		body   string
		want   Era
	}{
		{name: "modern meta and header", header: hdr("MCP-Protocol-Version", "2026-07-28"), body: reqJSON(`1`, "tools/list", `{"_meta":`+modernMeta+`}`), want: EraModern},
		{name: "modern meta without header", body: reqJSON(`1`, "tools/list", `{"_meta":`+modernMeta+`}`), want: EraModern},
		{name: "meta v999 with header v999", header: hdr("MCP-Protocol-Version", "v999.0.0"), body: reqJSON(`1`, "server/discover", `{"_meta":{"io.modelcontextprotocol/protocolVersion":"v999.0.0","io.modelcontextprotocol/clientCapabilities":{}}}`), want: EraModern},
		{name: "meta v999 with legacy header", header: hdr("MCP-Protocol-Version", "2025-11-25"), body: reqJSON(`1`, "tools/list", `{"_meta":{"io.modelcontextprotocol/protocolVersion":"v999.0.0"}}`), want: EraModern},
		{name: "meta capabilities only", header: hdr("MCP-Protocol-Version", "v1"), body: reqJSON(`1`, "tools/list", `{"_meta":{"io.modelcontextprotocol/clientCapabilities":{}}}`), want: EraModern},
		{name: "escaped meta key", header: hdr("MCP-Protocol-Version", "v9"), body: `{"jsonrpc":"2.0","id":1,"method":"x","params":{"_meta":{"io.modelcontextprotocol\/protocolVersion":"v9"}}}`, want: EraModern},
		{name: "modern header missing meta", header: hdr("MCP-Protocol-Version", "2026-07-28"), body: reqJSON(`1`, "server/discover", `{}`), want: EraModern},
		{name: "future dated header", header: hdr("MCP-Protocol-Version", "2027-01-01"), body: reqJSON(`1`, "tools/list", ``), want: EraModern},
		{name: "lowercase header name", header: http.Header{"mcp-protocol-version": {"2026-07-28"}}, body: reqJSON(`1`, "tools/list", ``), want: EraModern},
		{name: "header with OWS", header: hdr("MCP-Protocol-Version", " 2026-07-28 "), body: reqJSON(`1`, "tools/list", ``), want: EraModern},
		{name: "modern initialize", header: hdr("MCP-Protocol-Version", "2026-07-28"), body: reqJSON(`1`, "initialize", `{"_meta":`+modernMeta+`}`), want: EraModern},
		{name: "modern meta with session id", header: hdr("Mcp-Session-Id", "s1"), body: reqJSON(`1`, "tools/list", `{"_meta":`+modernMeta+`}`), want: EraModern},
		{name: "legacy initialize no header", body: reqJSON(`1`, "initialize", `{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}`), want: EraLegacy},
		{name: "initialize with v999 header", header: hdr("MCP-Protocol-Version", "v999"), body: reqJSON(`1`, "initialize", `{}`), want: EraLegacy},
		{name: "session id", header: hdr("Mcp-Session-Id", "abc", "MCP-Protocol-Version", "2025-11-25"), body: reqJSON(`2`, "tools/list", ``), want: EraLegacy},
		{name: "session id odd header", header: hdr("Mcp-Session-Id", "abc", "MCP-Protocol-Version", "x"), body: reqJSON(`2`, "tools/list", ``), want: EraLegacy},
		{name: "legacy header 2025-11-25", header: hdr("MCP-Protocol-Version", "2025-11-25"), body: reqJSON(`2`, "tools/list", `{}`), want: EraLegacy},
		{name: "legacy header 2025-06-18", header: hdr("MCP-Protocol-Version", "2025-06-18"), body: reqJSON(`2`, "tools/list", ``), want: EraLegacy},
		{name: "legacy header 2025-03-26", header: hdr("MCP-Protocol-Version", "2025-03-26"), body: reqJSON(`2`, "tools/list", ``), want: EraLegacy},
		{name: "legacy header 2024-11-05", header: hdr("MCP-Protocol-Version", "2024-11-05"), body: reqJSON(`2`, "tools/list", ``), want: EraLegacy},
		{name: "old unknown date", header: hdr("MCP-Protocol-Version", "1900-01-01"), body: reqJSON(`2`, "tools/list", ``), want: EraLegacy},
		{name: "legacy header with progress meta", header: hdr("MCP-Protocol-Version", "2025-11-25"), body: reqJSON(`2`, "tools/call", `{"name":"t","_meta":{"progressToken":1}}`), want: EraLegacy},
		{name: "legacy response without header", body: `{"jsonrpc":"2.0","id":0,"result":{"action":"accept"}}`, want: EraLegacy},
		{name: "legacy notification without header", body: `{"jsonrpc":"2.0","method":"notifications/initialized"}`, want: EraLegacy},
		{name: "nothing at all", body: ``, want: EraLegacy},
		{name: "garbage with modern header", header: hdr("MCP-Protocol-Version", "2026-07-28"), body: `garbage`, want: EraModern},
		{name: "non-date header without meta", header: hdr("MCP-Protocol-Version", "v999.0.0"), body: reqJSON(`1`, "tools/list", `{}`), want: EraUnknown},
		{name: "almost a date", header: hdr("MCP-Protocol-Version", "2026-7-28"), body: reqJSON(`1`, "tools/list", `{}`), want: EraUnknown},
		{name: "meta in a batch ignored", header: hdr("MCP-Protocol-Version", "v9"), body: `[` + reqJSON(`1`, "tools/list", `{"_meta":`+modernMeta+`}`) + `]`, want: EraUnknown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ClassifyRequest(tt.header, []byte(tt.body)); got != tt.want {
				t.Errorf("ClassifyRequest = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestMetaPath(t *testing.T) {
	body := `{"params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io":{"modelcontextprotocol/protocolVersion":"wrong"}}},` +
		`"result":{"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"s"}}},"_meta":{"io.modelcontextprotocol/subscriptionId":5}}`
	tests := []struct {
		container, key, want string
	}{
		{"params", MetaProtocolVersion, "2026-07-28"},
		{"result", MetaServerInfo, `{"name":"s"}`},
		{"", MetaSubscriptionID, "5"},
		{"params", MetaClientInfo, ""},
	}
	for _, tt := range tests {
		t.Run(tt.container+"/"+tt.key, func(t *testing.T) {
			p := MetaPath(tt.container, tt.key)
			if got := gjson.Get(body, p); got.String() != tt.want {
				t.Errorf("gjson.Get(%q) = %q, want %q", p, got.String(), tt.want)
			}
		})
	}
	if got, want := MetaPath("params", MetaProtocolVersion), `params._meta.io\.modelcontextprotocol\/protocolVersion`; got != want {
		t.Errorf("MetaPath = %q, want %q", got, want)
	}
}

func TestEraString(t *testing.T) {
	for e, want := range map[Era]string{EraUnknown: "unknown", EraLegacy: "legacy", EraModern: "modern", Era(42): "unknown"} {
		if got := e.String(); got != want {
			t.Errorf("Era(%d).String() = %q, want %q", int(e), got, want)
		}
	}
}

func TestVersions(t *testing.T) {
	for _, v := range LegacyVersions {
		if !isDateVersion(v) || v >= ModernVersion {
			t.Errorf("legacy version %q must be a date before %s", v, ModernVersion)
		}
		if !IsLegacyVersion(v) {
			t.Errorf("IsLegacyVersion(%q) = false", v)
		}
	}
	if !isDateVersion(ModernVersion) {
		t.Errorf("ModernVersion %q is not a date", ModernVersion)
	}
	for _, v := range []string{"", ModernVersion, "v999.0.0", "2025-11-25 "} {
		if IsLegacyVersion(v) {
			t.Errorf("IsLegacyVersion(%q) = true", v)
		}
	}
	for _, v := range []string{"", "2026-07-2", "2026-07-288", "2026/07/28", "2026-0a-28", "v2026-7-28"} {
		if isDateVersion(v) {
			t.Errorf("isDateVersion(%q) = true", v)
		}
	}
}
