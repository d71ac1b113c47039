package federate

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

func TestMatchTemplate(t *testing.T) {
	for _, tc := range []struct {
		template, uri string
		want          bool
	}{
		{"file:///a.txt", "file:///a.txt", true},
		{"file:///a.txt", "file:///a.txT", false},
		{"jira://issue/{key}", "jira://issue/PROJ-1", true},
		{"jira://issue/{key}", "jira://issue/", false},      // non-empty
		{"jira://issue/{key}", "jira://issue/a/b", false},   // no '/'
		{"jira://issue/{key}", "jira://issue/a?x=1", false}, // no '?'
		{"jira://issue/{key,rev}", "jira://issue/a,3", true},
		{"jira://issue/{key:3}", "jira://issue/abc", true},
		{"file:///{+path}", "file:///a/b/c.txt", true},
		{"file:///{+path}", "file:///", true},
		{"doc://x{#frag}", "doc://x#sec/1", true},
		{"doc://x{#frag}", "doc://x", true},
		{"doc://x{#frag}", "doc://xy", false},
		{"repo://r{/owner,name}", "repo://r/octo/cat", true},
		{"repo://r{/owner,name}", "repo://r", true},
		{"repo://r{/owner}", "repo://r/a?b", false},
		{"f://x{.ext}", "f://x.json", true},
		{"f://x{.ext}", "f://x.a/b", false},
		{"m://x{;p}", "m://x;p=1", true},
		{"s://find{?q,lang}", "s://find?q=a&lang=en", true},
		{"s://find{?q}{&lang}", "s://find?q=a&lang=en", true},
		{"s://find{?q}", "s://find?q=a#frag", false},
		{"s://find{?q}", "s://find", true},
		{"a{x}b{y}", "a1b2", true},
		{"a{x}b{y}", "ab2", false},
		// malformed templates never match
		{"a{x", "a1", false},
		{"a}x", "a}x", false},
		{"a{}", "a", false},
		{"a{=x}", "ax", false},
		{"a{x y}", "a1", false},
		{"a{+}", "a", false},
		{strings.Repeat("a", MaxTemplate+1), strings.Repeat("a", MaxTemplate+1), false},
		{strings.Repeat("{+a}", MaxTemplateExpressions+1), "x", false},
		{strings.Repeat("{+a}", MaxTemplateExpressions), "x", true},
		{"{+a}", strings.Repeat("x", MaxMatchURI+1), false},
	} {
		if got := MatchTemplate(tc.template, tc.uri); got != tc.want {
			t.Errorf("MatchTemplate(%q, %q) = %t", clipTest(tc.template), clipTest(tc.uri), got)
		}
	}
}

func clipTest(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

// TestMatchTemplateHostile: templates a backtracking matcher takes
// exponential time over (expressions that all match the same runs, and a
// literal that fails at the end) are answered in steps linear in the
// URI's length: at most (segments + 1) × (len(uri) + 1) × 2 positions,
// plus the literal bytes compared at each position.
func TestMatchTemplateHostile(t *testing.T) {
	uri := "x://" + strings.Repeat("a", MaxMatchURI-4)
	for _, template := range []string{
		"x://" + strings.Repeat("{a}", MaxTemplateExpressions) + "!",
		"x://" + strings.Repeat("{+a}", MaxTemplateExpressions) + "!",
		"x://" + strings.Repeat("{+a}a", MaxTemplateExpressions-1) + "{+a}" + "!",
		"x://" + strings.Repeat("{/a}{.b}", MaxTemplateExpressions/2) + "!",
		"x://" + strings.Repeat("{+a}"+strings.Repeat("a", 27), MaxTemplateExpressions) + "!",
	} {
		segs, ok := parseTemplate(template)
		if !ok {
			t.Fatalf("%s does not parse", clipTest(template))
		}
		work, lits := 0, 0
		for _, s := range segs {
			lits += len(s.lit)
		}
		if matchSegments(segs, uri, &work) {
			t.Errorf("%s matched", clipTest(template))
		}
		if bound := (len(segs)+1)*(len(uri)+1)*2 + lits*(len(uri)+1); work > bound {
			t.Errorf("%s: %d steps, over %d", clipTest(template), work, bound)
		}
	}
}

func TestClaims(t *testing.T) {
	s := testSet(t)
	c := NewClaims(s)
	c.AddResources(2, []byte(`{"resources":[{"uri":"file:///shared"},{"uri":"file:///own"},{"name":"no uri"},"x"]}`))
	c.AddResources(0, []byte(`{"resources":[{"uri":"file:///shared"}]}`))
	if d := c.AddTemplates(1, []byte(`{"resourceTemplates":[{"uriTemplate":"file:///{+path}"},{"uriTemplate":"bad{"}]}`)); d != 1 {
		t.Errorf("dropped %d templates, want the malformed one", d)
	}
	c.AddTemplates(2, []byte(`{"resourceTemplates":[{"uriTemplate":"file:///{name}"}]}`))
	c.AddTemplates(0, []byte(`{"resourceTemplates":[{"uriTemplate":"gh://{owner}/{repo}"}]}`))
	for _, tc := range []struct {
		uri    string
		server int
		ok     bool
	}{
		{"file:///shared", 0, true}, // listed by two: the first in configuration order
		{"file:///own", 2, true},    // listed exactly beats templates
		{"file:///x", 1, true},      // both templates match: jira's comes first
		{"gh://octo/cat", 0, true},
		{"gh://octo", -1, false},
		{"other:x", -1, false},
	} {
		if i, ok := c.Owner(tc.uri); i != tc.server || ok != tc.ok {
			t.Errorf("Owner(%q) = %d %t", tc.uri, i, ok)
		}
	}
	if c.AddResources(9, []byte(`{"resources":[{"uri":"ghost:x"}]}`)) != 0 {
		t.Error("a server the set lacks")
	}
	if _, ok := c.Owner("ghost:x"); ok {
		t.Error("a URI of a server the set lacks is claimed")
	}
}

// TestClaimsBounds: URIs beyond MaxClaimedURIs and templates beyond
// MaxClaimedTemplates are not kept, and are counted.
func TestClaimsBounds(t *testing.T) {
	s := testSet(t)
	c := NewClaims(s)
	page := func(key, format string, from, n int) []byte {
		var b strings.Builder
		b.WriteString(`{"` + key + `":[`)
		for i := from; i < from+n; i++ {
			if i > from {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, format, i)
		}
		return []byte(b.String() + "]}")
	}
	dropped := 0
	for from := 0; from < MaxClaimedURIs+10; from += 10_000 {
		dropped += c.AddResources(1, page("resources", `{"uri":"u:%d"}`, from, 10_000))
	}
	if dropped != 10_000 {
		t.Errorf("dropped %d URIs", dropped)
	}
	if _, ok := c.Owner(fmt.Sprintf("u:%d", MaxClaimedURIs-1)); !ok {
		t.Error("the last URI kept is not claimed")
	}
	if _, ok := c.Owner(fmt.Sprintf("u:%d", MaxClaimedURIs)); ok {
		t.Error("a URI beyond the bound is claimed")
	}
	if d := c.AddTemplates(0, page("resourceTemplates", `{"uriTemplate":"t%d://{x}"}`, 0, MaxClaimedTemplates+3)); d != 3 {
		t.Errorf("dropped %d templates", d)
	}
}

// TestClaimsConcurrent: pages added while URIs are looked up (run with
// -race).
func TestClaimsConcurrent(t *testing.T) {
	s := testSet(t)
	c := NewClaims(s)
	var wg sync.WaitGroup
	for i := range s.Len() {
		wg.Go(func() {
			for j := range 50 {
				c.AddResources(i, []byte(fmt.Sprintf(`{"resources":[{"uri":"u:%d:%d"}]}`, i, j)))
				c.AddTemplates(i, []byte(fmt.Sprintf(`{"resourceTemplates":[{"uriTemplate":"t%d:{x}"}]}`, j)))
			}
		})
		wg.Go(func() {
			for j := range 50 {
				c.Owner(fmt.Sprintf("u:%d:%d", i, j))
				c.Owner(fmt.Sprintf("t%d:x", j))
			}
		})
	}
	wg.Wait()
	if i, ok := c.Owner("u:2:49"); !ok || i != 2 {
		t.Errorf("Owner = %d %t", i, ok)
	}
}
