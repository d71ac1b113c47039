package auth

import (
	"path"
	"strings"
	"testing"
)

// TestMatchURI: '*' spans '/' (path.Match's does not), '?' and classes
// match '/' too, '\' escapes, and the whole URI must match.
func TestMatchURI(t *testing.T) {
	for _, c := range []struct {
		glob, uri string
		want      bool
	}{
		{"test://static-*", "test://static-text", true},
		{"file:///srv/*", "file:///srv/a/b/c.txt", true}, // path.Match: false
		{"file:///srv/*", "file:///srv", false},
		{"file:///srv/*", "file:///srv/", true},
		{"*", "", true},
		{"*", "any://thing/at/all?q=1", true},
		{"test://template/*/data", "test://template/42/data", true},
		{"test://template/*/data", "test://template/4/2/data", true},
		{"test://template/*/data", "test://template/42/data/more", false},
		{"test://template/*", "test://template/{id}/data", true}, // the template's text
		{"*.png", "file:///a/b.png", true},
		{"*.png", "file:///a/b.png.txt", false},
		{"*a*b*c", "xxaxxbxxbxxc", true},
		{"*a*b*c", "xxaxxbxxbxxcx", false},
		{"a?c", "a/c", true},
		{"a[/x]c", "a/c", true},
		{"a[^/]c", "a/c", false},
		{"a[b-d]e", "ace", true},
		{"a[b-d]e", "aee", false},
		{"a[\\]]b", "a]b", true},
		{`q\?x=*`, "q?x=1", true},
		{`q\?x=*`, "qax=1", false},
		{`lit\*`, "lit*", true},
		{`lit\*`, "litx", false},
		{"é*", "éé/x", true},
		{"?", "é", true},
		{"TEST://*", "test://x", false}, // case-sensitive
		{"test://x", "test://x", true},
		{"test://x", "test://xy", false},
		{"test://xy", "test://x", false},
	} {
		if got := matchURI(c.glob, c.uri); got != c.want {
			t.Errorf("matchURI(%q, %q) = %v, want %v", c.glob, c.uri, got, c.want)
		}
		if err := checkURIGlob(c.glob); err != nil {
			t.Errorf("checkURIGlob(%q): %v", c.glob, err)
		}
	}
	// Where '/' plays no part, the same answers as path.Match.
	for _, g := range []string{"a*", "*b", "a?c", "[a-c]*", "[^x]y", `\*`, "**", "a*b*c"} {
		for _, s := range []string{"", "a", "abc", "ab", "xy", "*", "aXbYc", "b"} {
			want, _ := path.Match(g, s)
			if got := matchURI(g, s); got != want {
				t.Errorf("matchURI(%q, %q) = %v, path.Match %v", g, s, got, want)
			}
		}
	}
}

func TestCheckURIGlob(t *testing.T) {
	for _, g := range []string{"[", "a[b", `x\`, "[]a]", "users://{id}", "a}"} {
		if err := checkURIGlob(g); err == nil {
			t.Errorf("checkURIGlob(%q): no error", g)
		}
	}
}

// FuzzMatchURI: never panics, and agrees with path.Match on names without
// '/' (where the two syntaxes mean the same).
func FuzzMatchURI(f *testing.F) {
	f.Add("a*[b-c]?", "axbc")
	f.Add(`\*[^/]`, "*x")
	f.Fuzz(func(t *testing.T, g, s string) {
		if checkURIGlob(g) != nil {
			return
		}
		got := matchURI(g, s)
		if !strings.Contains(g+s, "/") {
			if want, _ := path.Match(g, s); got != want {
				t.Errorf("matchURI(%q, %q) = %v, path.Match %v", g, s, got, want)
			}
		}
	})
}

// BenchmarkMatchURI: a long URI against a glob that backtracks.
func BenchmarkMatchURI(b *testing.B) {
	uri := "file:///" + strings.Repeat("dir/", 200) + "file.txt"
	b.ReportAllocs()
	for b.Loop() {
		if matchURI("file:///*/secret/*.key", uri) {
			b.Fatal("matched")
		}
	}
}
