package caddymodule

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/tidwall/gjson"

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

// TestCaddyfileMultiTurnSSE: multi_turn_sse takes on (faces.multi_turn_sse
// present) or off (absent), once; anything else is refused where it is
// written.
func TestCaddyfileMultiTurnSSE(t *testing.T) {
	const up = "mcp_gateway {\n upstream http://127.0.0.1:9/mcp\n "
	for opts, want := range map[string]string{
		"multi_turn_sse on":                     `{"multi_turn_sse":{}}`,
		"multi_turn_sse off":                    `absent`,
		"multi_turn_sse maybe":                  `unknown multi_turn_sse "maybe" (want on or off), at Testfile:3`,
		"multi_turn_sse":                        `wrong argument count`,
		"multi_turn_sse on\n multi_turn_sse on": `multi_turn_sse already specified, at Testfile:4`,
	} {
		var h Handler
		err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser(up + opts + "\n}"))
		got := ""
		if err != nil {
			got = err.Error()
		} else if b, err := json.Marshal(h); err == nil {
			got = gjson.GetBytes(b, "faces").Raw
			if !gjson.GetBytes(b, "faces.multi_turn_sse").Exists() && !gjson.GetBytes(b, "parking.multi_turn_sse").Exists() {
				got = "absent"
			}
		}
		if !strings.Contains(got, want) {
			t.Errorf("%q: %s, want %s", opts, got, want)
		}
	}
}
