package federate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

func readTestdata(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestListKindOf(t *testing.T) {
	for method, want := range map[string]ListKind{"tools/list": Tools, "prompts/list": Prompts,
		"resources/list": Resources, "resources/templates/list": ResourceTemplates} {
		if k, ok := ListKindOf(method); !ok || k != want || k.Method() != method {
			t.Errorf("ListKindOf(%q) = %d %t", method, k, ok)
		}
	}
	for _, m := range []string{"tools/call", "", "tasks/list"} {
		if _, ok := ListKindOf(m); ok {
			t.Errorf("ListKindOf(%q) ok", m)
		}
	}
}

// TestMergeTools: entries in server order (whatever the order of the
// parts), renamed in place and otherwise byte for byte; the filter, the
// collisions, invalid and malformed entries left out; the caching hints
// and the cursors merged.
func TestMergeTools(t *testing.T) {
	s := testSet(t)
	m := Merge(s, Tools, []Part{
		{Server: 2, Result: readTestdata(t, "tools-files.json")},
		{Server: 1, Result: readTestdata(t, "tools-jira.json")},
		{Server: 0, Result: readTestdata(t, "tools-github.json")},
	})
	want := bytes.TrimSpace(readTestdata(t, "tools-merged.json"))
	if !bytes.Equal(m.Result, want) {
		t.Errorf("merged\n%s\nwant\n%s", m.Result, want)
	}
	if !json.Valid(m.Result) {
		t.Error("the merged result is not valid JSON")
	}
	if want := map[int]string{0: "gh-page-2"}; !reflect.DeepEqual(m.Next, want) {
		t.Errorf("Next = %v", m.Next)
	}
	wantHidden := []Hidden{
		{0, "issue_has space", WhyInvalidName}, // "repo_list" and "issue_delete": filtered, not listed
		{0, "", WhyMalformed},                  // a string
		{0, "", WhyMalformed},                  // no name
		{0, "", WhyMalformed},                  // a number
		{0, "", WhyMalformed},                  // name twice
		{2, "github__issue_get", WhyCollision},
		{2, "jira.create", WhyCollision},
	}
	if !reflect.DeepEqual(m.Hidden, wantHidden) {
		t.Errorf("Hidden = %v", m.Hidden)
	}
	// Each shown name routes back to its server and name.
	gjson.GetBytes(m.Result, "tools.#.name").ForEach(func(_, v gjson.Result) bool {
		i, name, ok := s.Route(v.Str)
		if !ok || !s.ToolShown(i, name) {
			t.Errorf("shown %q routes to %d %q %t", v.Str, i, name, ok)
		}
		return true
	})
}

func TestMergePrompts(t *testing.T) {
	s := testSet(t)
	m := Merge(s, Prompts, []Part{
		{Server: 0, Result: []byte(`{"prompts":[{"name":"issue_delete","arguments":[]},{"name":"review"}],"ttlMs":5,"cacheScope":"public"}`)},
		{Server: 2, Result: []byte(`{"prompts":[{"name":"summarize"}],"ttlMs":5,"cacheScope":"public"}`)},
	})
	// Prompts are prefixed, not filtered by the tool globs.
	want := `{"prompts":[{"name":"github__issue_delete","arguments":[]},{"name":"github__review"},{"name":"summarize"}],"resultType":"complete","ttlMs":5,"cacheScope":"public"}`
	if string(m.Result) != want || len(m.Hidden) != 0 {
		t.Errorf("merged %s, hidden %v", m.Result, m.Hidden)
	}
}

// TestMergeResources: URIs are not renamed; a URI an earlier server lists
// is hidden from a later one (first in configuration order wins, whatever
// the order of the parts).
func TestMergeResources(t *testing.T) {
	s := testSet(t)
	m := Merge(s, Resources, []Part{
		{Server: 2, Result: []byte(`{"resources":[{"uri":"file:///a","name":"a"},{"uri":"file:///shared","name":"mine?"}],"ttlMs":10,"cacheScope":"private"}`)},
		{Server: 0, Result: []byte(`{"resources":[{"uri":"file:///shared","name":"first"},{"name":"no uri"}],"ttlMs":5,"cacheScope":"public","nextCursor":"r2"}`)},
	})
	want := `{"resources":[{"uri":"file:///shared","name":"first"},{"uri":"file:///a","name":"a"}],"resultType":"complete","ttlMs":5,"cacheScope":"private"}`
	if string(m.Result) != want {
		t.Errorf("merged %s", m.Result)
	}
	wantHidden := []Hidden{{0, "", WhyMalformed}, {2, "file:///shared", WhyDuplicate}}
	if !reflect.DeepEqual(m.Hidden, wantHidden) || !reflect.DeepEqual(m.Next, map[int]string{0: "r2"}) {
		t.Errorf("Hidden %v, Next %v", m.Hidden, m.Next)
	}
	tm := Merge(s, ResourceTemplates, []Part{
		{Server: 1, Result: []byte(`{"resourceTemplates":[{"uriTemplate":"jira://issue/{key}","name":"issue"}],"ttlMs":5,"cacheScope":"public"}`)},
		{Server: 0, Result: []byte(`{"resourceTemplates":[{"uriTemplate":"jira://issue/{key}","name":"same"}],"ttlMs":5,"cacheScope":"public"}`)},
	})
	want = `{"resourceTemplates":[{"uriTemplate":"jira://issue/{key}","name":"same"},{"uriTemplate":"jira://issue/{key}","name":"issue"}],"resultType":"complete","ttlMs":5,"cacheScope":"public"}`
	if string(tm.Result) != want {
		t.Errorf("merged templates %s", tm.Result)
	}
}

// TestMergeCacheHints: ttlMs is the smallest (missing, negative or not an
// integer reads 0); cacheScope is public only when every part is.
func TestMergeCacheHints(t *testing.T) {
	s := testSet(t)
	for _, tc := range []struct {
		parts []string
		ttl   int64
		scope string
	}{
		{[]string{`{"ttlMs":100,"cacheScope":"public"}`, `{"ttlMs":50,"cacheScope":"public"}`}, 50, "public"},
		{[]string{`{"ttlMs":100,"cacheScope":"public"}`, `{"cacheScope":"public"}`}, 0, "public"},
		{[]string{`{"ttlMs":100,"cacheScope":"public"}`, `{"ttlMs":-5,"cacheScope":"public"}`}, 0, "public"},
		{[]string{`{"ttlMs":100,"cacheScope":"public"}`, `{"ttlMs":1.5,"cacheScope":"public"}`}, 0, "public"},
		{[]string{`{"ttlMs":100,"cacheScope":"public"}`, `{"ttlMs":"100","cacheScope":"public"}`}, 0, "public"},
		{[]string{`{"ttlMs":100,"cacheScope":"public"}`, `{"ttlMs":100}`}, 100, "private"},
		{[]string{`{"ttlMs":100,"cacheScope":"public"}`, `{"ttlMs":100,"cacheScope":"private"}`}, 100, "private"},
		{[]string{`{"ttlMs":100,"cacheScope":"public"}`, `not json`}, 0, "private"},
		{nil, 0, "private"},
	} {
		var parts []Part
		for i, p := range tc.parts {
			parts = append(parts, Part{Server: i, Result: []byte(p)})
		}
		m := Merge(s, Tools, parts)
		r := gjson.ParseBytes(m.Result)
		if r.Get("ttlMs").Int() != tc.ttl || r.Get("cacheScope").Str != tc.scope || r.Get("resultType").Str != "complete" || !json.Valid(m.Result) {
			t.Errorf("%v: %s", tc.parts, m.Result)
		}
	}
}

// TestMergeBounds: a part's entries beyond MaxListItems are dropped (one
// Hidden says so), a part that is not a JSON object is hidden, a part of
// no server of the set is ignored.
func TestMergeBounds(t *testing.T) {
	s := testSet(t)
	var b strings.Builder
	b.WriteString(`{"tools":[`)
	for i := range MaxListItems + 5 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"name":"t%d"}`, i)
	}
	b.WriteString(`]}`)
	m := Merge(s, Tools, []Part{
		{Server: 1, Result: []byte(b.String())},
		{Server: 2, Result: []byte(`{"tools":[{"name":"unclosed"`)},
		{Server: 7, Result: []byte(`{"tools":[{"name":"ghost"}]}`)},
		{Server: -1, Result: []byte(`{"tools":[{"name":"ghost"}]}`)},
	})
	if n := len(gjson.GetBytes(m.Result, "tools").Array()); n != MaxListItems {
		t.Errorf("%d entries kept", n)
	}
	want := []Hidden{{1, "", WhyTooMany}, {2, "", WhyMalformed}}
	if !reflect.DeepEqual(m.Hidden, want) {
		t.Errorf("Hidden = %v", m.Hidden)
	}
}
