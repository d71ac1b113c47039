package caddymodule

import (
	"net/http/httptest"
	"strings"
	"testing"
)

func TestLegacyUpstreamHeader(t *testing.T) {
	r := httptest.NewRequest("POST", "http://127.0.0.1/mcp", strings.NewReader("{}"))
	r.Header.Set("Authorization", "Bearer x")
	r.Header.Set("MCP-Protocol-Version", "2025-11-25")
	r.Header.Set("Mcp-Method", "tools/list")
	r.Header.Set("Mcp-Name", "other_tool")
	r.Header.Set("Mcp-Param-Region", "eu")
	r.Header["mcp-param-raw"] = []string{"not canonical"}
	r.Header["MCP-NAME"] = []string{"not canonical"}
	r.Header.Set("Mcp-Parameter", "not a routing header")
	hdr := (&Handler{}).legacyUpstreamHeader(r)
	for k := range hdr {
		if isRoutingHeader(k) {
			t.Errorf("%s passed upstream", k)
		}
	}
	for _, k := range []string{"Authorization", "Mcp-Protocol-Version", "Mcp-Parameter"} {
		if hdr.Get(k) == "" {
			t.Errorf("%s was dropped", k)
		}
	}
	if got := (&Handler{}).upstreamHeader(r).Get("Mcp-Method"); got != "tools/list" {
		t.Errorf("a modern request's Mcp-Method must pass (the ladder checked it): %q", got)
	}
}

func TestIsRoutingHeader(t *testing.T) {
	for k, want := range map[string]bool{
		"Mcp-Method": true, "mcp-method": true, "Mcp-Name": true, "Mcp-Param-A": true, "MCP-PARAM-": true,
		"Mcp-Session-Id": false, "Mcp-Protocol-Version": false, "Mcp-Params": false, "Mcp-Methods": false, "": false,
	} {
		if got := isRoutingHeader(k); got != want {
			t.Errorf("%q: %v", k, got)
		}
	}
}
