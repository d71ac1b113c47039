package caddymodule

import (
	"encoding/base64"
	"testing"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
)

// TestHeaderValue: a tool name goes into Mcp-Name as is, or as a
// Base64 sentinel that decodes back to it.
func TestHeaderValue(t *testing.T) {
	for _, name := range []string{"ask", "a b", " lead", "trail ", "café", "tab\tname"} {
		v := headerValue(name)
		got, err := translate.DecodeHeaderValue(v)
		if err != nil || got != name {
			t.Errorf("%q: header %q decodes to %q, %v", name, v, got, err)
		}
	}
	if v := headerValue("café"); v != translate.SentinelPrefix+base64.StdEncoding.EncodeToString([]byte("café"))+translate.SentinelSuffix {
		t.Errorf("café: %q", v)
	}
}
