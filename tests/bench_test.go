package tests

import (
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestBenchTool runs tests/bench, the load tool of BENCHMARKS.md, briefly
// through a real gateway against its own go-sdk upstreams in both eras (and
// a federated block over both), so that the tool keeps working as the
// gateway changes: every scenario must complete calls without a single
// error. It measures nothing (speed is for
// tests/bench/run.sh, never asserted in tests).
func TestBenchTool(t *testing.T) {
	t.Parallel()
	bin := buildGoBinary(t, "./tests/bench")
	legacyURL := startBenchServer(t, bin, "legacy")
	modernURL := startBenchServer(t, bin, "modern")
	gl := startGateway(t, "\t\tupstream "+legacyURL+" {\n\t\t\tera legacy\n\t\t}\n\t\ttask hold optional 0")
	gm := startGateway(t, "\t\tupstream "+modernURL+" {\n\t\t\tera modern\n\t\t}")
	// A federated block over both (tests/bench/federation.sh's scenarios).
	gf := startGateway(t, "\t\tserver a {\n\t\t\tupstream "+modernURL+" {\n\t\t\t\tera modern\n\t\t\t}\n\t\t}\n"+
		"\t\tserver b {\n\t\t\tupstream "+legacyURL+" {\n\t\t\t\tera legacy\n\t\t\t}\n\t\t}")

	row := regexp.MustCompile(`^FIG \| [^|]+ \| \d+ \| (\S+) \| (\d+) \| [^|]+ \| [^|]+ \| [^|]+ \| (\d+) \|`)
	for _, tc := range []struct {
		name    string
		args    []string
		targets []string
	}{
		{"pass-through", []string{"-c", "4"}, []string{"gl=legacy:" + gl.URL, "gm=modern:" + gm.URL, "l=legacy:" + legacyURL, "m=modern:" + modernURL}},
		{"forward bridge", []string{"-c", "4", "-tool", "ask", "-args", `{"rounds":3}`}, []string{"fwd=modern:" + gl.URL, "inline=legacy:" + legacyURL}},
		{"federation", []string{"-c", "4", "-tool", "b__echo"}, []string{"fed=modern:" + gf.URL, "fedl=legacy:" + gf.URL}},
		{"tools/list", []string{"-c", "4", "-method", "tools/list"}, []string{"fed=modern:" + gf.URL, "m=modern:" + gm.URL}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"compare", "-scenario", "smoke", "-d", "300ms", "-warmup", "0", "-reps", "1",
				"-cpu", fmt.Sprintf("gateway=%d", gl.cmd.Process.Pid)}, tc.args...)
			out, err := exec.Command(bin, append(args, tc.targets...)...).CombinedOutput()
			if err != nil {
				t.Fatalf("bench compare: %v\n%s", err, out)
			}
			rows := 0
			for _, line := range strings.Split(string(out), "\n") {
				m := row.FindStringSubmatch(line)
				if m == nil {
					continue
				}
				rows++
				if m[2] == "0" || m[3] != "0" {
					t.Errorf("target %s: %s calls/s, %s errors\n%s", m[1], m[2], m[3], out)
				}
			}
			if rows != len(tc.targets) {
				t.Fatalf("%d figure rows for %d targets:\n%s", rows, len(tc.targets), out)
			}
		})
	}

	t.Run("park", func(t *testing.T) {
		out, err := exec.Command(bin, "park", "-url", gl.URL, "-n", "20", "-c", "4").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "parked 20 calls") || !strings.Contains(string(out), " 0 failed") {
			t.Fatalf("bench park: %v\n%s", err, out)
		}
	})
	t.Run("sessions", func(t *testing.T) {
		out, err := exec.Command(bin, "sessions", "-url", gf.URL, "-n", "20", "-c", "4", "-tools", "a__echo,b__echo").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "opened 20 sessions") || !strings.Contains(string(out), " 0 failed") {
			t.Fatalf("bench sessions: %v\n%s", err, out)
		}
	})
	t.Run("tasks", func(t *testing.T) {
		out, err := exec.Command(bin, "tasks", "-url", gl.URL, "-n", "20", "-c", "4").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "made tasks of 20 calls") || !strings.Contains(string(out), " 0 failed") {
			t.Fatalf("bench tasks: %v\n%s", err, out)
		}
		var list []map[string]any
		adminGET(t, gl, "/mcp_gateway/tasks", &list)
		if len(list) != 20 {
			t.Fatalf("%d tasks held, want 20", len(list))
		}
	})
}

// startBenchServer runs `bench serve` in the given era and returns its MCP
// endpoint.
func startBenchServer(t *testing.T, bin, era string) string {
	t.Helper()
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	p := startPeer(t, "bench serve "+era, exec.Command(bin, "serve", "-era", era, "-addr", addr))
	url := "http://" + addr + "/mcp"
	if err := waitTCP(url, 20*time.Second, p.done); err != nil {
		t.Fatal(err)
	}
	return url
}
