package tests

import (
	"fmt"
	"strings"
	"testing"
)

// TestFleetTwoInstancesDoc runs docs/fleet.md's "Two instances on one
// machine" as written, on free ports: its two Caddyfiles (the ports, admin
// addresses, storage path and demo server's URL replaced), both with one
// MCP_GATEWAY_KEY, in front of the demo server, and its curl walk-through
// against them: a call that asks a question on gw-a and its retry on gw-b;
// a task started on gw-a and polled through gw-b, then gw-a stopped through
// its admin API and the task answered and finished through gw-b, from the
// shared storage. Each must print the answers the page shows.
func TestFleetTwoInstancesDoc(t *testing.T) {
	t.Parallel()
	files := map[string]string{}
	for _, ex := range readmeExamples(t) {
		if ex.kind == "adapt" && strings.HasPrefix(ex.name, "fleet-two-") {
			files[ex.name] = ex.code
		}
	}
	scripts, _ := readmeCurlScripts(t)
	script, ok := scripts["fleet"]
	if len(files) != 2 || !ok {
		t.Fatalf("docs/fleet.md lacks the fleet-two-a and fleet-two-b Caddyfiles or the <!-- curl: fleet --> walk-through (found %d files)", len(files))
	}

	// The page's addresses, and what the test uses instead.
	ports := []int{freePort(t), freePort(t)}
	admins := []string{fmt.Sprintf("127.0.0.1:%d", freePort(t)), fmt.Sprintf("127.0.0.1:%d", freePort(t))}
	local := strings.NewReplacer(
		"9110", fmt.Sprint(ports[0]), "9120", fmt.Sprint(ports[1]),
		"localhost:2020", admins[0], "localhost:2021", admins[1],
		"/tmp/mcp-gateway-fleet", t.TempDir(), "http://127.0.0.1:9101/mcp", startDemoServer(t))
	key := "MCP_GATEWAY_KEY=" + testKey(0x2b)
	for i, f := range []struct{ name, port, admin string }{{"fleet-two-a", "9110", "localhost:2020"}, {"fleet-two-b", "9120", "localhost:2021"}} {
		code := files[f.name]
		for _, w := range []string{"admin " + f.admin, ":" + f.port + " {", "storage file_system /tmp/mcp-gateway-fleet",
			"upstream http://127.0.0.1:9101/mcp", "state_key {env.MCP_GATEWAY_KEY}"} {
			if !strings.Contains(code, w) {
				t.Fatalf("docs/fleet.md's %s has no %s", f.name, w)
			}
		}
		launchCaddyfile(t, ports[i], admins[i], local.Replace(code), key)
	}

	out := runReadmeScript(t, local.Replace(script))
	wantLines(t, "docs/fleet.md's curl walk-through", out, [][]string{
		{`"result":{"resultType":"input_required"`, `"message":"How many people, and when?"`, `"requestState":"`},
		{`"result":{"content":[{"type":"text","text":"Booked Chez Caddy for 2 on 2026-12-24."}],"resultType":"complete"`},
		{`"result":{"resultType":"complete","taskId":"`, `"status":"input_required"`, `"inputRequests":{"elicitation-1":{"method":"elicitation/create"`},
		{`{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete"}}`},
		{`"result":{"resultType":"complete","taskId":"`, `"status":"completed"`,
			`"result":{"content":[{"type":"text","text":"Booked Chez Caddy for 4 on 2026-12-31."}]`},
	})
}
