package federate

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/tidwall/gjson"
)

// templateRegexp is a segment list as an RE2 regexp (linear time too),
// the reference MatchTemplate is checked against.
func templateRegexp(segs []segment) *regexp.Regexp {
	var b strings.Builder
	b.WriteString(`(?s)^`)
	for _, s := range segs {
		switch s.op {
		case 0:
			b.WriteString(regexp.QuoteMeta(s.lit))
		case 's':
			b.WriteString(`[^/?#]+`)
		case '+':
			b.WriteString(`.*`)
		case '#':
			b.WriteString(`(?:#.*)?`)
		case '/':
			b.WriteString(`(?:/[^?#]*)?`)
		case '?', '&':
			b.WriteString(`(?:` + regexp.QuoteMeta(string(s.op)) + `[^#]*)?`)
		default: // . ;
			b.WriteString(`(?:` + regexp.QuoteMeta(string(s.op)) + `[^/?#]*)?`)
		}
	}
	b.WriteString(`$`)
	return regexp.MustCompile(b.String())
}

// FuzzMatchTemplate: MatchTemplate agrees with the regexp the template
// stands for (on UTF-8 text), and never panics.
func FuzzMatchTemplate(f *testing.F) {
	f.Add("jira://issue/{key}", "jira://issue/PROJ-1")
	f.Add("file:///{+path}", "file:///a/b")
	f.Add("s://find{?q}{&lang}", "s://find?q=a&lang=en")
	f.Add("repo://r{/owner,name}{.ext}{;p}{#f}", "repo://r/a/b.c;p=1#x")
	f.Add("a{x}{y}{z}b", "a123b")
	f.Fuzz(func(t *testing.T, template, uri string) {
		got := MatchTemplate(template, uri)
		segs, ok := parseTemplate(template)
		if !ok || len(uri) > MaxMatchURI {
			if got {
				t.Fatalf("%q matched %q", template, uri)
			}
			return
		}
		if !utf8.ValidString(template) || !utf8.ValidString(uri) {
			return // the regexp package reads UTF-8 only
		}
		if want := templateRegexp(segs).MatchString(uri); got != want {
			t.Fatalf("MatchTemplate(%q, %q) = %t, the regexp says %t", template, uri, got, want)
		}
	})
}

// FuzzMerge: whatever the servers answer, the merged result is valid JSON
// with the caching hints, and every name shown routes back to the server
// and name it came from and is one the server may show.
func FuzzMerge(f *testing.F) {
	f.Add([]byte(`{"tools":[{"name":"issue_get"},{"name":"x y"}],"nextCursor":"c","ttlMs":5,"cacheScope":"public"}`),
		[]byte(`{"tools":[{"name":"github__issue_get"},{"name":"read"}]}`))
	f.Add([]byte(`{"tools":[{"name":"a","name":"b"},[],"s"]}`), []byte(`{"tools":{}}`))
	f.Fuzz(func(t *testing.T, github, files []byte) {
		s := testSet(t)
		for _, kind := range []ListKind{Tools, Prompts, Resources} {
			m := Merge(s, kind, []Part{{Server: 0, Result: github}, {Server: 2, Result: files}})
			if !json.Valid(m.Result) {
				t.Fatalf("invalid JSON: %s", m.Result)
			}
			r := gjson.ParseBytes(m.Result)
			if r.Get("resultType").Str != "complete" || !r.Get("ttlMs").Exists() || !r.Get("cacheScope").Exists() {
				t.Fatalf("no caching hints: %s", m.Result)
			}
			if kind == Resources {
				continue
			}
			r.Get(listSpecs[kind].array).ForEach(func(_, item gjson.Result) bool {
				shown := item.Get("name").Str
				i, name, ok := s.Route(shown)
				if !ok || (i != 0 && i != 2) {
					t.Fatalf("shown %q routes to %d %t", shown, i, ok)
				}
				if p, ok := s.Prefixed(i, name); !ok || p != shown || (kind == Tools && !s.ToolShown(i, name)) {
					t.Fatalf("shown %q may not be shown", shown)
				}
				return true
			})
		}
	})
}

// TestMatchTemplateAgreesWithRegexp runs the table of TestMatchTemplate's
// well-formed templates through the reference too.
func TestMatchTemplateAgreesWithRegexp(t *testing.T) {
	for _, tc := range [][2]string{
		{"jira://issue/{key}", "jira://issue/a/b"},
		{"doc://x{#frag}", "doc://x#sec/1"},
		{"repo://r{/owner,name}", "repo://r"},
		{"s://find{?q}", "s://find?q=a#frag"},
		{"f://x{.ext}", "f://x.a/b"},
	} {
		segs, _ := parseTemplate(tc[0])
		if MatchTemplate(tc[0], tc[1]) != templateRegexp(segs).MatchString(tc[1]) {
			t.Errorf("%q %q", tc[0], tc[1])
		}
	}
}
