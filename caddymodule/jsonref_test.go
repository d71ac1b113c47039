package caddymodule

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/caddyserver/caddy/v2"
)

var updateJSONRef = flag.Bool("update", false, "rewrite docs/json.md from the doc comments of the handler's config fields")

// jsonRefPath is the JSON reference, made by TestJSONReference.
const jsonRefPath = "../docs/json.md"

// TestJSONReference: docs/json.md is what the doc comments of the
// handler's config fields (module.go, config.go, upstreams.go, tasks.go)
// make, so that those comments are the one place each JSON key is
// documented. After changing a comment: go test ./caddymodule -run
// TestJSONReference -update.
func TestJSONReference(t *testing.T) {
	keys := configKeys(t)
	got := renderJSONReference(keys)
	if *updateJSONRef {
		if err := os.WriteFile(jsonRefPath, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(jsonRefPath)
	if err != nil {
		t.Fatalf("%v (make it: go test ./caddymodule -run TestJSONReference -update)", err)
	}
	if string(want) != got {
		gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
		for i := range max(len(gl), len(wl)) {
			g, w := lineAt(gl, i), lineAt(wl, i)
			if g != w {
				t.Fatalf("docs/json.md differs from the doc comments of the config fields at line %d:\n"+
					"committed: %q\ncomments:  %q\n(go test ./caddymodule -run TestJSONReference -update rewrites it)", i+1, w, g)
			}
		}
	}
}

func lineAt(lines []string, i int) string {
	if i < len(lines) {
		return lines[i]
	}
	return "<end of file>"
}

// TestJSONReferenceComplete: the keys the reference lists are the keys
// encoding/json reads into a Handler (found by reflection, independently
// of the doc comments), each with a doc comment, in an order where every
// group comes before its keys.
func TestJSONReferenceComplete(t *testing.T) {
	keys := configKeys(t)
	var documented []string
	for _, k := range keys {
		documented = append(documented, k.path)
		if strings.TrimSpace(k.doc) == "" {
			t.Errorf("%s (%s) has no doc comment", k.path, k.goField)
		}
	}
	var want []string
	reflectKeys(reflect.TypeFor[Handler](), "", &want, map[reflect.Type]bool{})
	if !slices.Equal(documented, want) {
		t.Fatalf("the reference lists\n%v\nbut a Handler's JSON has\n%v", documented, want)
	}
	for _, p := range []string{"upstreams", "fleet.peer_transport", "health.active.interval", "tasks.rules[].window", "parking.max_parked"} {
		if !slices.Contains(want, p) {
			t.Errorf("no key %s", p)
		}
	}
}

// reflectKeys appends the JSON key paths of struct type typ under prefix.
// A struct type met before (the dynamic_endpoint's Upstream) is not
// entered again: the reference lists its keys once.
func reflectKeys(typ reflect.Type, prefix string, to *[]string, seen map[reflect.Type]bool) {
	for f := range typ.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.IsExported() || name == "-" || name == "" {
			continue
		}
		path := prefix + name
		*to = append(*to, path)
		ft := f.Type
		suffix := "."
		for ft.Kind() == reflect.Pointer || ft.Kind() == reflect.Slice && ft.Elem().Kind() != reflect.Uint8 {
			if ft.Kind() == reflect.Slice {
				suffix = "[]."
			}
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Struct && strings.HasPrefix(ft.PkgPath(), reflect.TypeFor[Handler]().PkgPath()) && !seen[ft] {
			if !f.Anonymous {
				seen[ft] = true
			}
			reflectKeys(ft, path+suffix, to, seen)
		}
	}
}

// configKey is one JSON key of the handler's configuration.
type configKey struct {
	path    string // health.active.interval, upstreams[].url
	depth   int
	kind    string // what the value is, for readers
	doc     string // the field's doc comment (a group's: its type's)
	goField string
}

// configKeys reads the handler's config types from this package's source
// and returns its keys in the order of their fields.
func configKeys(t *testing.T) []configKey {
	t.Helper()
	// This package's types by name, the faces' (face/<pkg>/) as pkg.Name.
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	faceFiles, err := filepath.Glob("face/*/*.go")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, faceFiles...)
	types := map[string]*ast.StructType{}
	docs := map[string]string{}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.TYPE {
				continue
			}
			for _, spec := range gd.Specs {
				ts := spec.(*ast.TypeSpec)
				st, ok := ts.Type.(*ast.StructType)
				if !ok {
					continue
				}
				typeName := ts.Name.Name
				if dir := filepath.Dir(name); dir != "." {
					typeName = filepath.Base(dir) + "." + typeName
				}
				types[typeName] = st
				doc := ts.Doc
				if doc == nil && len(gd.Specs) == 1 {
					doc = gd.Doc
				}
				docs[typeName] = doc.Text()
			}
		}
	}
	var keys []configKey
	walked := map[string]string{} // type → the path of the first key holding it
	var walk func(typeName, prefix string, depth int)
	walk = func(typeName, prefix string, depth int) {
		st := types[typeName]
		if st == nil {
			t.Fatalf("no struct type %s in the package", typeName)
		}
		for _, field := range st.Fields.List {
			if field.Tag == nil {
				continue
			}
			tagText, err := strconv.Unquote(field.Tag.Value)
			if err != nil {
				t.Fatal(err)
			}
			tag := reflect.StructTag(tagText)
			name, _, _ := strings.Cut(tag.Get("json"), ",")
			if name == "" || name == "-" {
				continue
			}
			k := configKey{path: prefix + name, depth: depth, doc: field.Doc.Text()}
			if id, ok := field.Type.(*ast.Ident); ok && field.Doc == nil && types[id.Name] != nil {
				// A group (h.Parking): its type's doc comment is its own.
				group := id.Name
				k.goField, k.kind = group, "object"
				if k.doc == "" {
					k.doc = groupDoc(docs[group], group)
				}
				keys = append(keys, k)
				walk(group, k.path+".", depth+1)
				continue
			}
			k.goField = field.Names[0].Name
			kind, nested, array := describeType(field.Type, tag)
			if _, ours := types[nested]; !ours {
				nested = ""
			}
			if first, seen := walked[nested]; seen && nested != "" {
				// Documented once: an upstream's keys under upstreams[].
				kind = fmt.Sprintf("%s, with the keys of [`%s`](#%s)", kind, first, refSlug(first))
				nested = ""
			}
			k.kind = kind
			keys = append(keys, k)
			if nested != "" {
				walked[nested] = k.path
				sub := k.path + "."
				if array {
					sub = k.path + "[]."
				}
				walk(nested, sub, depth+1)
			}
		}
	}
	walk("Handler", "", 0)
	return keys
}

// groupDoc is a group type's doc comment without its first words
// ("FleetConfig is the `fleet` object of the handler: ").
func groupDoc(doc, typeName string) string {
	doc = strings.TrimPrefix(doc, typeName+" is ")
	if _, rest, ok := strings.Cut(doc, ": "); ok && strings.Count(doc[:len(doc)-len(rest)], "\n") == 0 {
		doc = rest
	}
	if doc != "" {
		doc = string(unicode.ToUpper(rune(doc[0]))) + doc[1:]
	}
	return doc
}

// describeType says what a field of type expr holds, and names the
// package's struct type it holds (directly, through a pointer or in an
// array), if any.
func describeType(expr ast.Expr, tag reflect.StructTag) (kind, nested string, array bool) {
	switch e := expr.(type) {
	case *ast.Ident:
		switch e.Name {
		case "string":
			return "string", "", false
		case "bool":
			return "boolean", "", false
		case "int", "int64":
			return "integer", "", false
		}
		return "object", e.Name, false
	case *ast.StarExpr:
		return describeType(e.X, tag)
	case *ast.SelectorExpr:
		switch fmt.Sprintf("%s.%s", e.X, e.Sel.Name) {
		case "caddy.Duration":
			return "duration", "", false
		case "json.RawMessage":
			opts, _ := caddy.ParseStructTag(tag.Get("caddy"))
			return fmt.Sprintf("module (namespace `%s`, chosen by its key `%s`)", opts["namespace"], opts["inline_key"]), "", false
		}
		return "object", fmt.Sprintf("%s.%s", e.X, e.Sel.Name), false // a face's config
	case *ast.ArrayType:
		kind, nested, _ := describeType(e.Elt, tag)
		return "array of " + plural(kind), nested, true
	case *ast.MapType:
		k, _, _ := describeType(e.Key, tag)
		v, _, _ := describeType(e.Value, tag)
		return fmt.Sprintf("object (%s → %s)", k, v), "", false
	}
	return fmt.Sprintf("%T", expr), "", false
}

func plural(kind string) string {
	if strings.HasSuffix(kind, "s") || strings.Contains(kind, " ") {
		return kind
	}
	return kind + "s"
}

// renderJSONReference writes docs/json.md: the tree of keys, then each
// key with its doc comment.
func renderJSONReference(keys []configKey) string {
	var b strings.Builder
	b.WriteString(`# JSON reference

*Part of the reference of [caddy-mcp-gateway](../README.md#where-the-reference-is).*

<!-- Made by TestJSONReference (caddymodule/jsonref_test.go) from the doc
comments of the config fields in caddymodule/: edit those, then run
go test ./caddymodule -run TestJSONReference -update -->

The JSON configuration of the ` + "`mcp_gateway`" + ` handler
(` + "`\"handler\": \"mcp_gateway\"`" + ` in a route), as ` + "`caddy adapt`" + ` writes it
and Caddy's admin API takes it. The Caddyfile directive sets the same
options: [configuration.md](configuration.md) is its reference; an
option has the same name in both, except where a key below says
"Caddyfile:". Durations are integers of nanoseconds or strings such as
` + "`\"5m\"`" + `, as everywhere in Caddy's JSON. A key left out takes its
default; so does a group left out.

`)
	for _, k := range keys {
		fmt.Fprintf(&b, "%s- [`%s`](#%s) %s\n", strings.Repeat("  ", k.depth), lastKey(k.path), refSlug(k.path), k.kind)
	}
	for _, k := range keys {
		level := "##"
		if k.depth > 0 {
			level = "###"
		}
		fmt.Fprintf(&b, "\n%s %s\n\n%s.\n\n%s", level, k.path, upperFirst(k.kind), markdownDoc(k.doc))
	}
	return b.String()
}

func lastKey(path string) string {
	return path[strings.LastIndexAny(path, ".")+1:]
}

func upperFirst(s string) string {
	return strings.ToUpper(s[:1]) + s[1:]
}

// refSlug is the anchor GitHub makes of a heading naming path.
func refSlug(path string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(path) {
		if r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// markdownDoc turns a doc comment's text into Markdown paragraphs, one
// line each.
func markdownDoc(doc string) string {
	var b strings.Builder
	for para := range strings.SplitSeq(strings.TrimSpace(doc), "\n\n") {
		b.WriteString(strings.Join(strings.Fields(para), " "))
		b.WriteString("\n\n")
	}
	return strings.TrimSuffix(b.String(), "\n")
}
