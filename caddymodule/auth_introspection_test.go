package caddymodule

import (
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

// TestAuthIntrospectionCaddyfile: the introspection block parses into its
// object, and a missing or malformed option is refused with its line.
func TestAuthIntrospectionCaddyfile(t *testing.T) {
	h := &Handler{}
	in := `mcp_gateway {
		upstream http://127.0.0.1:3001/mcp
		auth {
			issuer https://auth.example.com
			audience https://mcp.example.com/mcp
			introspection {
				endpoint https://auth.example.com/introspect
				client_id gateway
				client_secret {env.MCP_INTROSPECTION_SECRET}
				client_auth client_secret_post
				tokens all
			}
		}
	}`
	if err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser(in)); err != nil {
		t.Fatal(err)
	}
	want := IntrospectionConfig{Endpoint: "https://auth.example.com/introspect", ClientID: "gateway", ClientSecret: "{env.MCP_INTROSPECTION_SECRET}", ClientAuth: "client_secret_post", Tokens: "all"}
	if h.Auth == nil || h.Auth.Introspection == nil || *h.Auth.Introspection != want {
		t.Fatalf("auth = %+v", h.Auth)
	}
	t.Setenv("MCP_INTROSPECTION_SECRET", "s3cret")
	if o, err := h.Auth.Introspection.options(); err != nil || o.ClientSecret != "s3cret" || h.Auth.Introspection.ClientSecret != want.ClientSecret {
		t.Fatalf("options: %+v %v (the configuration must keep its placeholder)", o, err)
	}
	for _, c := range []struct{ name, block, want string }{
		{"no client_id", "client_secret x", "client_id is required"},
		{"bad endpoint", "client_id g\nendpoint /introspect", `endpoint "/introspect": must be an http(s) URL`},
		{"bad client_auth", "client_id g\nclient_auth private_key_jwt", `client_auth "private_key_jwt"`},
		{"bad tokens", "client_id g\ntokens jwt", `tokens "jwt": opaque or all`},
		{"unknown", "client_id g\nscope x", `unrecognized auth introspection option "scope"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := "mcp_gateway {\n\tupstream http://127.0.0.1:3001/mcp\n\tauth {\n\t\tissuer https://a\n\t\taudience https://b\n\t\tintrospection {\n" + c.block + "\n\t\t}\n\t}\n}"
			err := (&Handler{}).UnmarshalCaddyfile(caddyfile.NewTestDispenser(in))
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "Testfile:") {
				t.Fatalf("err = %v, want %q with its line", err, c.want)
			}
		})
	}
}
