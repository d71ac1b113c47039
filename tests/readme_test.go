package tests

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files of tests/testdata/adapt from the README and docs/")

// readmeExample is a code block of README.md or of a page of docs/ tagged
// for the tests:
//
//	<!-- adapt: NAME -->   a Caddyfile adapted and validated
//	<!-- json: NAME -->    the JSON the example NAME adapts to
//
// NAME is unique across the README and docs/, so that a JSON example on
// one page may show a Caddyfile example of another.
type readmeExample struct {
	kind, name, code string
	file             string // relative to the repository's root
}

var readmeTag = regexp.MustCompile("(?m)^<!-- (adapt|json): ([a-z0-9-]+) -->\\n```[a-z]*\\n((?s:.*?))```")

// docFiles lists the Markdown files whose examples and links are tested:
// README.md, CHANGELOG.md and docs/*.md, relative to the repository's root.
func docFiles(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob(filepath.Join(repoRoot(t), "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(pages) == 0 {
		t.Fatal("no pages in docs/")
	}
	files := []string{"README.md", "CHANGELOG.md"}
	for _, p := range pages {
		files = append(files, filepath.Join("docs", filepath.Base(p)))
	}
	return files
}

func readmeExamples(t *testing.T) []readmeExample {
	t.Helper()
	var out []readmeExample
	seen := map[string]string{}
	for _, f := range docFiles(t) {
		b, err := os.ReadFile(filepath.Join(repoRoot(t), f))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range readmeTag.FindAllStringSubmatch(string(b), -1) {
			key := m[1] + ": " + m[2]
			if other, dup := seen[key]; dup {
				t.Fatalf("<!-- %s --> is in both %s and %s", key, other, f)
			}
			seen[key] = f
			out = append(out, readmeExample{kind: m[1], name: m[2], code: m[3], file: f})
		}
	}
	if len(out) == 0 {
		t.Fatal("no tagged examples in README.md or docs/")
	}
	return out
}

// readmeEnv is the environment the examples' placeholders read when they
// are validated.
var readmeEnv = []string{
	"MCP_GATEWAY_KEY=" + testKey(1), "MCP_GATEWAY_OLD_KEY=" + testKey(2), "MCP_GATEWAY_ID=gw-a",
}

// TestReadmeExamples: every Caddyfile example of the README and of docs/
// adapts to its golden JSON (tests/testdata/adapt/NAME.json; `go test -run
// TestReadmeExamples -update` rewrites them) and validates, and every JSON
// example is what its Caddyfile adapts to.
func TestReadmeExamples(t *testing.T) {
	adapted := map[string][]byte{}
	examples := readmeExamples(t)
	for _, ex := range examples {
		if ex.kind != "adapt" {
			continue
		}
		t.Run(ex.name, func(t *testing.T) {
			dir := t.TempDir()
			file := filepath.Join(dir, "Caddyfile")
			if err := os.WriteFile(file, []byte(ex.code), 0o600); err != nil {
				t.Fatal(err)
			}
			out, errOut, err := runCaddy(t, dir, "adapt", "--config", file, "--pretty")
			if err != nil {
				t.Fatalf("caddy adapt of %s's %q example: %v\n%s", ex.file, ex.name, err, errOut)
			}
			adapted[ex.name] = out
			golden := filepath.Join(repoRoot(t), "tests", "testdata", "adapt", ex.name+".json")
			if *update {
				if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(golden, out, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if !bytes.Equal(out, want) {
				t.Fatalf("caddy adapt of %s's %q example differs from %s (run with -update if intended):\n%s", ex.file, ex.name, golden, out)
			}
			// The files the examples name, which the transport options
			// load: ca.pem, client.pem, client-key.pem.
			newTestPKIIn(t, dir)
			if _, errOut, err := runCaddy(t, dir, "validate", "--config", file, "--adapter", "caddyfile"); err != nil {
				t.Fatalf("caddy validate of %s's %q example: %v\n%s", ex.file, ex.name, err, errOut)
			}
		})
	}
	for _, ex := range examples {
		if ex.kind != "json" {
			continue
		}
		t.Run("json-"+ex.name, func(t *testing.T) {
			caddyJSON, ok := adapted[ex.name]
			if !ok {
				t.Fatalf("no adapted example %q for the JSON example", ex.name)
			}
			var doc, want any
			if err := json.Unmarshal([]byte(ex.code), &doc); err != nil {
				t.Fatalf("%s's JSON for %q: %v", ex.file, ex.name, err)
			}
			if err := json.Unmarshal(caddyJSON, &want); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(doc, want) {
				t.Fatalf("%s's JSON for %q is not what caddy adapt makes:\n%s", ex.file, ex.name, caddyJSON)
			}
		})
	}
}

// runCaddy runs the built Caddy with args in dir (with readmeEnv) and
// returns its standard output and error apart.
func runCaddy(t *testing.T, dir string, args ...string) (stdout []byte, stderr string, err error) {
	t.Helper()
	cmd := exec.Command(caddyBinary(t), args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "HOME="+dir, "XDG_DATA_HOME="+dir, "XDG_CONFIG_HOME="+dir)
	cmd.Env = append(cmd.Env, readmeEnv...)
	var out, errBuf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errBuf
	err = cmd.Run()
	return out.Bytes(), errBuf.String(), err
}

// keyVar finds the environment variables named in placeholders ({env.NAME}
// or {$NAME}) whose name holds KEY.
var keyVar = regexp.MustCompile(`\{(?:env\.|\$)([A-Z0-9_]*KEY[A-Z0-9_]*)`)

// TestExamplesOneKeyName: every example names the state_key's variable the
// same way (MCP_GATEWAY_KEY, and MCP_GATEWAY_OLD_KEY for the key being
// rotated out), in the README, CHANGELOG.md, docs/, Caddyfile.example and
// the golden adapted examples, so that a reader who exported the README's
// key can paste any of them.
func TestExamplesOneKeyName(t *testing.T) {
	files := append(docFiles(t), "Caddyfile.example")
	golden, err := filepath.Glob(filepath.Join(repoRoot(t), "tests", "testdata", "adapt", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range golden {
		files = append(files, filepath.Join("tests", "testdata", "adapt", filepath.Base(g)))
	}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(repoRoot(t), f))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range keyVar.FindAllStringSubmatch(string(b), -1) {
			if m[1] != "MCP_GATEWAY_KEY" && m[1] != "MCP_GATEWAY_OLD_KEY" {
				t.Errorf("%s names the key %s: use MCP_GATEWAY_KEY, the README's", f, m[1])
			}
		}
	}
}
