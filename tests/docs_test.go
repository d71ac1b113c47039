package tests

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// mdLink is an inline Markdown link or image: [text](target).
var mdLink = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)\)`)

// mdHeading is an ATX heading.
var mdHeading = regexp.MustCompile(`^(#{1,6})\s+(.*?)\s*#*\s*$`)

// inlineCode is a code span; links inside one are not links.
var inlineCode = regexp.MustCompile("`[^`\n]*`")

// mdSlug is the anchor GitHub makes of a heading: lower case, punctuation
// dropped (letters, digits, '-', '_' and spaces kept), spaces made '-'.
func mdSlug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// mdProse returns text's lines with those of fenced code blocks (fences
// included) emptied, so that line numbers stay.
func mdProse(text string) []string {
	lines := strings.Split(text, "\n")
	fence := false
	for i, line := range lines {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fence = !fence
			lines[i] = ""
		} else if fence {
			lines[i] = ""
		}
	}
	return lines
}

// mdAnchors returns the anchors of text's headings, with GitHub's -1, -2 …
// for repeated ones.
func mdAnchors(text string) map[string]bool {
	anchors := map[string]bool{}
	count := map[string]int{}
	for _, line := range mdProse(text) {
		m := mdHeading.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		slug := mdSlug(m[2])
		if n := count[slug]; n > 0 {
			anchors[slug+"-"+strconv.Itoa(n)] = true
		} else {
			anchors[slug] = true
		}
		count[slug]++
	}
	return anchors
}

// brokenLinks checks every relative link and #anchor of the Markdown files
// files (paths relative to root, as read by read) and returns one line per
// link that does not resolve: a missing file or folder, or an anchor no
// heading of the target page makes.
func brokenLinks(root string, files []string, read func(string) (string, error)) []string {
	var broken []string
	anchorsOf := map[string]map[string]bool{}
	anchors := func(path string) (map[string]bool, error) {
		if a, ok := anchorsOf[path]; ok {
			return a, nil
		}
		text, err := read(path)
		if err != nil {
			return nil, err
		}
		anchorsOf[path] = mdAnchors(text)
		return anchorsOf[path], nil
	}
	for _, file := range files {
		text, err := read(file)
		if err != nil {
			broken = append(broken, file+": "+err.Error())
			continue
		}
		for n, line := range mdProse(text) {
			line = inlineCode.ReplaceAllString(line, "")
			for _, m := range mdLink.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				path, frag, _ := strings.Cut(target, "#")
				where := file + " (line " + strconv.Itoa(n+1) + "): " + target
				dest := file
				if path != "" {
					dest = filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(file), path)))
					if strings.HasPrefix(dest, "../") {
						broken = append(broken, where+": outside the repository")
						continue
					}
					if _, err := os.Stat(filepath.Join(root, dest)); err != nil {
						broken = append(broken, where+": no such file or folder")
						continue
					}
				}
				if frag == "" {
					continue
				}
				if !strings.HasSuffix(dest, ".md") {
					broken = append(broken, where+": an anchor into a file that is not Markdown")
					continue
				}
				a, err := anchors(dest)
				if err != nil {
					broken = append(broken, where+": "+err.Error())
					continue
				}
				if !a[frag] {
					broken = append(broken, where+": no heading in "+dest+" makes #"+frag)
				}
			}
		}
	}
	return broken
}

// TestDocsLinks: every relative link and #anchor in README.md,
// CHANGELOG.md and docs/*.md resolves (the file or folder exists; the anchor is a heading of
// the page it points into). The checker itself is shown a broken link and
// a broken anchor first, so that it cannot pass by seeing nothing.
func TestDocsLinks(t *testing.T) {
	root := repoRoot(t)
	read := func(path string) (string, error) {
		b, err := os.ReadFile(filepath.Join(root, path))
		return string(b), err
	}
	t.Run("checker", func(t *testing.T) {
		fake := map[string]string{
			"README.md":    "# Title\n\n## A section, in short\n\n[ok](#a-section-in-short) [ok](docs/configuration.md#every-option)\n[bad](#nowhere) [bad](docs/missing.md) [bad](docs/configuration.md#nowhere)\n`[not a link](#nowhere)`\n```\n[not a link](#nowhere)\n```\n",
			"docs/page.md": "# Page\n\n[ok](../README.md#title) [bad](../README.md#gone) [ok](configuration.md)\n",
		}
		fakeRead := func(path string) (string, error) {
			if s, ok := fake[path]; ok {
				return s, nil
			}
			return read(path)
		}
		got := brokenLinks(root, []string{"README.md", "docs/page.md"}, fakeRead)
		want := []string{"#nowhere", "docs/missing.md", "docs/configuration.md#nowhere", "../README.md#gone"}
		if len(got) != len(want) {
			t.Fatalf("the checker found %d broken links, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
		}
		for i, w := range want {
			if !strings.Contains(got[i], ": "+w+":") {
				t.Errorf("broken link %d: %q, want it to name %s", i, got[i], w)
			}
		}
	})
	if broken := brokenLinks(root, docFiles(t), read); len(broken) > 0 {
		t.Fatalf("%d links do not resolve:\n%s", len(broken), strings.Join(broken, "\n"))
	}
}

// readmeMaxLines is the README's length at most: a ten-minute read; the
// detail goes to docs/.
const readmeMaxLines = 600

// TestReadmeShort: the README stays a ten-minute read, and says of each
// extra face what it is (the saga the gateway's own extension, REST and
// multi-turn SSE non-standard extras of proposals that were closed),
// linking to its section of docs/faces.md, which says the same.
func TestReadmeShort(t *testing.T) {
	root := repoRoot(t)
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	readme, faces := read("README.md"), read(filepath.Join("docs", "faces.md"))
	if n := strings.Count(readme, "\n"); n > readmeMaxLines {
		t.Errorf("README.md has %d lines, more than %d: move the detail to docs/", n, readmeMaxLines)
	}
	for _, f := range []struct{ option, anchor, label string }{
		{"`saga on`", "saga", "the gateway's own extension"},
		{"`rest <base>`", "rest", "non-standard extra"},
		{"`multi_turn_sse on`", "multi-turn-sse-sep-1858", "non-standard extra"},
	} {
		// The README's paragraph: from the option to the link that ends it.
		i := strings.Index(readme, "("+f.option+"):")
		if i < 0 {
			t.Errorf("README.md has no paragraph on the face of %s", f.option)
			continue
		}
		para, _, _ := strings.Cut(readme[i:], "\n\n")
		if !strings.Contains(para, f.label) || !strings.Contains(para, "](docs/faces.md#"+f.anchor+")") {
			t.Errorf("the README's paragraph on %s does not say %q and link to docs/faces.md#%s:\n%s", f.option, f.label, f.anchor, para)
		}
		// The reference's section: from its heading to the next.
		var section string
		for _, sec := range strings.Split(faces, "\n## ")[1:] {
			heading, _, _ := strings.Cut(sec, "\n")
			if mdSlug(heading) == f.anchor {
				section = sec
			}
		}
		if !strings.Contains(section, f.label) {
			t.Errorf("docs/faces.md#%s does not say %q", f.anchor, f.label)
		}
		if f.label == "non-standard extra" && !strings.Contains(section, "closed, not accepted") {
			t.Errorf("docs/faces.md#%s does not say its proposal was closed, not accepted", f.anchor)
		}
	}
}

// TestDocsClientSnippets: the README's TypeScript examples, SDK 2.x then
// 1.x, import their packages and set the client up exactly as
// tests/node/modern-client.mjs and legacy-client.mjs, which the demo and the
// tests run, do.
func TestDocsClientSnippets(t *testing.T) {
	root := repoRoot(t)
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```js\n(.*?)```").FindAllSubmatch(readme, -1)
	for i, c := range []struct {
		script string
		want   []string
	}{
		{"modern-client.mjs", []string{
			"import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';",
			"versionNegotiation: { mode: 'auto' },",
			"capabilities: { elicitation: { form: {}, url: {} }, sampling: {}, roots: { listChanged: true } },",
			"client.setRequestHandler('elicitation/create', ",
		}},
		{"legacy-client.mjs", []string{
			"import { Client } from '@modelcontextprotocol/sdk/client/index.js';",
			"import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';",
			"{ capabilities: { elicitation: {}, sampling: {}, roots: { listChanged: true } } },",
			"client.setRequestHandler(ElicitRequestSchema, ",
		}},
	} {
		if i >= len(blocks) {
			t.Fatalf("README.md has %d ```js blocks, want the example of tests/node/%s as block %d", len(blocks), c.script, i+1)
		}
		script, err := os.ReadFile(filepath.Join(root, "tests", "node", c.script))
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range c.want {
			if !strings.Contains(string(blocks[i][1]), want) {
				t.Errorf("the README's example of %s lacks %q", c.script, want)
			}
			if !strings.Contains(string(script), want) {
				t.Errorf("tests/node/%s lacks %q, which the README shows", c.script, want)
			}
		}
	}
}
