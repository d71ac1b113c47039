package caddymodule

import (
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

func TestUpstreamAuthCaddyfile(t *testing.T) {
	in := `mcp_gateway {
		upstream_auth bearer {env.TOKEN}
		server a {
			upstream http://127.0.0.1:1/mcp
			upstream_auth exchange {
				token_endpoint https://as.example.com/token
				client_id gw
				client_secret {env.SECRET}
				audience a
				resource https://a.example.com/mcp
				timeout 5s
				max_entries 10
			}
		}
		server b {
			upstream http://127.0.0.1:2/mcp
			upstream_auth none
		}
	}`
	var h Handler
	if err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser(in)); err != nil {
		t.Fatal(err)
	}
	if want := (&UpstreamAuth{Mode: "bearer", Token: "{env.TOKEN}"}); !reflect.DeepEqual(h.UpstreamAuth, want) {
		t.Errorf("block: %+v", h.UpstreamAuth)
	}
	x := h.Servers[0].UpstreamAuth.Exchange
	if x == nil || x.TokenEndpoint != "https://as.example.com/token" || x.ClientSecret != "{env.SECRET}" || x.Audience != "a" ||
		x.Resource != "https://a.example.com/mcp" || x.MaxEntries != 10 || x.Timeout == 0 {
		t.Errorf("server a: %+v", x)
	}
	if h.Servers[1].UpstreamAuth.Mode != "none" {
		t.Errorf("server b: %+v", h.Servers[1].UpstreamAuth)
	}
	for _, bad := range []string{
		"upstream_auth",
		"upstream_auth bearer",
		"upstream_auth none extra",
		"upstream_auth sometimes",
		"upstream_auth none\n upstream_auth none",
		"upstream_auth exchange {\n nonsense x\n }",
		"upstream_auth exchange {\n max_entries 0\n }",
	} {
		var h Handler
		if err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser("mcp_gateway {\n upstream http://127.0.0.1:1/mcp\n " + bad + "\n}")); err == nil {
			t.Errorf("%q was accepted", bad)
		}
	}
}

func TestUpstreamAuthProvisionRefuses(t *testing.T) {
	for _, a := range []*UpstreamAuth{
		{Mode: "sometimes"},
		{Mode: "bearer"},
		{Mode: "bearer", Token: "a\r\nX-Injected: 1"},
		{Mode: "none", Token: "tok-secret-value"},
		{Mode: "exchange"},
		{Mode: "exchange", Exchange: &TokenExchange{TokenEndpoint: "https://as/token", ClientID: "gw"}},
		{Mode: "exchange", Exchange: &TokenExchange{TokenEndpoint: "as/token", ClientID: "gw", Audience: "a"}},
		{Mode: "passthrough", Exchange: &TokenExchange{}},
	} {
		if _, err := provisionUpstreamAuth(a); err == nil {
			t.Errorf("%+v was accepted", a)
		} else if a.Token != "" && strings.Contains(err.Error(), a.Token) {
			t.Errorf("the error names the token: %v", err)
		}
	}
}

// TestUpstreamAuthHeader: what each mode leaves in a header built from the
// client's request.
func TestUpstreamAuthHeader(t *testing.T) {
	r, _ := http.NewRequest(http.MethodPost, "http://gw/mcp", nil)
	r.Header.Set("Authorization", "Bearer client-token")
	for mode, want := range map[string]string{"": "Bearer client-token", "passthrough": "Bearer client-token", "none": "", "bearer": "Bearer static", "exchange": ""} {
		a := &UpstreamAuth{Mode: mode}
		switch mode {
		case "bearer":
			a.Token = "static"
		case "exchange":
			a.Exchange = &TokenExchange{TokenEndpoint: "https://as/token", ClientID: "gw", Audience: "a"}
		}
		c, err := provisionUpstreamAuth(a)
		if err != nil {
			t.Fatal(err)
		}
		h := &Handler{upstreamCreds: c}
		if got := h.upstreamHeader(r).Get("Authorization"); got != want {
			t.Errorf("%q: pass-through header has %q, want %q", mode, got, want)
		}
		if got := h.bridgedHeader(r).Get("Authorization"); got != want {
			t.Errorf("%q: bridged header has %q, want %q", mode, got, want)
		}
	}
}

// BenchmarkUpstreamCredential is what upstream_auth costs a request in the
// gateway, once its exchanged token is cached: the credential obtained
// (withUpstreamCredential) and set on the upstream header (bridgedHeader),
// with bearer and with exchange (a token endpoint on loopback, asked once).
func BenchmarkUpstreamCredential(b *testing.B) {
	var exchanges atomic.Int32
	as := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		exchanges.Add(1)
		_, _ = w.Write([]byte(`{"access_token":"exchanged","token_type":"Bearer","expires_in":3600}`))
	}))
	defer as.Close()
	r, _ := http.NewRequest(http.MethodPost, "http://gw/mcp", nil)
	r.Header.Set("Authorization", "Bearer client-token")
	for _, a := range []*UpstreamAuth{
		{Mode: "bearer", Token: "static"},
		{Mode: "exchange", Exchange: &TokenExchange{TokenEndpoint: as.URL, ClientID: "gw", Audience: "a"}},
	} {
		c, err := provisionUpstreamAuth(a)
		if err != nil {
			b.Fatal(err)
		}
		h := &Handler{upstreamCreds: c}
		b.Run(a.Mode, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				r2, rerr := h.withUpstreamCredential(r)
				if rerr != nil || h.bridgedHeader(r2).Get("Authorization") == "" {
					b.Fatal(rerr)
				}
			}
		})
	}
	if n := exchanges.Load(); n > 1 {
		b.Fatalf("%d exchanges, want 1 at most", n)
	}
}
