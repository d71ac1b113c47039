package tests

// Gateway-hosted tasks (issue 13, the Tasks extension
// io.modelcontextprotocol/tasks) for a legacy server that knows nothing of
// tasks: tests/legacyfixture's plain in-line tools behind a `task` policy.

import (
	"fmt"
	"os/exec"
	"slices"
	"testing"
)

// taskPolicy is the Caddyfile policy that passes every tasks-* scenario
// in front of tests/legacyfixture (see its tasks.go).
const taskPolicy = `		task greet forbidden
		task slow_compute optional 200ms
		task failing_job required
		task protocol_error_job required
		task confirm_delete optional 0
		task multi_input optional 0
		task test_tool_with_task required 300ms
`

// startTaskGateway starts tests/legacyfixture and a gateway in front of it
// with taskPolicy and the extra Caddyfile lines; it returns the gateway
// and the fixture's URL.
func startTaskGateway(t *testing.T, extra string) (*gateway, string) {
	t.Helper()
	bin := buildGoBinary(t, "./tests/legacyfixture")
	port := freePort(t)
	upstream := fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
	p := startPeer(t, "legacyfixture", exec.Command(bin, "-addr", fmt.Sprintf("127.0.0.1:%d", port)))
	p.waitUp(t, upstream)
	g := startGateway(t, "\t\tupstream "+upstream+" {\n\t\t\tera legacy\n\t\t}\n"+taskPolicy+extra)
	return g, upstream
}

// TestConformanceTasks runs every tasks-* scenario of the conformance
// suite, one by one, through the gateway in front of the legacy fixture
// with the task policy: each must run and pass. tasks-status-notifications
// is a stub of the suite's that reports only SKIPPED checks: it must run
// and show just that.
func TestConformanceTasks(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Node and the conformance suite; skipped with -short")
	}
	nodeBin(t)
	requireLocalhostIPv4(t)
	g, _ := startTaskGateway(t, "")
	url := localhostURL(t, g.URL)
	for _, name := range append(slices.Clone(tasksScenarios), "tasks-status-notifications") {
		rep := conformance(t, url, "", conformanceWant{MinScored: 1}, "--scenario", name)
		s, ok := rep.Scenarios[name]
		if !ok {
			t.Errorf("%s did not run", name)
			continue
		}
		statuses := map[string]int{}
		for _, c := range s.Checks {
			statuses[c.Status]++
		}
		t.Logf("%s: %d checks %v in %v", name, len(s.Checks), statuses, rep.Duration.Round(1e6))
		if name == "tasks-status-notifications" && (len(s.Checks) == 0 || statuses["SKIPPED"] != len(s.Checks)) {
			t.Errorf("%s: want only SKIPPED checks (the suite's stub), got %v", name, statuses)
		}
	}
}
