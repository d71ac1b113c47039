package jsonrpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

func TestJSONDepth(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int
	}{
		{``, 0},
		{`1`, 0},
		{`"[[["`, 0},
		{`[]`, 1},
		{`{}`, 1},
		{`[[]]`, 2},
		{`[[],[]]`, 2},
		{`{"a":[{"b":{}}]}`, 4},
		{`{"[[[":"{{{"}`, 1},              // brackets in names and values
		{`["\"[[["]`, 1},                  // an escaped quote does not end the string
		{`["\\"]`, 1},                     // \\ then the closing quote
		{`["\\\"[["]`, 1},                 // \\ \" then brackets inside
		{`["\\",[[]]]`, 3},                // the string ends after \\
		{`["a\u005b\u007b"]`, 1},          // \u escapes are not brackets
		{`"unterminated [[[[`, 0},         // an unterminated string swallows the rest
		{`["unterminated \`, 1},           // a trailing backslash
		{`]]]]}}}[`, 1},                   // never below zero
		{`[1,[2,[3]]],[4]`, 3},            // not valid JSON, counted all the same
		{strings.Repeat("[", 1000), 1000}, // unclosed
		{strings.Repeat(`{"a":`, 300) + `1`, 300},
	} {
		if got := JSONDepth(c.in); got != c.want {
			t.Errorf("JSONDepth(%.40q) = %d, want %d", c.in, got, c.want)
		}
		if got := JSONDepth([]byte(c.in)); got != c.want {
			t.Errorf("JSONDepth([]byte(%.40q)) = %d, want %d", c.in, got, c.want)
		}
	}
}

func TestValidJSON(t *testing.T) {
	nested := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	for _, c := range []struct {
		in   string
		want error
	}{
		{`{"jsonrpc":"2.0","id":1,"result":{}}`, nil},
		{nested(MaxJSONDepth), nil},
		{nested(MaxJSONDepth + 1), ErrJSONTooDeep},
		{strings.Repeat("[", 10<<20), ErrJSONTooDeep}, // would take ~1.6 GiB of stack in gjson.Valid
		{`{"a":` + nested(MaxJSONDepth), ErrJSONTooDeep},
		{`["` + strings.Repeat("[", 1000) + `"]`, nil}, // deep-looking, but a string
		{`{"a":"\"","b":` + nested(MaxJSONDepth-1) + `}`, nil},
		{`{"a":"\\","b":` + nested(MaxJSONDepth) + `}`, ErrJSONTooDeep},
		{`["unterminated`, ErrInvalidJSON},
		{`["\"]`, ErrInvalidJSON},
		{``, ErrInvalidJSON},
		{`{"a":1}x`, ErrInvalidJSON},
	} {
		if got := ValidJSON([]byte(c.in)); !errors.Is(got, c.want) {
			t.Errorf("ValidJSON(%.40q) = %v, want %v", c.in, got, c.want)
		}
		if got := ValidJSONString(c.in); !errors.Is(got, c.want) {
			t.Errorf("ValidJSONString(%.40q) = %v, want %v", c.in, got, c.want)
		}
	}
}

// TestDepthScanAllocates nothing, whatever the input.
func TestDepthScanAllocates(t *testing.T) {
	b := []byte(strings.Repeat(`{"a":["\"[",`, 1000))
	if n := testing.AllocsPerRun(10, func() { _ = ValidJSON(b) }); n != 0 {
		t.Fatalf("ValidJSON allocates %v times", n)
	}
}

// referenceDepth is the nesting depth of valid JSON as encoding/json's
// tokenizer sees it.
func referenceDepth(b []byte) (int, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber() // numbers too large for a float64 are still JSON
	depth, deepest := 0, 0
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return deepest, nil
		}
		if err != nil {
			return 0, err
		}
		switch tok {
		case json.Delim('['), json.Delim('{'):
			depth++
			deepest = max(deepest, depth)
		case json.Delim(']'), json.Delim('}'):
			depth--
		}
	}
}

// FuzzJSONDepth compares the depth scan with encoding/json: for every
// input encoding/json accepts, JSONDepth equals the depth its tokenizer
// reports, and ValidJSON accepts it exactly when gjson does and the depth
// is within MaxJSONDepth. For any input, nothing panics and ValidJSON never
// calls anything deeper than MaxJSONDepth valid.
func FuzzJSONDepth(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"result":{"a":[1,{"b":"[{"}]}}`, `["\"[[["]`, `["\\",[[]]]`, `"\u005b"`,
		`[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[`,
		`]`, `{"a":`, `["\`, ``, ` [ ] `, `{"a":{"b":{"c":[]}}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got := JSONDepth(b)
		if got != JSONDepth(string(b)) {
			t.Fatalf("string and []byte scans differ on %q", b)
		}
		err := ValidJSON(b)
		if !errors.Is(err, ErrJSONTooDeep) && got > MaxJSONDepth {
			t.Fatalf("depth %d accepted as %v: %q", got, err, b)
		}
		if !json.Valid(b) {
			return
		}
		want, rerr := referenceDepth(b)
		if rerr != nil {
			t.Fatalf("json.Valid accepts %q but its tokenizer fails: %v", b, rerr)
		}
		if got != want {
			t.Fatalf("JSONDepth(%q) = %d, encoding/json says %d", b, got, want)
		}
		switch {
		case want > MaxJSONDepth:
			if !errors.Is(err, ErrJSONTooDeep) {
				t.Fatalf("depth %d: ValidJSON = %v, want ErrJSONTooDeep", want, err)
			}
		case (err == nil) != gjson.ValidBytes(b):
			t.Fatalf("ValidJSON(%q) = %v, gjson.ValidBytes = %v", b, err, gjson.ValidBytes(b))
		}
	})
}

// TestNoRecursiveValidator keeps the recursive validators out of the
// gateway's code: JSON is validated with ValidJSON, which bounds the depth
// first. Only this file's package may call gjson.Valid, here.
func TestNoRecursiveValidator(t *testing.T) {
	forbidden := regexp.MustCompile(`gjson\.Valid(Bytes)?\(|json\.Valid\(`)
	for _, dir := range []string{"../sse", "../jsonrpc", "../legacy", "../translate/seal", "../translate", "../translate/forward", "../translate/reverse", "../caddymodule"} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range files {
			if strings.HasSuffix(name, "_test.go") || filepath.Base(name) == "depth.go" && filepath.Base(dir) == "jsonrpc" {
				continue
			}
			src, err := os.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			for i, line := range strings.Split(string(src), "\n") {
				if forbidden.MatchString(line) {
					t.Errorf("%s:%d calls a recursive JSON validator; use ValidJSON: %s", name, i+1, strings.TrimSpace(line))
				}
			}
		}
	}
}
