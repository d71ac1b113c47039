package caddymodule

import (
	"encoding/json"
	"testing"

	"github.com/caddyserver/caddy/v2"
)

// TestRESTOutsideMatcher: a REST base path the directive's path matcher
// does not match is found; one it matches (by prefix or exactly, the
// base and what is under it) is not, nor any matcher set it cannot judge.
func TestRESTOutsideMatcher(t *testing.T) {
	set := func(paths ...string) caddy.ModuleMap {
		b, _ := json.Marshal(paths)
		return caddy.ModuleMap{"path": b}
	}
	for _, c := range []struct {
		name     string
		base     string
		matchers caddy.ModuleMap
		outside  bool
	}{
		{"exact endpoint only", "/api", set("/mcp"), true},
		{"prefix of the endpoint only", "/api", set("/mcp*"), true},
		{"both listed", "/api", set("/mcp", "/api*"), false},
		{"base under a prefix", "/mcp/api", set("/mcp*"), false},
		{"everything", "/api", set("*"), false},
		{"no matcher", "/api", nil, false},
		{"another kind of matcher too", "/api", caddy.ModuleMap{"path": json.RawMessage(`["/mcp"]`), "host": json.RawMessage(`["x"]`)}, false},
		{"no REST", "", set("/mcp"), false},
	} {
		if got := restOutsideMatcher(c.base, c.matchers); got != c.outside {
			t.Errorf("%s: outside=%v, want %v", c.name, got, c.outside)
		}
	}
}
