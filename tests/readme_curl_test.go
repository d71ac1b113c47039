package tests

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// readmeCurlTag finds the curl walk-throughs of readmeCurlPages:
//
//	<!-- curl: NAME -->
//	```sh
//	...
//	```
//
// The blocks of one NAME run in order, as one shell script.
var readmeCurlTag = regexp.MustCompile("(?m)^<!-- curl: ([a-z0-9-]+) -->\\n```sh\\n((?s:.*?))```")

// readmeCurlPages are the pages whose curl walk-throughs run in the tests,
// relative to the repository's root: the README's clients of both eras,
// the faces' reference, the Tasks extension's requests and two instances on
// one machine.
var readmeCurlPages = []string{"README.md", "docs/faces.md", "docs/tasks.md", "docs/fleet.md"}

// readmeCurlRunners names, for each walk-through, the test that runs it
// against the demo server behind the gateway.
var readmeCurlRunners = map[string]string{
	"modern":     "TestReadmeCurl",
	"legacy":     "TestReadmeCurl",
	"saga":       "TestReadmeCurl",
	"tasks":      "TestReadmeCurl",
	"rest":       "TestRESTReadmeCurl",
	"multi-turn": "TestReadmeCurlMultiTurn",
	"fleet":      "TestFleetTwoInstancesDoc",
}

// readmeDemoURL is the gateway's URL in the README's curl examples: the
// demo's (./tests/demo.sh, Caddyfile.example).
const readmeDemoURL = "http://127.0.0.1:9100/mcp"

// demoUpstream is the upstream of Caddyfile.example's mcp_gateway block:
// the demo server's URL, or $MCP_UPSTREAM.
const demoUpstream = "{$MCP_UPSTREAM:http://127.0.0.1:9101/mcp}"

// demoBlockTag finds Caddyfile.example's `mcp_gateway /mcp { ... }` block.
var demoBlockTag = regexp.MustCompile(`(?ms)^\tmcp_gateway /mcp \{\n(.*?)^\t\}\n`)

// demoBlock returns the lines inside Caddyfile.example's `mcp_gateway /mcp`
// block (the demo's gateway, which the curl walk-throughs are written
// against) with its upstream replaced by upstream.
func demoBlock(t *testing.T, upstream string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "Caddyfile.example"))
	if err != nil {
		t.Fatal(err)
	}
	m := demoBlockTag.FindSubmatch(b)
	if m == nil || !bytes.Contains(m[1], []byte(demoUpstream)) {
		t.Fatalf("Caddyfile.example has no `mcp_gateway /mcp` block with the upstream %s", demoUpstream)
	}
	return strings.Replace(string(m[1]), demoUpstream, upstream, 1)
}

// readmeCurlScripts returns the curl walk-throughs of readmeCurlPages by
// name, each the blocks of its name joined in order, and the pages' text
// (joined), in which a test finds the outputs the pages show.
func readmeCurlScripts(t *testing.T) (scripts map[string]string, text string) {
	t.Helper()
	scripts = map[string]string{}
	var all strings.Builder
	for _, page := range readmeCurlPages {
		b, err := os.ReadFile(filepath.Join(repoRoot(t), page))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range readmeCurlTag.FindAllStringSubmatch(string(b), -1) {
			scripts[m[1]] += m[2]
		}
		all.Write(b)
		all.WriteString("\n")
	}
	return scripts, all.String()
}

// TestReadmeCurlAllRun: every curl example of readmeCurlPages is a tagged
// walk-through, and each walk-through is one a
// test runs, so that none is left unrun.
func TestReadmeCurlAllRun(t *testing.T) {
	shBlock := regexp.MustCompile("(?m)^(<!-- curl: ([a-z0-9-]+) -->\\n)?```sh\\n((?s:.*?))```")
	tagged := map[string]bool{}
	for _, page := range readmeCurlPages {
		b, err := os.ReadFile(filepath.Join(repoRoot(t), page))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range shBlock.FindAllStringSubmatch(string(b), -1) {
			name, code := m[2], m[3]
			if name == "" {
				if strings.Contains(code, "curl ") {
					t.Errorf("%s has a curl example no test runs (tag it <!-- curl: NAME -->):\n%s", page, code)
				}
				continue
			}
			if _, ok := readmeCurlRunners[name]; !ok {
				t.Errorf("%s's <!-- curl: %s --> walk-through is run by no test (add it to readmeCurlRunners and run it)", page, name)
			}
			tagged[name] = true
		}
	}
	for name, test := range readmeCurlRunners {
		if !tagged[name] {
			t.Errorf("%s runs the <!-- curl: %s --> walk-through, which no page has", test, name)
		}
	}
}

// TestReadmeCurl runs the curl walk-throughs of readmeCurlPages, as they
// are written (the demo's URL replaced with the test gateway's), with bash
// and the curl of the machine, against the demo server behind the gateway
// configured with Caddyfile.example's block (and saga on): the 2026-07-28
// tools/call that gets input_required and its retry with requestState and
// inputResponses; the 2025-11-25 session (initialize, Mcp-Session-Id, the
// GET stream, tools/call), its in-line question answered with the id the
// server sent and its question on the GET stream answered the same way;
// the saga; and docs/tasks.md's task (tools/call answered with a task,
// tasks/get polled while it is working, then input_required, tasks/update,
// tasks/get polled until it completed, and a second task cancelled). Each must print the answers the page
// shows.
func TestReadmeCurl(t *testing.T) {
	for _, tool := range []string{"bash", "curl", "sed", "awk", "tr", "tee", "grep"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("the README's curl examples need %s: %v", tool, err)
		}
	}
	scripts, pages := readmeCurlScripts(t)
	g := startGateway(t, demoBlock(t, startDemoServer(t))+"\t\tsaga on")

	cases := []struct {
		name string
		// want: what the output holds; shown: lines of the output the
		// page shows verbatim.
		want, shown []string
		// lines: the output's non-empty lines, in order, each holding
		// the strings given for it.
		lines [][]string
		// files: what the files the walk-through writes hold (and
		// lack, for a string starting with "!").
		files map[string][]string
	}{
		{
			name: "modern",
			want: []string{
				`"id":1,"result":{"resultType":"input_required","inputRequests":{"elicitation-1":{"method":"elicitation/create"`,
				`"message":"How many people, and when?"`, `"requestState":"`,
			},
			shown: []string{`{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"Booked Chez Caddy for 2 on 2026-12-24."}],"resultType":"complete"`},
		},
		{
			name: "saga",
			want: []string{`"id":1,"result":{"state":"suspended","sagaToken":"`, `"steps":[{"type":"elicitation","stepId":"elicitation-1"`,
				`"message":"How many people, and when?"`},
			shown: []string{`{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"Booked Chez Caddy for 2 on 2026-12-24."}]`},
		},
		{
			name: "legacy",
			want: []string{`"protocolVersion":"2025-11-25"`},
			shown: []string{
				`data: {"jsonrpc":"2.0","id":1,"result":{"capabilities":`,
				`data: {"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"Hello, Caddy!"}]}}`,
				// The in-line question, with the server's own id.
				`data: {"jsonrpc":"2.0","id":1,"method":"elicitation/create","params":{"mode":"form","message":"How many people, and when?"`,
				`data: {"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"Booked Chez Caddy for 2 on 2026-12-24."}]}}`,
				// The question on the GET stream.
				`data: {"jsonrpc":"2.0","id":2,"method":"elicitation/create","params":{"mode":"form","message":"When should the taxi to the station pick you up?"`,
				`data: {"jsonrpc":"2.0","id":4,"result":{"content":[{"type":"text","text":"Taxi to the station ordered for 18:30."}]}}`,
			},
			files: map[string][]string{
				// The taxi's question came on the GET stream, and the
				// booking's did not.
				"get.txt": {`"message":"When should the taxi to the station pick you up?"`, `!"message":"How many people, and when?"`},
				// call.txt is the taxi call's stream: its result only.
				"call.txt": {`"text":"Taxi to the station ordered for 18:30."`, `!"method":"elicitation/create"`},
			},
		},
		{
			name: "tasks",
			lines: [][]string{
				{`{"jsonrpc":"2.0","id":1,"result":{"resultType":"task","taskId":"`, `"status":"working"`, `"ttlMs":`, `"pollIntervalMs":`},
				{`{"jsonrpc":"2.0","id":2,"result":{"resultType":"complete","taskId":"`, `"status":"input_required"`,
					`"inputRequests":{"elicitation-1":{"method":"elicitation/create"`, `"message":"How many people, and when?"`},
				{`{"jsonrpc":"2.0","id":3,"result":{"resultType":"complete"}}`},
				{`{"jsonrpc":"2.0","id":2,"result":{"resultType":"complete","taskId":"`, `"status":"completed"`,
					`"result":{"content":[{"type":"text","text":"Booked Chez Caddy for 2 on 2026-12-24."}]`},
				{`{"jsonrpc":"2.0","id":5,"result":{"resultType":"complete"}}`},
				{`{"jsonrpc":"2.0","id":2,"result":{"resultType":"complete","taskId":"`, `"status":"cancelled"`},
			},
			shown: []string{`{"jsonrpc":"2.0","id":3,"result":{"resultType":"complete"}}`, `{"jsonrpc":"2.0","id":5,"result":{"resultType":"complete"}}`},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			script, ok := scripts[c.name]
			if !ok {
				t.Fatalf("no <!-- curl: %s --> block in %s", c.name, strings.Join(readmeCurlPages, " or "))
			}
			if !strings.Contains(script, readmeDemoURL) {
				t.Fatalf("the %s curl walk-through does not use the demo's URL %s", c.name, readmeDemoURL)
			}
			dir := t.TempDir()
			out := runReadmeScriptIn(t, dir, strings.ReplaceAll(script, readmeDemoURL, g.URL))
			for _, w := range c.want {
				if !strings.Contains(out, w) {
					t.Errorf("the output of the %s curl walk-through lacks %s:\n%s", c.name, w, out)
				}
			}
			if c.lines != nil {
				wantLines(t, "the "+c.name+" curl walk-through", out, c.lines)
			}
			for _, s := range c.shown {
				line := ""
				for _, l := range strings.Split(out, "\n") {
					if strings.HasPrefix(l, s) {
						line = l
					}
				}
				if line == "" {
					t.Errorf("the output of the %s curl walk-through has no line starting %s:\n%s", c.name, s, out)
				} else if !strings.Contains(pages, line+"\n") {
					t.Errorf("the docs do not show the line the %s curl walk-through prints:\n%s", c.name, line)
				}
			}
			for file, wants := range c.files {
				b, err := os.ReadFile(filepath.Join(dir, file))
				if err != nil {
					t.Fatalf("the %s curl walk-through's %s: %v", c.name, file, err)
				}
				for _, w := range wants {
					if lacks, ok := strings.CutPrefix(w, "!"); ok {
						if strings.Contains(string(b), lacks) {
							t.Errorf("the %s curl walk-through's %s holds %s:\n%s", c.name, file, lacks, b)
						}
					} else if !strings.Contains(string(b), w) {
						t.Errorf("the %s curl walk-through's %s lacks %s:\n%s", c.name, file, w, b)
					}
				}
			}
		})
	}
}

// wantLines fails the test unless out's non-empty lines are as many as
// want's and each holds the strings want gives for it; what names out.
func wantLines(t *testing.T, what, out string, want [][]string) {
	t.Helper()
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if strings.TrimSpace(l) != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) != len(want) {
		t.Fatalf("%s printed %d lines, want %d:\n%s", what, len(lines), len(want), out)
	}
	for i, l := range lines {
		for _, w := range want[i] {
			if !strings.Contains(l, w) {
				t.Fatalf("line %d of what %s printed lacks %s:\n%s", i+1, what, w, l)
			}
		}
	}
}

// runReadmeScript runs script with bash -e -o pipefail in a fresh folder
// and returns its standard output.
func runReadmeScript(t *testing.T, script string) string {
	t.Helper()
	return runReadmeScriptIn(t, t.TempDir(), script)
}

// runReadmeScriptIn runs script with bash -e -o pipefail in dir and
// returns its standard output. The script runs in a process group of its
// own, which is killed when it ends (a walk-through may leave a stream
// open in the background) or after 60 s.
func runReadmeScriptIn(t *testing.T, dir, script string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-e", "-o", "pipefail", "-c", script)
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 2 * time.Second
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	if ctx.Err() != nil {
		err = fmt.Errorf("killed after 60s: %w", ctx.Err())
	}
	if err != nil {
		t.Fatalf("bash: %v\nstdout:\n%s\nstderr:\n%s\nscript:\n%s", err, out.String(), errOut.String(), script)
	}
	return out.String()
}

// readmeGoMain wraps the README's go-sdk example (which ends with
// `res, err := cs.CallTool(...)`) into a program that prints the result's
// text.
const readmeGoMain = `package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func run(ctx context.Context) error {
%s
	if err != nil {
		return err
	}
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			fmt.Println(tc.Text)
		}
	}
	return nil
}

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
`

// TestReadmeGoClient builds the README's go-sdk example, as written (the
// demo's URL replaced), and runs it against the demo server behind the
// gateway: it negotiates 2026-07-28, answers book_table's question and
// gets the booking.
func TestReadmeGoClient(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(repoRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)```go\n(.*?)```").FindStringSubmatch(string(readme))
	if m == nil {
		t.Fatal("no ```go block in README.md")
	}
	if !strings.Contains(m[1], `"`+readmeDemoURL+`"`) {
		t.Fatalf("the README's go-sdk example does not use the demo's URL %s", readmeDemoURL)
	}
	g := startGateway(t, "\t\tupstream "+startDemoServer(t))
	dir := t.TempDir()
	src := filepath.Join(dir, "main.go")
	code := strings.ReplaceAll(m[1], readmeDemoURL, g.URL)
	if err := os.WriteFile(src, []byte(strings.Replace(readmeGoMain, "%s", code, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "client")
	build := exec.Command("go", "build", "-o", bin, src)
	build.Dir = repoRoot(t)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the README's go-sdk example: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin).CombinedOutput()
	if err != nil {
		t.Fatalf("the README's go-sdk example: %v\n%s", err, out)
	}
	if got, want := strings.TrimSpace(string(out)), "Booked Chez Caddy for 2 on 2026-12-24."; got != want {
		t.Fatalf("the README's go-sdk example printed %q, want %q", got, want)
	}
}
