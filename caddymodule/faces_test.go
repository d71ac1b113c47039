package caddymodule

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/tidwall/gjson"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/caddymodule/face/rest"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/seal"
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

// TestFacesREST: the REST face's Caddyfile options reach faces.rest; it
// needs state_key; provisioned, the front door hands it the requests
// under its base, except a request another instance forwarded (MCP);
// off, there is no PathFace.
func TestFacesREST(t *testing.T) {
	var h Handler
	in := "mcp_gateway {\n upstream http://127.0.0.1:9/mcp\n rest /api/v1\n rest_wait 2s\n rest_call_ttl 1h\n rest_max_calls_per_principal 7\n}"
	if err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser(in)); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(h)
	if got := gjson.GetBytes(b, "faces").Raw; got != `{"rest":{"base_path":"/api/v1","wait":2000000000,"call_ttl":3600000000000,"max_calls_per_principal":7}}` {
		t.Fatalf("faces: %s", got)
	}
	var bad Handler
	err := bad.UnmarshalCaddyfile(caddyfile.NewTestDispenser("mcp_gateway {\n upstream http://127.0.0.1:9/mcp\n rest /api/\n}"))
	if err == nil || !strings.Contains(err.Error(), "rest: the base path") {
		t.Errorf("a base that is not a clean path: %v", err)
	}

	h2 := oneUpstream()
	h2.Faces.REST = &rest.Config{BasePath: "/api"}
	if err := provisioned(t, h2); err == nil || !strings.Contains(err.Error(), "rest needs state_key") {
		t.Fatalf("without state_key: %v", err)
	}
	h2 = oneUpstream()
	h2.Faces.REST = &rest.Config{BasePath: "/api"}
	h2.Fleet.StateKeys = []string{testStateKey}
	if err := provisioned(t, h2); err != nil {
		t.Fatal(err)
	}
	if err := h2.Validate(); err != nil {
		t.Fatal(err)
	}
	if h2.Faces.REST.MaxCallsPerPrincipal != 100 {
		t.Errorf("defaults not applied: %+v", h2.Faces.REST)
	}
	for path, want := range map[string]bool{"/api": true, "/api/x": true, "/apix": false, "/mcp": false} {
		served, _ := h2.servePath(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, path, nil), nil)
		if served != want {
			t.Errorf("%s: served by a face %v", path, served)
		}
	}
	r := httptest.NewRequest(http.MethodPost, "/api/tools", nil)
	r.Header.Set(seal.ForwardedHeader, "x")
	if served, _ := h2.servePath(httptest.NewRecorder(), r, nil); served {
		t.Error("a forwarded request was taken for the REST face")
	}
	off := oneUpstream()
	if err := provisioned(t, off); err != nil {
		t.Fatal(err)
	}
	if served, _ := off.servePath(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/api/tools", nil), nil); served {
		t.Fatal("rest off: a request was taken for a face")
	}
}
