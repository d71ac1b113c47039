package caddymodule

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

// TestCaddyfileServers: server blocks adapt to servers, each with its
// upstream options, prefix and tools filter; list_timeout to federation.
func TestCaddyfileServers(t *testing.T) {
	input := `mcp_gateway {
		server github {
			upstream http://10.0.0.5:8080/mcp {
				era legacy
			}
			upstream http://10.0.0.6:8080/mcp
			prefix gh_
			tools include create_issue search_*
			tools exclude delete_*
			tools include list_?
			lb_policy round_robin
			transport http {
				dial_timeout 2s
			}
		}
		server docs {
			dynamic a example.internal 8080 {
				refresh 10s
			}
			dynamic_endpoint http:///mcp {
				era modern
			}
			dynamic_refuse private
			prefix ""
		}
		server files {
			upstream https://files.example.com/mcp
		}
		list_timeout 3s
		max_rounds 3
	}`
	var h Handler
	if err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser(input)); err != nil {
		t.Fatal(err)
	}
	got, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"servers":[` +
		`{"name":"github","prefix":"gh_","tools":{"include":["create_issue","search_*","list_?"],"exclude":["delete_*"]},` +
		`"upstreams":[{"url":"http://10.0.0.5:8080/mcp","era":"legacy"},{"url":"http://10.0.0.6:8080/mcp"}],` +
		`"selection_policy":{"policy":"round_robin"},"transport":{"dial_timeout":2000000000,"protocol":"http"}},` +
		`{"name":"docs","prefix":"","dynamic_upstreams":{"name":"example.internal","port":"8080","refresh":10000000000,"source":"a"},` +
		`"dynamic_endpoint":{"url":"http:///mcp","era":"modern"},"dynamic_refuse":["private"]},` +
		`{"name":"files","upstreams":[{"url":"https://files.example.com/mcp"}]}],` +
		`"federation":{"list_timeout":3000000000},"parking":{"max_rounds":3}}`
	if string(got) != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	if err := h.checkServers(); err != nil {
		t.Fatalf("checkServers of the adapted config: %v", err)
	}
}

// TestCaddyfileServerErrors: each mistake in server blocks, or beside
// them, is refused while the Caddyfile is parsed, with the line of the
// option or server at fault.
func TestCaddyfileServerErrors(t *testing.T) {
	const up = "  upstream http://127.0.0.1:9/mcp\n"
	srv := func(name, body string) string { return " server " + name + " {\n" + up + body + " }\n" }
	cases := map[string]struct {
		input, want string
		line        int
	}{
		"no name":         {" server {\n" + up + " }\n", "server needs a name", 2},
		"two names":       {" server a b {\n" + up + " }\n", `server takes one name; options go in its block, got "b"`, 2},
		"bad name":        {srv("git.hub", ""), `server "git.hub": name: want 1 to 64 letters, digits, '_' or '-'`, 2},
		"long name":       {srv(strings.Repeat("n", 65), ""), "name: want 1 to 64", 2},
		"duplicate name":  {srv("a", "") + srv("a", ""), `server "a" is listed twice`, 5},
		"unknown option":  {srv("a", "  max_rounds 3\n"), `unrecognized server option "max_rounds"`, 4},
		"no upstream":     {" server a {\n  prefix a_\n }\n", `server "a": at least one upstream (or a dynamic upstream source) is required`, 2},
		"dup upstream":    {srv("a", up), `upstream "http://127.0.0.1:9/mcp" is listed twice`, 4},
		"bad upstream":    {" server a {\n  upstream ftp://x/mcp\n }\n", "scheme must be http or https", 3},
		"tools bad word":  {srv("a", "  tools only x\n"), `tools "only": want include or exclude, then globs`, 4},
		"tools no word":   {srv("a", "  tools\n"), "tools needs include or exclude", 4},
		"tools no globs":  {srv("a", "  tools exclude\n"), "tools exclude needs at least one glob", 4},
		"tools bad glob":  {srv("a", "  tools include [a-\n"), `tools include: glob "[a-": syntax error in pattern`, 4},
		"prefix twice":    {srv("a", "  prefix a_\n  prefix b_\n"), "prefix already specified", 5},
		"prefix no value": {srv("a", "  prefix\n"), "prefix takes one prefix", 4},
		"prefix two":      {srv("a", "  prefix a_ b_\n"), "prefix takes one prefix", 4},
		"prefix bad char": {srv("a", "  prefix a/\n"), `prefix "a/": want at most 64 letters, digits, '_', '-' or '.'`, 4},
		"prefix too long": {srv("a", "  prefix "+strings.Repeat("p", 65)+"\n"), "want at most 64", 4},
		"default too long": {srv(strings.Repeat("n", 63), ""),
			"(the default, the name and `__`: give the server a prefix): want at most 64", 2},
		"equal prefixes": {srv("a", "  prefix x_\n") + srv("b", "  prefix x_\n"), `server "b": prefix "x_" is also server "a"'s`, 6},
		"equal default":  {srv("a", "") + srv("b", "  prefix a__\n"), `server "b": prefix "a__" is also server "a"'s`, 5},
		"prefix begins": {srv("a", "  prefix gh\n") + srv("b", "  prefix gh_\n"),
			`server "b": prefix "gh_" and server "a"'s prefix "gh" begin one another`, 6},
		"prefix begun":   {srv("ab", "") + srv("b", "  prefix a\n"), `server "b": prefix "a" and server "ab"'s prefix "ab__" begin one another`, 5},
		"two empty":      {srv("a", "  prefix \"\"\n") + srv("b", "  prefix \"\"\n"), `server "b": prefix "" is also server "a"'s`, 6},
		"upstream first": {up + srv("a", ""), "upstream beside servers: with `server` blocks, upstreams go inside them, at Testfile:2", 2},
		"upstream after": {srv("a", "") + up, "upstream beside servers: with `server` blocks, upstreams go inside them, at Testfile:5", 5},
		"lb_policy":      {srv("a", "") + " lb_policy first\n", "lb_policy beside servers: with `server` blocks, upstreams go inside them, and lb_policy with them", 5},
		"transport":      {" transport http\n" + srv("a", ""), "transport beside servers", 2},
		"dynamic":        {srv("a", "") + " dynamic a x.internal 80\n", "dynamic beside servers", 5},
		"endpoint":       {srv("a", "") + " dynamic_endpoint http:///mcp\n", "dynamic_endpoint beside servers", 5},
		"refuse":         {srv("a", "") + " dynamic_refuse private\n", "dynamic_refuse beside servers", 5},
		"list_timeout alone": {up + " list_timeout 3s\n",
			"list_timeout without servers: it applies only to a block of `server` blocks", 3},
		"list_timeout negative": {srv("a", "") + " list_timeout -1s\n", "list_timeout: must not be negative, got -1s", 5},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			var h Handler
			err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser("mcp_gateway {\n" + c.input + "}"))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error = %v, want it to contain %q", err, c.want)
			}
			if at := ", at Testfile:" + strconv.Itoa(c.line); !strings.Contains(err.Error(), at) {
				t.Fatalf("error = %v, want it at line %d", err, c.line)
			}
		})
	}
}

// TestCheckServersJSON: a JSON config (no Caddyfile) gets the same errors
// from checkServers, naming the JSON key where it differs from the
// Caddyfile option.
func TestCheckServersJSON(t *testing.T) {
	const up = `"upstreams":[{"url":"http://127.0.0.1:9/mcp"}]`
	srv := func(name, rest string) string { return `{"name":"` + name + `",` + up + rest + `}` }
	servers := func(s ...string) string { return `"servers":[` + strings.Join(s, ",") + `]` }
	many := make([]string, maxServers+1)
	for i := range many {
		many[i] = srv("s"+strconv.Itoa(i), "")
	}
	cases := map[string]struct{ config, want string }{
		"ok":                        {servers(srv("a", ""), srv("b", `,"prefix":""`), srv("c", `,"tools":{"include":["x*"]}`)) + `,"federation":{"list_timeout":1000000000}`, ""},
		"no servers, no federation": {up, ""},
		"null server":               {`"servers":[null]`, "a server is null"},
		"no name":                   {servers(`{` + up + `}`), `server "": name: want 1 to 64`},
		"bad name":                  {servers(srv("a:b", "")), `server "a:b": name`},
		"duplicate name":            {servers(srv("a", ""), srv("a", "")), `server "a" is listed twice`},
		"no upstream":               {servers(`{"name":"a"}`), `server "a": at least one upstream (or a dynamic upstream source) is required`},
		"bad prefix":                {servers(srv("a", `,"prefix":"a b"`)), `server "a": prefix "a b": want at most 64`},
		"default too long":          {servers(srv(strings.Repeat("n", 64), "")), "the default, the name and `__`"},
		"equal prefixes":            {servers(srv("a", `,"prefix":"p"`), srv("b", `,"prefix":"p"`)), `server "b": prefix "p" is also server "a"'s`},
		"prefix begins":             {servers(srv("a", ""), srv("b", `,"prefix":"a_"`)), `server "b": prefix "a_" and server "a"'s prefix "a__" begin one another`},
		"two empty":                 {servers(srv("a", `,"prefix":""`), srv("b", `,"prefix":""`)), `at most one server may show its names as they are`},
		"bad include glob":          {servers(srv("a", `,"tools":{"include":["["]}`)), `server "a": tools include: glob "[": syntax error in pattern`},
		"bad exclude glob":          {servers(srv("a", `,"tools":{"exclude":["ok","\\"]}`)), `server "a": tools exclude: glob "\\"`},
		"too many":                  {servers(many...), "servers: at most 64 in a block, got 65"},
		"upstreams beside":          {servers(srv("a", "")) + "," + up, "upstreams beside servers: with `server` blocks, upstreams go inside them"},
		"policy beside":             {servers(srv("a", "")) + `,"selection_policy":{"policy":"first"}`, "selection_policy beside servers"},
		"dynamic beside":            {servers(srv("a", "")) + `,"dynamic_upstreams":{"source":"a"}`, "dynamic_upstreams beside servers"},
		"endpoint beside":           {servers(srv("a", "")) + `,"dynamic_endpoint":{"url":"http:///mcp"}`, "dynamic_endpoint beside servers"},
		"refuse beside":             {servers(srv("a", "")) + `,"dynamic_refuse":["private"]`, "dynamic_refuse beside servers"},
		"transport beside":          {servers(srv("a", "")) + `,"transport":{"protocol":"http"}`, "transport beside servers"},
		"timeout alone":             {up + `,"federation":{"list_timeout":1000000000}`, "list_timeout without servers"},
		"negative timeout":          {servers(srv("a", "")) + `,"federation":{"list_timeout":-1}`, "list_timeout: must not be negative, got -1ns"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			var h Handler
			if err := json.Unmarshal([]byte("{"+c.config+"}"), &h); err != nil {
				t.Fatal(err)
			}
			err := h.checkServers()
			if c.want == "" {
				if err != nil {
					t.Fatalf("checkServers: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error = %v, want it to contain %q", err, c.want)
			}
		})
	}
}

// TestListTimeoutDefault: list_timeout 0 (or none) is 5s in a block with
// servers; a block without servers keeps 0, which checkServers accepts.
func TestListTimeoutDefault(t *testing.T) {
	for _, c := range []struct {
		config string
		want   time.Duration
	}{
		{`{"servers":[{"name":"a","upstreams":[{"url":"http://127.0.0.1:9/mcp"}]}]}`, 5 * time.Second},
		{`{"servers":[{"name":"a","upstreams":[{"url":"http://127.0.0.1:9/mcp"}]}],"federation":{"list_timeout":"2s"}}`, 2 * time.Second},
		{`{"upstreams":[{"url":"http://127.0.0.1:9/mcp"}]}`, 0},
	} {
		var h Handler
		if err := json.Unmarshal([]byte(c.config), &h); err != nil {
			t.Fatal(err)
		}
		h.setDefaults()
		if got := time.Duration(h.Federation.ListTimeout); got != c.want {
			t.Errorf("%s: list_timeout %v, want %v", c.config, got, c.want)
		}
		if h.Servers == nil {
			if err := h.checkServers(); err != nil {
				t.Errorf("%s: checkServers after setDefaults: %v", c.config, err)
			}
		}
	}
}
