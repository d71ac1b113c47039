package tests

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// readmeCurlTag finds the README's curl examples:
//
//	<!-- curl: NAME -->
//	```sh
//	...
//	```
//
// The blocks of one NAME run in order, as one shell script.
var readmeCurlTag = regexp.MustCompile("(?m)^<!-- curl: ([a-z0-9-]+) -->\\n```sh\\n((?s:.*?))```")

// readmeDemoURL is the gateway's URL in the README's curl examples: the
// demo's (./tests/demo.sh, Caddyfile.example).
const readmeDemoURL = "http://127.0.0.1:9100/mcp"

// readmeCurlScripts returns the README's curl examples by name, each the
// blocks of its name joined in order.
func readmeCurlScripts(t *testing.T) (scripts map[string]string, readme string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	scripts = map[string]string{}
	for _, m := range readmeCurlTag.FindAllStringSubmatch(string(b), -1) {
		scripts[m[1]] += m[2]
	}
	return scripts, string(b)
}

// TestReadmeCurl runs the README's curl examples, as they are written (the
// demo's URL replaced with the test gateway's), with bash and the curl of
// the machine, against the demo server behind the gateway configured as in
// Caddyfile.example: the 2026-07-28 tools/call that gets input_required and
// its retry with requestState and inputResponses, and the 2025-11-25
// session (initialize, Mcp-Session-Id, tools/call). Each example must
// print the answers the README shows.
func TestReadmeCurl(t *testing.T) {
	for _, tool := range []string{"bash", "curl", "sed", "awk", "tr", "tee"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("the README's curl examples need %s: %v", tool, err)
		}
	}
	scripts, readme := readmeCurlScripts(t)
	g := startGateway(t, "\t\tupstream "+startDemoServer(t)+" {\n\t\t\tera auto\n\t\t}\n\t\tkeepalive_interval 15s\n\t\tsaga on")

	cases := []struct {
		name string
		// want: what the output holds; shown: lines of the output the
		// README shows verbatim.
		want, shown []string
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
			name:  "legacy",
			want:  []string{`"protocolVersion":"2025-11-25"`},
			shown: []string{`data: {"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"Hello, Caddy!"}]}}`},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			script, ok := scripts[c.name]
			if !ok {
				t.Fatalf("no <!-- curl: %s --> block in README.md", c.name)
			}
			if !strings.Contains(script, readmeDemoURL) {
				t.Fatalf("the README's %s curl example does not use the demo's URL %s", c.name, readmeDemoURL)
			}
			out := runReadmeScript(t, strings.ReplaceAll(script, readmeDemoURL, g.URL))
			for _, w := range c.want {
				if !strings.Contains(out, w) {
					t.Errorf("the output of the README's %s curl example lacks %s:\n%s", c.name, w, out)
				}
			}
			for _, s := range c.shown {
				line := ""
				for _, l := range strings.Split(out, "\n") {
					if strings.HasPrefix(l, s) {
						line = l
					}
				}
				if line == "" {
					t.Errorf("the output of the README's %s curl example has no line starting %s:\n%s", c.name, s, out)
				} else if !strings.Contains(readme, line+"\n") {
					t.Errorf("the README does not show the answer its %s curl example gets:\n%s", c.name, line)
				}
			}
		})
	}
}

// runReadmeScript runs script with bash -e -o pipefail in a fresh folder
// and returns its standard output.
func runReadmeScript(t *testing.T, script string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-e", "-o", "pipefail", "-c", script)
	cmd.Dir = t.TempDir()
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
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
	_, readme := readmeCurlScripts(t)
	m := regexp.MustCompile("(?s)```go\n(.*?)```").FindStringSubmatch(readme)
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
