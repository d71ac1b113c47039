package tests

import (
	"encoding/json"
	"fmt"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestXcaddyManifest keeps xcaddy.json in step with go.mod and the
// committed main package (no tool reads xcaddy.json for us: this test is
// what keeps it honest).
func TestXcaddyManifest(t *testing.T) {
	t.Parallel()
	root := repoRoot(t)
	var m struct {
		CaddyVersion string `json:"caddy_version"`
		Plugins      []struct {
			ModulePath string `json:"module_path"`
		} `json:"plugins"`
		Replacements []struct{ Old, New string } `json:"replacements"`
		MainPackage  string                      `json:"main_package"`
		Output       string                      `json:"output"`
	}
	data, err := os.ReadFile(filepath.Join(root, "xcaddy.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("xcaddy.json: %v", err)
	}
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	module := regexp.MustCompile(`(?m)^module (\S+)`).FindSubmatch(gomod)
	caddy := regexp.MustCompile(`(?m)^\s*github\.com/caddyserver/caddy/v2 (\S+)`).FindSubmatch(gomod)
	if module == nil || caddy == nil {
		t.Fatal("go.mod: module line or caddy requirement not found")
	}
	if m.CaddyVersion != string(caddy[1]) {
		t.Errorf("xcaddy.json caddy_version %s, go.mod requires %s", m.CaddyVersion, caddy[1])
	}
	if len(m.Replacements) != 1 || m.Replacements[0].Old != string(module[1]) || m.Replacements[0].New != "." {
		t.Errorf("xcaddy.json replacements %+v, want %s => .", m.Replacements, module[1])
	}

	f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(root, m.MainPackage, "main.go"), nil, parser.ImportsOnly)
	if err != nil {
		t.Fatal(err)
	}
	var blank []string
	for _, imp := range f.Imports {
		if imp.Name != nil && imp.Name.Name == "_" {
			p, _ := strconv.Unquote(imp.Path.Value)
			if p != "time/tzdata" {
				blank = append(blank, p)
			}
		}
	}
	want := []string{"github.com/caddyserver/caddy/v2/modules/standard"}
	for _, p := range m.Plugins {
		want = append(want, p.ModulePath)
	}
	slices.Sort(blank)
	slices.Sort(want)
	if !slices.Equal(blank, want) {
		t.Errorf("%s imports %v, xcaddy.json lists %v", m.MainPackage, blank, want)
	}
}

// caddyCmd runs the built Caddy with args in dir and returns its output.
func caddyCmd(t *testing.T, dir string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(caddyBinary(t), args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "HOME="+dir, "XDG_DATA_HOME="+dir, "XDG_CONFIG_HOME="+dir)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func TestBinaryListsModule(t *testing.T) {
	t.Parallel()
	out, err := caddyCmd(t, t.TempDir(), "list-modules")
	if err != nil {
		t.Fatalf("list-modules: %v\n%s", err, out)
	}
	if !strings.Contains(out, "http.handlers.mcp_gateway") {
		t.Fatalf("list-modules does not show http.handlers.mcp_gateway:\n%s", out)
	}
}

// TestAdaptAndValidate: the example adapts and validates; bad configs are
// refused at adapt or validate time with a message naming the problem.
func TestAdaptAndValidate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if out, err := caddyCmd(t, repoRoot(t), "adapt", "--config", "Caddyfile.example", "--validate"); err != nil {
		t.Fatalf("adapt Caddyfile.example: %v\n%s", err, out)
	}
	// line, when set, is where the error must say it is: checks made while
	// the Caddyfile is parsed carry its file and line.
	cases := map[string]struct {
		block, want string
		line        int
	}{
		"bad url":          {"upstream ftp://127.0.0.1/mcp", "scheme must be http or https", 3},
		"unparsable url":   {"upstream http://127.0.0.1/%zz", "invalid URL escape", 3},
		"unknown option":   {"upstream http://127.0.0.1/mcp\n\tbogus 1", "unrecognized mcp_gateway option", 4},
		"unknown era":      {"upstream http://127.0.0.1/mcp {\n\t\tera future\n\t}", "unknown era", 4},
		"missing upstream": {"keepalive_interval 5s", "at least one upstream (or a dynamic upstream source) is required", 2},
		"bad state key":    {"upstream http://127.0.0.1/mcp\n\tstate_key c2hvcnQ=", "state_key 1: key decodes to 5 bytes, want 32: make one with `openssl rand -base64 32`", 4},
		"unset key var":    {"upstream http://127.0.0.1/mcp\n\tstate_key {env.MCP_GATEWAY_TEST_UNSET_KEY}", "state_key 1 is empty (an unset environment variable?): make one with `openssl rand -base64 32`", 0},
		"unset key $var":   {"upstream http://127.0.0.1/mcp\n\tstate_key {$MCP_GATEWAY_TEST_UNSET_KEY}", "state_key needs a key (an unset environment variable?): make one with `openssl rand -base64 32`", 4},
		"negative ttl":     {"upstream http://127.0.0.1/mcp\n\tpark_ttl -1s", "park_ttl: must be positive, got -1s", 4},
		"duplicate":        {"upstream http://127.0.0.1/mcp\n\tupstream http://127.0.0.1/mcp", "listed twice", 4},
		"advertise no key": {"upstream http://127.0.0.1/mcp\n\tadvertise http://10.0.0.1:8080", "advertise and peer need state_key", 4},
		"advertise path":   {"upstream http://127.0.0.1/mcp\n\tstate_key " + testKey(1) + "\n\tadvertise http://10.0.0.1:8080/mcp", "no path", 5},
		"peer no id":       {"upstream http://127.0.0.1/mcp\n\tstate_key " + testKey(1) + "\n\tpeer gw-2 http://10.0.0.2:8080", "peer needs instance_id", 5},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			file := filepath.Join(dir, strings.ReplaceAll(name, " ", "_"))
			cfg := ":9999 {\n\tmcp_gateway {\n\t" + c.block + "\n\t}\n}\n"
			if err := os.WriteFile(file, []byte(cfg), 0o600); err != nil {
				t.Fatal(err)
			}
			out, err := caddyCmd(t, dir, "validate", "--config", file, "--adapter", "caddyfile")
			if err == nil {
				t.Fatalf("caddy validate accepted:\n%s", cfg)
			}
			if !strings.Contains(out, c.want) {
				t.Fatalf("caddy validate said:\n%s\nwant it to contain %q", out, c.want)
			}
			if at := fmt.Sprintf("%s:%d", file, c.line); c.line > 0 && !strings.Contains(out, at) {
				t.Fatalf("caddy validate said:\n%s\nwant it to say where: %s", out, at)
			}
		})
	}
}

// TestRESTMatcherWarning: adapting a Caddyfile whose mcp_gateway path
// matcher leaves out its REST base path warns, naming the file and line
// (the face's requests would get Caddy's empty 200); a matcher that
// covers it, and the example, do not.
func TestRESTMatcherWarning(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const warning = "rest base path is outside its path matcher"
	for _, c := range []struct {
		matcher, base string
		warns         bool
	}{
		{"/mcp", "/api", true},
		{"/mcp*", "/mcp/api", false},
	} {
		file := filepath.Join(dir, "Caddyfile")
		site := fmt.Sprintf(":8080 {\n\tmcp_gateway %s {\n\t\tupstream http://127.0.0.1:9/mcp\n\t\tstate_key %s\n\t\trest %s\n\t}\n}\n", c.matcher, testKey(1), c.base)
		if err := os.WriteFile(file, []byte(site), 0o600); err != nil {
			t.Fatal(err)
		}
		out, err := caddyCmd(t, dir, "adapt", "--config", file)
		if err != nil {
			t.Fatalf("adapt (matcher %s, rest %s): %v\n%s", c.matcher, c.base, err, out)
		}
		if got := strings.Contains(out, warning) && strings.Contains(out, `"line":2`); got != c.warns {
			t.Errorf("matcher %s, rest %s: warned=%v, want %v:\n%s", c.matcher, c.base, got, c.warns, out)
		}
	}
}
