package federate

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// testSet is three servers: github and jira with prefixes, files with
// none; github shows only some tools.
func testSet(t testing.TB) *Set {
	t.Helper()
	s, err := NewSet([]Server{
		{Name: "github", Prefix: "github__", Tools: Filter{Include: []string{"issue_*", "pr_*"}, Exclude: []string{"*_delete"}}},
		{Name: "jira", Prefix: "jira."},
		{Name: "files", Prefix: ""},
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestCheckNames(t *testing.T) {
	for _, tc := range []struct {
		s            string
		name, prefix bool
	}{
		{"github", true, true},
		{"a-b_C9", true, true},
		{"", false, true},
		{strings.Repeat("a", 64), true, true},
		{strings.Repeat("a", 65), false, false},
		{"a.b", false, true},
		{"a:b", false, false},
		{"a b", false, false},
		{"a/b", false, false},
		{"é", false, false},
	} {
		if got := CheckServerName(tc.s) == nil; got != tc.name {
			t.Errorf("CheckServerName(%q) ok = %t", tc.s, got)
		}
		if got := CheckPrefix(tc.s) == nil; got != tc.prefix {
			t.Errorf("CheckPrefix(%q) ok = %t", tc.s, got)
		}
	}
	for s, want := range map[string]bool{"a": true, strings.Repeat("x", 128): true, strings.Repeat("x", 129): false, "": false, "a,b": false, "get.file-v2_x": true} {
		if ValidToolName(s) != want {
			t.Errorf("ValidToolName(%q) = %t", s, !want)
		}
	}
}

func TestFilter(t *testing.T) {
	f := Filter{Include: []string{"issue_*", "pr_?"}, Exclude: []string{"*_delete", "[x]*"}}
	if err := f.Check(); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]bool{"issue_get": true, "issue_delete": false, "pr_1": true, "pr_12": false, "repo": false} {
		if f.Allows(name) != want {
			t.Errorf("Allows(%q) = %t", name, !want)
		}
	}
	if !(Filter{}).Allows("anything") {
		t.Error("an empty filter drops a name")
	}
	if !(Filter{Exclude: []string{"a*"}}).Allows("b") || (Filter{Exclude: []string{"a*"}}).Allows("ab") {
		t.Error("exclude alone")
	}
	for _, bad := range []Filter{{Include: []string{"a["}}, {Exclude: []string{"\\"}}, {Include: []string{""}},
		{Include: []string{strings.Repeat("*", MaxGlob+1)}}, {Exclude: make([]string, MaxGlobs+1)}} {
		if bad.Check() == nil {
			t.Errorf("Check(%v) passed", bad)
		}
	}
}

// TestNewSetRefuses: every configuration that would route ambiguously, or
// is invalid, is refused.
func TestNewSetRefuses(t *testing.T) {
	many := make([]Server, MaxServers+1)
	for i := range many {
		many[i] = Server{Name: ServerName(fmt.Sprintf("s%02d", i)), Prefix: fmt.Sprintf("p%02d_", i)}
	}
	for name, servers := range map[string][]Server{
		"no server":             nil,
		"65 servers":            many,
		"a bad name":            {{Name: "a:b", Prefix: "a_"}},
		"a bad prefix":          {{Name: "a", Prefix: "a/"}},
		"a bad glob":            {{Name: "a", Prefix: "a_", Tools: Filter{Include: []string{"["}}}},
		"a name twice":          {{Name: "a", Prefix: "a_"}, {Name: "a", Prefix: "b_"}},
		"a prefix twice":        {{Name: "a", Prefix: "x_"}, {Name: "b", Prefix: "x_"}},
		"a prefix begins one":   {{Name: "a", Prefix: "git"}, {Name: "b", Prefix: "github__"}},
		"a prefix begun by one": {{Name: "a", Prefix: "github__"}, {Name: "b", Prefix: "git"}},
		"two empty prefixes":    {{Name: "a", Prefix: ""}, {Name: "b", Prefix: ""}},
	} {
		if _, err := NewSet(servers); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := NewSet(many[:MaxServers]); err != nil {
		t.Errorf("64 servers: %v", err)
	}
}

func TestRoute(t *testing.T) {
	s := testSet(t)
	for _, tc := range []struct {
		shown  string
		server int
		name   string
		ok     bool
	}{
		{"github__issue_get", 0, "issue_get", true},
		{"jira.create", 1, "create", true},
		{"read_file", 2, "read_file", true},
		{"github__", 2, "github__", true}, // no name after the prefix: the "" server's
		{"jira.", 2, "jira.", true},
		{"githu", 2, "githu", true},
	} {
		i, name, ok := s.Route(tc.shown)
		if i != tc.server || name != tc.name || ok != tc.ok {
			t.Errorf("Route(%q) = %d %q %t", tc.shown, i, name, ok)
		}
	}
	prefixed, err := NewSet([]Server{{Name: "a", Prefix: "a_"}, {Name: "b", Prefix: "b_"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, shown := range []string{"c_x", "a_", "x"} {
		if i, _, ok := prefixed.Route(shown); ok {
			t.Errorf("Route(%q) without a \"\" server: server %d", shown, i)
		}
	}
	if s.Len() != 3 || s.Name(1) != "jira" || s.Prefix(0) != "github__" || s.Index("files") != 2 || s.Index("nope") != -1 {
		t.Error("Len, Name, Prefix or Index")
	}
}

// TestPrefixedHidesCollisions: a name that would route to another server
// or name, or break the tool-name rule, is not shown.
func TestPrefixedHidesCollisions(t *testing.T) {
	s := testSet(t)
	for _, tc := range []struct {
		server int
		name   string
		shown  string
		why    string
	}{
		{0, "issue_get", "github__issue_get", ""},
		{2, "read_file", "read_file", ""},
		{2, "github__issue_get", "", WhyCollision}, // the "" server's tool routes to github
		{2, "jira.create", "", WhyCollision},
		{2, "github__", "github__", ""}, // routes back: nothing after the prefix
		{0, "has space", "", WhyInvalidName},
		{0, "", "", WhyInvalidName},
		{1, "", "", WhyInvalidName},
		{0, strings.Repeat("x", 121), "", WhyInvalidName}, // 129 with the prefix
		{1, strings.Repeat("x", 123), "jira." + strings.Repeat("x", 123), ""},
	} {
		shown, why := s.shown(tc.server, tc.name)
		if shown != tc.shown || why != tc.why {
			t.Errorf("shown(%d, %q) = %q %q", tc.server, tc.name, shown, why)
		}
		if p, ok := s.Prefixed(tc.server, tc.name); p != tc.shown || ok != (tc.why == "") {
			t.Errorf("Prefixed(%d, %q) = %q %t", tc.server, tc.name, p, ok)
		}
	}
	for _, tc := range []struct {
		server int
		name   string
		want   bool
	}{
		{0, "issue_get", true}, {0, "issue_delete", false}, {0, "repo_get", false},
		{1, "anything", true}, {2, "github__issue_get", false},
	} {
		if s.ToolShown(tc.server, tc.name) != tc.want {
			t.Errorf("ToolShown(%d, %q) = %t", tc.server, tc.name, !tc.want)
		}
	}
}
