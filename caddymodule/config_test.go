package caddymodule

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
)

// groupedJSON sets an option of every group, and a module in one
// (fleet.peer_transport), as the admin API would be given them.
const groupedJSON = `{"upstreams":[{"url":"http://127.0.0.1:9/mcp","era":"legacy"}],` +
	`"health":{"active":{"interval":60000000000,"fails":3},"passive":{"max_fails":2}},` +
	`"fleet":{"instance_id":"gw-1","peer_transport":{"protocol":"http","dial_timeout":2000000000}},` +
	`"security":{"allowed_hosts":["mcp.internal"],"max_request_body":1024},` +
	`"streams":{"write_timeout":5000000000},` +
	`"parking":{"max_parked":7,"max_rounds":2},` +
	`"sessions":{"session_lifetime":3600000000000},` +
	`"tasks":{"rules":[{"tool":"*","mode":"optional"}],"max_tasks":9}}`

// TestGroupedJSON: the grouped JSON fills the handler's fields (as Caddy
// reads a module's JSON: unknown keys refused), writes back the same, and
// a module inside a group (fleet.peer_transport) is loaded by Provision
// through the promoted field.
func TestGroupedJSON(t *testing.T) {
	var h Handler
	if err := caddy.StrictUnmarshalJSON([]byte(groupedJSON), &h); err != nil {
		t.Fatal(err)
	}
	if h.Health.Active.Interval != caddy.Duration(time.Minute) || h.Health.Active.Fails != 3 || h.Health.Passive.MaxFails != 2 ||
		h.Fleet.InstanceID != "gw-1" || len(h.Security.AllowedHosts) != 1 || h.Security.MaxRequestBody != 1024 ||
		h.Streams.WriteTimeout != caddy.Duration(5*time.Second) || h.Parking.MaxParked != 7 || h.Parking.MaxRounds != 2 ||
		h.Sessions.SessionLifetime != caddy.Duration(time.Hour) || len(h.Tasks.Rules) != 1 || h.Tasks.MaxTasks != 9 {
		t.Fatalf("fields not filled from the grouped JSON: %+v", h)
	}
	out, err := json.Marshal(&h)
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != groupedJSON {
		t.Fatalf("written back as\n%s\nwant\n%s", out, groupedJSON)
	}

	if err := provisioned(t, &h); err != nil {
		t.Fatal(err)
	}
	if h.peerClient == nil || h.Fleet.PeerTransportRaw != nil {
		t.Fatalf("fleet.peer_transport not loaded: peerClient %v, raw %s", h.peerClient, h.Fleet.PeerTransportRaw)
	}

	// A module error names the option, so the module was loaded from the group.
	var bad Handler
	badJSON := strings.Replace(groupedJSON, `"dial_timeout":2000000000`, `"proxy_protocol":"v2"`, 1)
	if err := caddy.StrictUnmarshalJSON([]byte(badJSON), &bad); err != nil {
		t.Fatal(err)
	}
	if err := provisioned(t, &bad); err == nil || !strings.Contains(err.Error(), "peer_transport: proxy_protocol") {
		t.Fatalf("Provision with fleet.peer_transport proxy_protocol: %v, want it refused", err)
	}
}

// TestFlatKeysRefused: a configuration written before the keys were
// grouped is refused by name, not silently ignored.
func TestFlatKeysRefused(t *testing.T) {
	for _, flat := range []string{`"max_parked":7`, `"state_keys":["x"]`, `"health_interval":1`, `"tasks":[{"tool":"*","mode":"optional"}]`} {
		var h Handler
		err := caddy.StrictUnmarshalJSON([]byte(`{"upstreams":[{"url":"http://127.0.0.1:9/mcp"}],`+flat+`}`), &h)
		if err == nil {
			t.Errorf("%s: accepted", flat)
		}
	}
}

// TestMinimalJSON: groups left empty are left out of the JSON.
func TestMinimalJSON(t *testing.T) {
	out, err := json.Marshal(oneUpstream())
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"upstreams":[{"url":"http://127.0.0.1:9/mcp","era":"legacy"}]}`; string(out) != want {
		t.Fatalf("got %s, want %s", out, want)
	}
}
