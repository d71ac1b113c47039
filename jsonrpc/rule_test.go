package jsonrpc

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestJSONRule keeps the rule of the package doc: no production code of
// the gateway decodes JSON with encoding/json or builds it from untyped
// maps. (Maps of data are map[string]json.RawMessage, read with gjson.)
func TestJSONRule(t *testing.T) {
	forbidden := regexp.MustCompile(`json\.Unmarshal\(|json\.NewDecoder\(|map\[string\](any|interface\{\})`)
	// Being rewritten separately, to follow the rule; drop this exception
	// with that rewrite.
	pending := regexp.MustCompile(`^\.\./translate/forward/task[^/]*\.go$`)
	for _, dir := range []string{"../sse", "../jsonrpc", "../legacy", "../legacy/seal", "../translate", "../translate/forward", "../translate/reverse", "../caddymodule"} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range files {
			if strings.HasSuffix(name, "_test.go") || pending.MatchString(filepath.ToSlash(name)) {
				continue
			}
			src, err := os.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			for i, line := range strings.Split(string(src), "\n") {
				if code, _, _ := strings.Cut(line, "//"); forbidden.MatchString(code) {
					t.Errorf("%s:%d breaks the JSON rule (package jsonrpc's doc): %s", name, i+1, strings.TrimSpace(line))
				}
			}
		}
	}
}
