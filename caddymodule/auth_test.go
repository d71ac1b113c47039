package caddymodule

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

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
	t.Setenv("TEST_MCP_AUDIENCE", "https://mcp.example.com/mcp")
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
			h.Auth = &AuthConfig{Issuer: "https://auth.example.com", Audience: "{env.TEST_MCP_AUDIENCE}"}
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

// TestAuthenticate: a request with a valid token goes on marked
// authenticated, its claims in the placeholders and the principal its
// issuer and subject; one without is answered 401 and never marked.
func TestAuthenticate(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	var issuer string
	as := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/.well-known/oauth-authorization-server":
			json.NewEncoder(w).Encode(map[string]string{"issuer": issuer, "jwks_uri": issuer + "/jwks"})
		case "/jwks":
			json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "k", Algorithm: "RS256"}}})
		default:
			http.NotFound(w, r)
		}
	}))
	defer as.Close()
	issuer = as.URL
	h := oneUpstream()
	h.Auth = &AuthConfig{Issuer: issuer, Audience: "https://mcp.example.com/mcp"}
	if err := provisioned(t, h); err != nil {
		t.Fatal(err)
	}
	signer, _ := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: key}, (&jose.SignerOptions{}).WithHeader("kid", "k"))
	token, err := jwt.Signed(signer).Claims(map[string]any{
		"iss": issuer, "sub": "alice", "aud": "https://mcp.example.com/mcp", "exp": time.Now().Add(time.Hour).Unix(), "scope": "a b", "client_id": "c1",
	}).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	request := func(hdr string) (*http.Request, *caddy.Replacer) {
		repl := caddy.NewReplacer()
		r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
		if hdr != "" {
			r.Header.Set("Authorization", hdr)
		}
		return r.WithContext(context.WithValue(r.Context(), caddy.ReplacerCtxKey, repl)), repl
	}

	r, repl := request("Bearer " + token)
	w := httptest.NewRecorder()
	r, handled, err := h.authenticate(w, r)
	if handled || err != nil || !authenticated(r) {
		t.Fatalf("valid token: handled %v, err %v, authenticated %v, %d %s", handled, err, authenticated(r), w.Code, w.Body)
	}
	for name, want := range map[string]string{"id": "alice", "sub": "alice", "iss": issuer, "scope": "a b", "client_id": "c1"} {
		if got, _ := repl.GetString("http.auth.user." + name); got != want {
			t.Errorf("{http.auth.user.%s} = %q, want %q", name, got, want)
		}
	}
	if got := h.principalValue(r); got != issuer+" alice" {
		t.Errorf("principal %q", got)
	}

	r, _ = request("")
	w = httptest.NewRecorder()
	r, handled, _ = h.authenticate(w, r)
	if !handled || authenticated(r) || w.Code != http.StatusUnauthorized ||
		w.Header().Get("WWW-Authenticate") != `Bearer resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp"` {
		t.Fatalf("no token: handled %v, %d %q", handled, w.Code, w.Header().Get("WWW-Authenticate"))
	}

	// The issuer out of reach: 503, the token neither accepted nor called invalid.
	down := oneUpstream()
	down.Auth = &AuthConfig{Issuer: "http://127.0.0.1:1", Audience: "https://mcp.example.com/mcp"}
	if err := provisioned(t, down); err != nil {
		t.Fatal(err)
	}
	r, _ = request("Bearer " + token)
	w = httptest.NewRecorder()
	r, handled, _ = down.authenticate(w, r)
	if !handled || authenticated(r) || w.Code != http.StatusServiceUnavailable || w.Header().Get("WWW-Authenticate") != "" {
		t.Fatalf("issuer down: handled %v, %d %q", handled, w.Code, w.Header().Get("WWW-Authenticate"))
	}
}
