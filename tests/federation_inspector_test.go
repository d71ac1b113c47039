package tests

// The MCP Inspector's CLI (@modelcontextprotocol/inspector 2.x, `mcp-inspector
// --cli`) over a federated block (federatedBlock), in each protocol era it
// can negotiate: one process per request, as a script or a CI job runs it.

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

// inspectorTimeout bounds one Inspector CLI run (it connects, sends one
// request and exits).
const inspectorTimeout = 30 * time.Second

// inspectorCLI returns the Inspector's launcher script, which runs the CLI
// given --cli.
func inspectorCLI(t *testing.T) string {
	t.Helper()
	return nodeFile(t, "@modelcontextprotocol/inspector/clients/launcher/build/index.js")
}

// runInspector runs the Inspector CLI against url in era (legacy or modern)
// with args (--format json: it prints one JSON object, the result on stdout
// or an error envelope on stderr). Its catalog, client config and secrets
// live in a fresh home. err is its exit status; a run past inspectorTimeout
// fails the test.
func runInspector(t *testing.T, url, era string, args ...string) (stdout, stderr []byte, err error) {
	t.Helper()
	node, cli := nodeBin(t), inspectorCLI(t)
	home := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), inspectorTimeout)
	defer cancel()
	var out, errOut bytes.Buffer
	cmd := groupCommand(ctx, node, append([]string{cli, "--cli", url, "--transport", "http", "--protocol-era", era, "--format", "json"}, args...)...)
	cmd.Dir = home
	cmd.Env = append(os.Environ(), "HOME="+home,
		"MCP_CATALOG_PATH="+filepath.Join(home, "mcp.json"),
		"MCP_CLIENT_CONFIG_PATH="+filepath.Join(home, "client.json"))
	cmd.Stdout, cmd.Stderr = &out, &errOut
	start := time.Now()
	err = cmd.Run()
	t.Logf("inspector %s %s (%v, %v): %s %s", era, strings.Join(args, " "), time.Since(start).Round(time.Millisecond), err, tail(out.String(), 600), tail(errOut.String(), 600))
	if ctx.Err() != nil {
		t.Fatalf("inspector %s: killed after %v", strings.Join(args, " "), inspectorTimeout)
	}
	return out.Bytes(), errOut.Bytes(), err
}

// TestFederationInspector: the Inspector CLI, in the legacy and in the
// modern era, and in auto (which finds the modern one), negotiates that
// era's version with a federated block; lists
// the merged tools (go's and ts's prefixed, demo's bare), prompts, resources
// and templates; calls a tool of every server, reads a resource of go and of
// ts, gets a prompt of each (the demo server has neither); and is refused a
// resource and a prompt no server has. The calls need no elicitation or
// sampling: the CLI answers neither. (An unknown tool is no test of the
// gateway: the CLI looks the name up in its own tools/list and exits
// without calling.)
func TestFederationInspector(t *testing.T) {
	t.Parallel()
	nodeBin(t)
	inspectorCLI(t)
	g := startGateway(t, federatedBlock(t))
	steps := []struct {
		args       []string
		path, want string // gjson path into the result, and a text it holds
	}{
		{[]string{"--method", "tools/call", "--tool-name", "greet", "--tool-args-json", `{"name":"Inspector"}`}, "content.0.text", "Hello, Inspector!"},
		{[]string{"--method", "tools/call", "--tool-name", "ts__get-sum", "--tool-args-json", `{"a":2,"b":40}`}, "content.0.text", "The sum of 2 and 40 is 42."},
		{[]string{"--method", "tools/call", "--tool-name", "go__test_simple_text"}, "content.0.text", "simple text"},
		{[]string{"--method", "resources/read", "--uri", "test://static-text"}, "contents.0.text", "This is the content of the static text resource."},
		{[]string{"--method", "resources/read", "--uri", "demo://resource/dynamic/text/7"}, "contents.0.text", "Resource 7:"},
		{[]string{"--method", "prompts/get", "--prompt-name", "go__test_prompt_with_arguments", "--prompt-args", "arg1=alpha", "arg2=beta"}, "messages.0.content.text", "alpha"},
		{[]string{"--method", "prompts/get", "--prompt-name", "ts__args-prompt", "--prompt-args", "city=Lisbon"}, "messages.0.content.text", "What's weather in Lisbon?"},
	}
	for era, version := range map[string]string{"legacy": "2025-11-25", "modern": modernVersion, "auto": modernVersion} {
		t.Run(era, func(t *testing.T) {
			t.Parallel()
			result := func(args ...string) gjson.Result {
				t.Helper()
				out, _, err := runInspector(t, g.URL, era, args...)
				if err != nil {
					t.Fatalf("inspector %s: %v", strings.Join(args, " "), err)
				}
				return gjson.GetBytes(out, "result")
			}
			if got := result("--method", "initialize").Get("protocolVersion").Str; got != version {
				t.Errorf("negotiated %q, want %q", got, version)
			}
			listed := func(method, path string, want ...string) []string {
				t.Helper()
				var got []string
				for _, n := range result("--method", method).Get(path).Array() {
					got = append(got, n.Str)
				}
				for _, w := range want {
					if !slices.Contains(got, w) {
						t.Errorf("%s has no %s: %v", method, w, got)
					}
				}
				return got
			}
			tools := listed("tools/list", "tools.#.name", "go__test_simple_text", "ts__get-sum", "greet")
			listed("prompts/list", "prompts.#.name", "go__test_prompt_with_arguments", "ts__args-prompt")
			listed("resources/list", "resources.#.uri", "test://static-text", "demo://resource/static/document/architecture.md")
			listed("resources/templates/list", "resourceTemplates.#.uriTemplate", "test://template/{id}/data", "demo://resource/dynamic/text/{resourceId}")
			for _, name := range tools {
				if strings.HasPrefix(name, "test_") || name == "echo" {
					t.Errorf("tools/list shows %s without its server's prefix", name)
				}
			}
			for _, s := range steps {
				r := result(s.args...)
				if r.Get("isError").Bool() || !strings.Contains(r.Get(s.path).Str, s.want) {
					t.Errorf("%s: %s, want %q at %s", strings.Join(s.args, " "), r.Raw, s.want, s.path)
				}
			}
			// What no server has: an error exit whose envelope carries the
			// answer's message (the CLI does not show its code). No server
			// lists nowhere://x: the gateway's answer. nobody__p has no
			// prefix of a server, so it is demo's (prefix ""): the go-sdk's.
			for _, r := range []struct {
				args []string
				want string
			}{
				{[]string{"--method", "resources/read", "--uri", "nowhere://x"}, "Resource not found"},
				{[]string{"--method", "prompts/get", "--prompt-name", "nobody__p"}, `unknown prompt "nobody__p"`},
			} {
				out, errOut, err := runInspector(t, g.URL, era, r.args...)
				if err == nil || gjson.GetBytes(errOut, "error.message").Str != r.want {
					t.Errorf("%s: exit %v, stdout %s, stderr %s; want an error exit with %q", strings.Join(r.args, " "), err, out, errOut, r.want)
				}
			}
		})
	}
}
