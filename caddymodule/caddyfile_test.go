package caddymodule

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

func TestUnmarshalCaddyfile(t *testing.T) {
	input := `mcp_gateway {
		upstream http://127.0.0.1:9101/mcp
		upstream https://mcp.example.com/mcp {
			era modern
			tasks off
		}
		upstream http://127.0.0.1:9102/mcp {
			era legacy
			gather always
			get_stream off
			resume off
		}
		lb_policy round_robin
		state_key AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA= BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB=
		allowed_origins https://app.example.com
		allowed_hosts mcp.internal
		keepalive_interval 20s
		stream_close_delay 2s
		fail_duration 30s
		max_request_body 1MiB
		accept_client_quirks protocol_header_mismatch
		accept_client_quirks missing_method_header
		max_rounds 3
		max_inputs_per_round 4
		max_buffered_notifications 64
		saga on
		multi_turn_sse on
		max_sessions_per_principal 50
		write_timeout 10s
		session_lifetime 1h
		max_get_streams 2000
		max_get_streams_per_principal 20
		max_task_wait 10m
		task_store off
		task_lease 30s
		max_task_result 1MiB
		task_listen_poll 250ms
		max_listen_task_ids 20
		max_task_listeners_per_principal 3
		park_ttl 2m
		max_parked 500
		max_parked_per_principal 20
		gather_window 50ms
		resume_linger 100ms
		principal {http.auth.user.id}
		health_interval 30s
		health_timeout 2s
		log_unsafe_details
	}`
	var h Handler
	if err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser(input)); err != nil {
		t.Fatal(err)
	}
	got, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"upstreams":[{"url":"http://127.0.0.1:9101/mcp"},{"url":"https://mcp.example.com/mcp","era":"modern","tasks":"off"},{"url":"http://127.0.0.1:9102/mcp","era":"legacy","gather":"always","get_stream":"off","resume":"off"}],` +
		`"selection_policy":{"policy":"round_robin"},` +
		`"health":{"active":{"interval":30000000000,"timeout":2000000000},"passive":{"fail_duration":30000000000}},` +
		`"fleet":{"state_keys":["AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=","BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB="]},` +
		`"security":{"allowed_origins":["https://app.example.com"],"allowed_hosts":["mcp.internal"],"principal":"{http.auth.user.id}","max_request_body":1048576,"accept_client_quirks":["protocol_header_mismatch","missing_method_header"],"log_unsafe_details":true},` +
		`"streams":{"keepalive_interval":20000000000,"stream_close_delay":2000000000,"write_timeout":10000000000},` +
		`"parking":{"park_ttl":120000000000,"max_parked":500,"max_parked_per_principal":20,"gather_window":50000000,"resume_linger":100000000,"max_rounds":3,"max_inputs_per_round":4,"max_buffered_notifications":64},` +
		`"sessions":{"max_sessions_per_principal":50,"session_lifetime":3600000000000,"max_get_streams":2000,"max_get_streams_per_principal":20},` +
		`"tasks":{"store":"off","lease":30000000000,"max_result":1048576,"max_task_wait":600000000000,"listen_poll":250000000,"max_listen_task_ids":20,"max_task_listeners_per_principal":3},"faces":{"saga":{},"multi_turn_sse":{}}}`
	if string(got) != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

func TestUnmarshalCaddyfileErrors(t *testing.T) {
	cases := map[string]struct{ input, want string }{
		"unknown option":         {"mcp_gateway {\n upstream http://a/mcp\n nope 1\n}", `unrecognized mcp_gateway option "nope"`},
		"unknown upstream opt":   {"mcp_gateway {\n upstream http://a/mcp {\n weight 3\n }\n}", `unrecognized upstream option "weight"`},
		"bad scheme":             {"mcp_gateway {\n upstream ftp://a/mcp\n}", "scheme must be http or https"},
		"no host":                {"mcp_gateway {\n upstream http:///mcp\n}", "no host"},
		"unparsable url":         {"mcp_gateway {\n upstream http://a b/\n}", "upstream takes one URL"},
		"bad url escape":         {"mcp_gateway {\n upstream http://a/%zz\n}", "invalid URL escape"},
		"missing url":            {"mcp_gateway {\n upstream\n}", "upstream needs a URL"},
		"bad era":                {"mcp_gateway {\n upstream http://a/mcp {\n era future\n }\n}", `unknown era "future"`},
		"duplicate era":          {"mcp_gateway {\n upstream http://a/mcp {\n era legacy\n era modern\n }\n}", "era already specified"},
		"bad gather":             {"mcp_gateway {\n upstream http://a/mcp {\n gather sometimes\n }\n}", `unknown gather "sometimes"`},
		"duplicate gather":       {"mcp_gateway {\n upstream http://a/mcp {\n gather always\n gather learn\n }\n}", "gather already specified"},
		"gather without value":   {"mcp_gateway {\n upstream http://a/mcp {\n gather\n }\n}", "wrong argument count"},
		"bad get_stream":         {"mcp_gateway {\n upstream http://a/mcp {\n get_stream maybe\n }\n}", `unknown get_stream "maybe"`},
		"duplicate get_stream":   {"mcp_gateway {\n upstream http://a/mcp {\n get_stream on\n get_stream off\n }\n}", "get_stream already specified"},
		"bad resume":             {"mcp_gateway {\n upstream http://a/mcp {\n resume maybe\n }\n}", `unknown resume "maybe"`},
		"duplicate resume":       {"mcp_gateway {\n upstream http://a/mcp {\n resume on\n resume off\n }\n}", "resume already specified"},
		"bad tasks":              {"mcp_gateway {\n upstream http://a/mcp {\n tasks maybe\n }\n}", `unknown tasks "maybe"`},
		"bad max_task_wait":      {"mcp_gateway {\n max_task_wait soon\n}", "invalid max_task_wait"},
		"inline argument":        {"mcp_gateway http://a/mcp", "unexpected argument"},
		"bad duration":           {"mcp_gateway {\n upstream http://a/mcp\n keepalive_interval soon\n}", "invalid keepalive_interval"},
		"duplicate duration":     {"mcp_gateway {\n fail_duration 1s\n fail_duration 2s\n}", "fail_duration already specified"},
		"bad size":               {"mcp_gateway {\n max_request_body lots\n}", "invalid max_request_body"},
		"unknown policy":         {"mcp_gateway {\n lb_policy smartest\n}", "smartest"},
		"duplicate policy":       {"mcp_gateway {\n lb_policy random\n lb_policy first\n}", "lb_policy already specified"},
		"state_key without args": {"mcp_gateway {\n state_key\n}", "state_key needs a key (an unset environment variable?)"},
		"bad max_parked":         {"mcp_gateway {\n max_parked -3\n}", "invalid max_parked"},
		"bad parked/principal":   {"mcp_gateway {\n max_parked_per_principal x\n}", "invalid max_parked_per_principal"},
		"duplicate park_ttl":     {"mcp_gateway {\n park_ttl 1m\n park_ttl 2m\n}", "park_ttl already specified"},
		"principal two args":     {"mcp_gateway {\n principal a b\n}", "wrong argument count"},
		"zero max_rounds":        {"mcp_gateway {\n max_rounds 0\n}", "invalid max_rounds"},
		"zero inputs per round":  {"mcp_gateway {\n max_inputs_per_round 0\n}", "invalid max_inputs_per_round"},
		"bad write_timeout":      {"mcp_gateway {\n write_timeout soon\n}", "invalid write_timeout"},
		"bad session_lifetime":   {"mcp_gateway {\n session_lifetime forever\n}", "invalid session_lifetime"},
		"unsafe with argument":   {"mcp_gateway {\n log_unsafe_details yes\n}", "wrong argument count"},
		"quirks without value":   {"mcp_gateway {\n accept_client_quirks\n}", "wrong argument count"},
		"unknown quirk":          {"mcp_gateway {\n accept_client_quirks lenient\n}", `accept_client_quirks: unknown repair "lenient" (want protocol_header_mismatch or missing_method_header)`},
		"quirk twice":            {"mcp_gateway {\n accept_client_quirks missing_method_header\n accept_client_quirks missing_method_header\n}", `accept_client_quirks: "missing_method_header" is listed twice`},
		"bad health_interval":    {"mcp_gateway {\n health_interval often\n}", "invalid health_interval"},
		"task_store no value":    {"mcp_gateway {\n task_store\n}", "wrong argument count"},
		"task_store two values":  {"mcp_gateway {\n task_store storage off\n}", "wrong argument count"},
		"duplicate task_store":   {"mcp_gateway {\n task_store off\n task_store storage\n}", "task_store already specified"},
		"bad task_lease":         {"mcp_gateway {\n task_lease long\n}", `invalid task_lease "long"`},
		"task_lease no unit":     {"mcp_gateway {\n task_lease 15\n}", `invalid task_lease "15"`},
		"duplicate task_lease":   {"mcp_gateway {\n task_lease 10s\n task_lease 20s\n}", "task_lease already specified"},
		"bad max_task_result":    {"mcp_gateway {\n max_task_result lots\n}", `invalid max_task_result "lots": want a size such as 4MiB`},
		"negative task result":   {"mcp_gateway {\n max_task_result -1\n}", `invalid max_task_result "-1"`},
		"duplicate task result":  {"mcp_gateway {\n max_task_result 1MiB\n max_task_result 2MiB\n}", "max_task_result already specified"},
		"negative listen poll":   {"mcp_gateway {\n task_listen_poll -1s\n}", "task_listen_poll"},
		"zero listen task ids":   {"mcp_gateway {\n max_listen_task_ids 0\n}", "max_listen_task_ids"},
		"bad task listeners":     {"mcp_gateway {\n max_task_listeners_per_principal many\n}", "max_task_listeners_per_principal"},
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

// TestCaddyfileChecksCarryLine: the values checked while the Caddyfile is
// parsed are refused there, with the file and line of
// the option at fault (Testfile:N), not later at provision with no place.
func TestCaddyfileChecksCarryLine(t *testing.T) {
	const up = " upstream http://127.0.0.1:9/mcp\n"
	key := "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="
	cases := map[string]struct{ input, want string }{
		"negative park_ttl":     {"mcp_gateway {\n" + up + " park_ttl -1s\n}", "park_ttl: must be positive, got -1s, at Testfile:3"},
		"negative fail_dur":     {"mcp_gateway {\n" + up + " fail_duration -1\n}", "fail_duration: must be positive, got -1ns, at Testfile:3"},
		"negative close delay":  {"mcp_gateway {\n" + up + " stream_close_delay -2s\n}", "stream_close_delay: must not be negative, got -2s, at Testfile:3"},
		"negative task_ttl":     {"mcp_gateway {\n" + up + " task_ttl -1s\n}", "task_ttl: must be positive, got -1s, at Testfile:3"},
		"long resume_linger":    {"mcp_gateway {\n" + up + " resume_linger 2s\n}", "resume_linger: must be at most 1s, got 2s, at Testfile:3"},
		"unknown task_store":    {"mcp_gateway {\n" + up + " task_store redis\n}", `task_store: unknown value "redis" (want storage or off), at Testfile:3`},
		"short task_lease":      {"mcp_gateway {\n" + up + " task_lease 500ms\n}", "task_lease: must be at least 1s, got 500ms, at Testfile:3"},
		"negative task_lease":   {"mcp_gateway {\n" + up + " task_lease -1\n}", "task_lease: must be at least 1s, got -1ns, at Testfile:3"},
		"huge max_task_result":  {"mcp_gateway {\n" + up + " max_task_result 65MiB\n}", "max_task_result: must be at most 67108864 (64MiB, what a task record holds), got 68157440, at Testfile:3"},
		"unknown saga":          {"mcp_gateway {\n" + up + " saga maybe\n}", `unknown saga "maybe" (want on or off), at Testfile:3`},
		"too many buffered":     {"mcp_gateway {\n" + up + " max_buffered_notifications 5000\n}", "max_buffered_notifications: must be at most 4096"},
		"short state_key":       {"mcp_gateway {\n" + up + " state_key c2hvcnQ=\n}", "state_key 1: key decodes to 5 bytes, want 32: make one with `openssl rand -base64 32`"},
		"second key not base64": {"mcp_gateway {\n" + up + " state_key " + key + " not*base64\n}", "state_key 2: key is not valid base64: make one with `openssl rand -base64 32` and give every instance the same, at Testfile:3"},
		"empty state_key":       {"mcp_gateway {\n" + up + " state_key \"\"\n}", "state_key 1 is empty (an unset environment variable?): make one with `openssl rand -base64 32`"},
		"missing upstream":      {"mcp_gateway {\n keepalive_interval 5s\n}", "at least one upstream (or a dynamic upstream source) is required, at Testfile:1"},
		"duplicate upstream":    {"mcp_gateway {\n" + up + up + "}", `upstream "http://127.0.0.1:9/mcp" is listed twice, at Testfile:3`},
		"peer without key":      {"mcp_gateway {\n" + up + " instance_id gw-1\n peer gw-2 http://10.0.0.2:8080\n}", "advertise and peer need state_key, shared by every instance: with a key made at start, no other instance can open this one's tokens, at Testfile:4"},
		"advertise without key": {"mcp_gateway {\n" + up + " advertise http://10.0.0.1:8080\n}", "advertise and peer need state_key, shared by every instance"},
		"advertise with a path": {"mcp_gateway {\n" + up + " state_key " + key + "\n advertise http://10.0.0.1:8080/mcp\n}", "no path, please: the client's request path is kept, at Testfile:4"},
		"bad instance_id":       {"mcp_gateway {\n" + up + " instance_id gw/1\n}", `instance_id "gw/1": want 1 to 64 letters, digits, '.', '_' or '-', at Testfile:3`},
		"peer bad url":          {"mcp_gateway {\n" + up + " peer gw-2 ftp://10.0.0.2\n}", `peer gw-2: "ftp://10.0.0.2": scheme must be http or https, at Testfile:3`},
		"peer bad id":           {"mcp_gateway {\n" + up + " peer gw:2 http://10.0.0.2\n}", `peer "gw:2": want an instance id`},
		"peer without id":       {"mcp_gateway {\n" + up + " state_key " + key + "\n peer gw-2 http://10.0.0.2:8080\n}", "peer needs instance_id (or advertise) on this instance: with a random id, the other instances cannot list this one, at Testfile:4"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			var h Handler
			err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser(c.input))
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), ", at Testfile:") {
				t.Fatalf("error = %v, want it to contain %q and the file and line", err, c.want)
			}
		})
	}
	// A placeholder is checked at provision, once expanded; a literal key
	// that is right passes.
	var h Handler
	in := "mcp_gateway {\n" + up + " state_key {env.MCP_GATEWAY_KEY} " + key + "\n instance_id {env.ID}\n advertise {env.ADDR}\n}"
	if err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser(in)); err != nil {
		t.Fatalf("a placeholder key refused at parse time: %v", err)
	}
}

// TestCaddyfileTaskStore: task_store, task_lease and max_task_result take
// their values into tasks.store, tasks.lease and tasks.max_result; 0 (or
// nothing) leaves the default, and the bounds themselves are accepted.
func TestCaddyfileTaskStore(t *testing.T) {
	for _, c := range []struct {
		opts, want string
	}{
		{"task_store storage\n task_lease 1s\n max_task_result 1", `{"store":"storage","lease":1000000000,"max_result":1}`},
		{"task_store off\n task_lease 2m\n max_task_result 64MiB", `{"store":"off","lease":120000000000,"max_result":67108864}`},
		{"task_lease 15s\n max_task_result 4194304", `{"lease":15000000000,"max_result":4194304}`},
		{"max_task_result 4MB", `{"max_result":4000000}`},
		{"task_lease 0\n max_task_result 0", ``},
	} {
		var h Handler
		in := "mcp_gateway {\n upstream http://127.0.0.1:9/mcp\n " + c.opts + "\n}"
		if err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser(in)); err != nil {
			t.Fatalf("%q: %v", c.opts, err)
		}
		b, err := json.Marshal(h)
		if err != nil {
			t.Fatal(err)
		}
		if got := gjson.GetBytes(b, "tasks").Raw; got != c.want {
			t.Errorf("%q: tasks %s, want %s", c.opts, got, c.want)
		}
	}
}
