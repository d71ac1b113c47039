package caddymodule

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

func TestUnmarshalDynamicAndHealth(t *testing.T) {
	input := `mcp_gateway {
		dynamic srv _mcp._tcp.mcp.internal {
			refresh 10s
			resolvers 10.0.0.53
		}
		dynamic_endpoint https:///v1/mcp {
			era legacy
			gather always
		}
		max_fails 3
		unhealthy_status 5xx 429
		unhealthy_latency 2s
		health_passes 2
		health_fails 4
	}`
	var h Handler
	if err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser(input)); err != nil {
		t.Fatal(err)
	}
	got, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"dynamic_upstreams":{"name":"_mcp._tcp.mcp.internal","refresh":10000000000,"resolver":{"addresses":["10.0.0.53"]},"source":"srv"},` +
		`"dynamic_endpoint":{"url":"https:///v1/mcp","era":"legacy","gather":"always"},` +
		`"health":{"active":{"passes":2,"fails":4},"passive":{"max_fails":3,"unhealthy_status":[5,429],"unhealthy_latency":2000000000}}}`
	if string(got) != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

func TestUnmarshalDynamicAndHealthErrors(t *testing.T) {
	cases := map[string]struct{ input, want string }{
		"unknown source":         {"mcp_gateway {\n dynamic nowhere\n}", "nowhere"},
		"dynamic twice":          {"mcp_gateway {\n dynamic a x 80\n dynamic a y 80\n}", "dynamic already specified"},
		"endpoint with host":     {"mcp_gateway {\n dynamic_endpoint http://a/mcp\n}", "no host goes here"},
		"endpoint bad scheme":    {"mcp_gateway {\n dynamic_endpoint ftp:///mcp\n}", "scheme must be http or https"},
		"endpoint twice":         {"mcp_gateway {\n dynamic_endpoint http:///a\n dynamic_endpoint http:///b\n}", "dynamic_endpoint already specified"},
		"endpoint bad era":       {"mcp_gateway {\n dynamic_endpoint http:///mcp {\n era future\n }\n}", `unknown era "future"`},
		"bad status":             {"mcp_gateway {\n unhealthy_status 6xx\n}", "invalid unhealthy_status"},
		"status out of range":    {"mcp_gateway {\n unhealthy_status 99\n}", "invalid unhealthy_status"},
		"status without args":    {"mcp_gateway {\n unhealthy_status\n}", "wrong argument count"},
		"zero max_fails":         {"mcp_gateway {\n max_fails 0\n}", "invalid max_fails"},
		"bad unhealthy_latency":  {"mcp_gateway {\n unhealthy_latency slow\n}", "invalid unhealthy_latency"},
		"zero health_passes":     {"mcp_gateway {\n health_passes 0\n}", "invalid health_passes"},
		"duplicate health_fails": {"mcp_gateway {\n health_fails 1\n health_fails 2\n}", "health_fails already specified"},
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

func TestEndpointURL(t *testing.T) {
	for _, c := range []struct{ template, dial, want, err string }{
		{"http:///mcp", "10.0.0.7:3001", "http://10.0.0.7:3001/mcp", ""},
		{"https:///v1/mcp?x=1", "mcp-0.mcp.internal.:443", "https://mcp-0.mcp.internal:443/v1/mcp?x=1", ""},
		{"http:///mcp", "[fd00::7]:8080", "http://[fd00::7]:8080/mcp", ""},
		{"http:///mcp", "tcp/10.0.0.7:3001", "http://10.0.0.7:3001/mcp", ""},
		{"http:///mcp", "unix//run/mcp.sock", "", "over TCP"},
		{"http:///mcp", "udp/10.0.0.7:53", "", "over TCP"},
		{"http:///mcp", "10.0.0.7:3001-3003", "", "want host:port"},
		{"http:///mcp", "10.0.0.7", "", "want host:port"},
	} {
		ep, err := checkEndpointTemplate(c.template)
		if err != nil {
			t.Fatal(err)
		}
		d := &dynamicUpstreams{endpoint: ep}
		got, err := d.endpointURL(c.dial)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: error %v, want %q", c.dial, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%s with %s = %q, %v; want %q", c.dial, c.template, got, err, c.want)
		}
	}
}
