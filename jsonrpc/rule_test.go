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
// maps. (Maps of data are map[string]json.RawMessage, read with gjson; a
// line whose comment says "not JSON" hands a map to an API that asks for
// one, such as Caddy's events.)
func TestJSONRule(t *testing.T) {
	forbidden := regexp.MustCompile(`json\.Unmarshal\(|json\.NewDecoder\(|map\[string\](any|interface\{\})`)
	for _, dir := range []string{"../sse", "../jsonrpc", "../legacy", "../translate/seal", "../translate/federate", "../translate/auth", "../translate/upstreamauth", "../translate/traces", "../translate", "../translate/forward", "../translate/reverse", "../caddymodule"} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range files {
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			src, err := os.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			for i, line := range strings.Split(string(src), "\n") {
				code, comment, _ := strings.Cut(line, "//")
				if forbidden.MatchString(code) && !strings.Contains(comment, "not JSON") {
					t.Errorf("%s:%d breaks the JSON rule (package jsonrpc's doc): %s", name, i+1, strings.TrimSpace(line))
				}
			}
		}
	}
}
