package caddymodule

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"go.uber.org/zap"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/seal"
)

func TestUnmarshalCaddyfileFleet(t *testing.T) {
	input := `mcp_gateway {
		upstream http://127.0.0.1:9101/mcp
		state_key AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=
		instance_id gw-1
		advertise http://10.0.0.1:8080
		peer gw-2 http://10.0.0.2:8080
		peer gw-3 https://gw-3.internal
	}`
	var h Handler
	if err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser(input)); err != nil {
		t.Fatal(err)
	}
	got, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"upstreams":[{"url":"http://127.0.0.1:9101/mcp"}],"fleet":{"state_keys":["AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="],` +
		`"instance_id":"gw-1","advertise":"http://10.0.0.1:8080","peers":{"gw-2":"http://10.0.0.2:8080","gw-3":"https://gw-3.internal"}}}`
	if string(got) != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

func TestUnmarshalCaddyfileFleetErrors(t *testing.T) {
	cases := map[string]struct{ input, want string }{
		"peer without url":     {"mcp_gateway {\n peer gw-2\n}", "peer takes an instance id and a base URL"},
		"peer three args":      {"mcp_gateway {\n peer gw-2 http://a http://b\n}", "peer takes an instance id and a base URL"},
		"duplicate peer":       {"mcp_gateway {\n peer gw-2 http://a\n peer gw-2 http://b\n}", `peer "gw-2" listed twice`},
		"duplicate instance":   {"mcp_gateway {\n instance_id a\n instance_id b\n}", "instance_id already specified"},
		"advertise two args":   {"mcp_gateway {\n advertise http://a http://b\n}", "wrong argument count"},
		"instance_id no value": {"mcp_gateway {\n instance_id\n}", "wrong argument count"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			var h Handler
			err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser(c.input))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error = %v, want it to contain %q", err, c.want)
			}
		})
	}
}

// fleetHandler provisions the fleet part of a handler with these options.
func fleetHandler(t *testing.T, f FleetConfig) (Handler, error) {
	t.Helper()
	h := Handler{Fleet: f}
	h.logger = zap.NewNop()
	kr, err := seal.NewKeyring(seal.NewRandomKey())
	if err != nil {
		t.Fatal(err)
	}
	h.keyring = kr
	return h, h.provisionFleet()
}

func TestProvisionFleet(t *testing.T) {
	key := []string{"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="}
	t.Setenv("MCP_TEST_INSTANCE", "gw-env")
	h, err := fleetHandler(t, FleetConfig{StateKeys: key, InstanceID: "{env.MCP_TEST_INSTANCE}", Advertise: "http://10.0.0.1:8080/",
		Peers: map[string]string{"gw-env": "http://10.0.0.1:8080", "gw-2": "https://gw-2.internal:8443"}})
	if err != nil {
		t.Fatal(err)
	}
	if h.fleet.instance != "gw-env" || h.fleet.address != "http://10.0.0.1:8080" {
		t.Fatalf("instance %q, address %q", h.fleet.instance, h.fleet.address)
	}
	if len(h.fleet.peers) != 1 || h.fleet.peers["gw-2"] != "https://gw-2.internal:8443" {
		t.Fatalf("peers %v: want gw-2 only (the own entry ignored)", h.fleet.peers)
	}
	if got := h.fleet.ownerAddress(translate.Owner{Instance: "gw-2", Address: "http://sealed:1"}); got != "https://gw-2.internal:8443" {
		t.Fatalf("a listed peer is reached at %q, want its peer entry", got)
	}
	if got := h.fleet.ownerAddress(translate.Owner{Instance: "gw-9", Address: "http://sealed:1"}); got != "http://sealed:1" {
		t.Fatalf("an unlisted owner is reached at %q, want its sealed address", got)
	}

	single, err := fleetHandler(t, FleetConfig{})
	if err != nil || single.fleet.instance != processInstance() || single.fleet.address != "" {
		t.Fatalf("without options: %v, instance %q, address %q", err, single.fleet.instance, single.fleet.address)
	}

	for name, c := range map[string]struct {
		f    FleetConfig
		want string
	}{
		"bad id":              {FleetConfig{InstanceID: "gw:1"}, "instance_id \"gw:1\""},
		"long id":             {FleetConfig{InstanceID: strings.Repeat("a", 65)}, "1 to 64"},
		"empty once expanded": {FleetConfig{InstanceID: "{env.MCP_TEST_UNSET}"}, "empty once expanded"},
		"advertise scheme":    {FleetConfig{StateKeys: key, Advertise: "ftp://a"}, "scheme must be http or https"},
		"advertise path":      {FleetConfig{StateKeys: key, Advertise: "http://a/mcp"}, "no path"},
		"advertise query":     {FleetConfig{StateKeys: key, Advertise: "http://a?x=1"}, "only scheme://host[:port]"},
		"advertise userinfo":  {FleetConfig{StateKeys: key, Advertise: "http://u:p@a"}, "only scheme://host[:port]"},
		"advertise no host":   {FleetConfig{StateKeys: key, Advertise: "http://"}, "no host"},
		"advertise too long":  {FleetConfig{StateKeys: key, Advertise: "http://" + strings.Repeat("a", 250) + ".example"}, "longer than"},
		"peer bad id":         {FleetConfig{StateKeys: key, InstanceID: "a", Peers: map[string]string{"b c": "http://b"}}, `peer "b c"`},
		"peer bad url":        {FleetConfig{StateKeys: key, InstanceID: "a", Peers: map[string]string{"b": "b:8080"}}, "peer b:"},
		"advertise no key":    {FleetConfig{Advertise: "http://a"}, "need state_key"},
		"peer no key":         {FleetConfig{InstanceID: "a", Peers: map[string]string{"b": "http://b"}}, "need state_key"},
		"peer no id":          {FleetConfig{StateKeys: key, Peers: map[string]string{"b": "http://b"}}, "peer needs instance_id"},
		"peer with advertise": {FleetConfig{StateKeys: key, Advertise: "http://a", Peers: map[string]string{"b": "http://b"}}, ""},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := fleetHandler(t, c.f)
			if c.want == "" {
				if err != nil {
					t.Fatalf("error %v, want none", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error = %v, want it to contain %q", err, c.want)
			}
		})
	}
}

// TestAcceptForwarded: a request with no forwarding header passes as it
// is; one whose header verifies passes marked, without the header; any
// other is refused with 403.
func TestAcceptForwarded(t *testing.T) {
	h, err := fleetHandler(t, FleetConfig{InstanceID: "gw-a"})
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	newReq := func() *http.Request {
		r := httptest.NewRequest(http.MethodPost, "/mcp?x=1", bytes.NewReader(body))
		r.Header.Set("Authorization", "Bearer alice")
		return r
	}
	marked := func(r *http.Request) bool { _, ok := forwardedOf(r); return ok }
	bob := translate.PrincipalHash("user:bob")

	plain := newReq()
	if got, rerr := h.acceptForwarded(plain, body); rerr != nil || got != plain || marked(got) {
		t.Fatalf("a plain request: %v, marked %t", rerr, marked(got))
	}

	member := seal.NewForwardAuth(h.keyring, "gw-b", nil)
	signed := newReq()
	signed.Header.Set(seal.ForwardedHeader, member.Sign("gw-a", forwardedRequest(signed, body, bob), time.Now()))
	got, rerr := h.acceptForwarded(signed, body)
	if rerr != nil || !marked(got) || got.Header.Get(seal.ForwardedHeader) != "" {
		t.Fatalf("a signed request: %v, marked %t, header %q", rerr, marked(got), got.Header.Get(seal.ForwardedHeader))
	}
	// Served as the principal the forwarding instance established, not as
	// this instance's own evaluation (Authorization: alice).
	if p := h.principal(got); p != bob {
		t.Fatalf("a forwarded request's principal: %x, want the signed one %x", p, bob)
	}

	for name, set := range map[string]func(*http.Request){
		"replayed": func(r *http.Request) {
			r.Header.Set(seal.ForwardedHeader, signed.Header.Get(seal.ForwardedHeader))
		},
		"empty": func(r *http.Request) { r.Header[seal.ForwardedHeader] = []string{""} },
		"twice": func(r *http.Request) {
			v := member.Sign("gw-a", forwardedRequest(r, body, bob), time.Now())
			r.Header[seal.ForwardedHeader] = []string{v, v}
		},
		"other query": func(r *http.Request) {
			r.Header.Set(seal.ForwardedHeader, member.Sign("gw-a", forwardedRequest(r, body, bob), time.Now()))
			r.URL.RawQuery = "x=2"
		},
	} {
		r := newReq()
		set(r)
		if _, rerr := h.acceptForwarded(r, body); rerr == nil || rerr.HTTPStatus != http.StatusForbidden || rerr.Code != jsonrpc.InvalidRequest {
			t.Errorf("%s: %+v, want 403 -32600", name, rerr)
		}
	}
}
