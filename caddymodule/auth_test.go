package caddymodule

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

// TestAuthCaddyfile: the auth block parses into its object, and a
// missing or malformed option is refused with the Caddyfile's line.
func TestAuthCaddyfile(t *testing.T) {
	h := &Handler{}
	in := `mcp_gateway {
		upstream http://127.0.0.1:3001/mcp
		auth {
			issuer https://auth.example.com
			audience https://mcp.example.com/mcp
			require_scope mcp read
		}
	}`
	if err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser(in)); err != nil {
		t.Fatal(err)
	}
	if a := h.Auth; a == nil || a.Issuer != "https://auth.example.com" || a.Audience != "https://mcp.example.com/mcp" || strings.Join(a.RequireScope, ",") != "mcp,read" {
		t.Fatalf("auth = %+v", h.Auth)
	}
	for _, c := range []struct{ name, block, want string }{
		{"no issuer", "audience https://mcp.example.com/mcp", "issuer is required"},
		{"no audience", "issuer https://auth.example.com", "audience is required"},
		{"not a URL", "issuer auth.example.com\naudience https://mcp.example.com/mcp", `issuer "auth.example.com": must be an http(s) URL`},
		{"a fragment", "issuer https://auth.example.com\naudience https://mcp.example.com/mcp#x", "without query or fragment"},
		{"twice", "issuer https://a\nissuer https://b", "issuer already specified"},
		{"unknown", "issuer https://a\nclient_secret x", `unrecognized auth option "client_secret"`},
		{"scope quoted", "issuer https://a\naudience https://b\nrequire_scope `a\"b`", "no spaces, quotes or backslashes"},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := "mcp_gateway {\n\tupstream http://127.0.0.1:3001/mcp\n\tauth {\n" + c.block + "\n\t}\n}"
			err := (&Handler{}).UnmarshalCaddyfile(caddyfile.NewTestDispenser(in))
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "Testfile:") {
				t.Fatalf("err = %v, want %q with its line", err, c.want)
			}
		})
	}
}

// TestAuthPrincipal: with auth, the principal is the token's issuer and
// subject unless principal is set; without, it stays the Authorization
// header.
func TestAuthPrincipal(t *testing.T) {
	for _, c := range []struct {
		auth      bool
		principal string
		want      string
	}{
		{true, "", authPrincipal},
		{true, "{http.auth.user.client_id}", "{http.auth.user.client_id}"},
		{false, "", defaultPrincipal},
	} {
		h := oneUpstream()
		h.Security.Principal = c.principal
		if c.auth {
			h.Auth = &AuthConfig{Issuer: "https://auth.example.com", Audience: "https://mcp.example.com/mcp"}
		}
		if err := provisioned(t, h); err != nil {
			t.Fatal(err)
		}
		if h.Security.Principal != c.want || (h.auth != nil) != c.auth {
			t.Errorf("auth %v, principal %q: got %q", c.auth, c.principal, h.Security.Principal)
		}
		if c.auth && h.auth.metadataURL != "https://mcp.example.com/.well-known/oauth-protected-resource/mcp" {
			t.Errorf("metadata URL %q", h.auth.metadataURL)
		}
	}
}

// TestAuthMetadataOutsideMatcher: `mcp_gateway /mcp` leaves the metadata
// path out (adapting warns); a named matcher listing it does not.
func TestAuthMetadataOutsideMatcher(t *testing.T) {
	md := "/.well-known/oauth-protected-resource/mcp"
	if !outsideMatcher(caddy.ModuleMap{"path": json.RawMessage(`["/mcp"]`)}, md) {
		t.Error("/mcp alone: not found outside")
	}
	if outsideMatcher(caddy.ModuleMap{"path": json.RawMessage(`["/mcp", "` + md + `"]`)}, md) {
		t.Error("listed: found outside")
	}
}
