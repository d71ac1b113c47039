package jsonrpc

import (
	"encoding/json"
	"testing"

	"github.com/tidwall/gjson"
)

func TestSetMember(t *testing.T) {
	for _, c := range []struct{ obj, name, val, want string }{
		{`{}`, "a", `1`, `{"a":1}`},
		{`{ "b" : [ 1 ] }`, "a", `1`, `{"b":[ 1 ],"a":1}`},
		{`{"a":0,"b":2}`, "a", `1`, `{"a":1,"b":2}`},
		{`{"a":0,"b":2,"a":3}`, "a", `1`, `{"a":1,"b":2}`}, // later copies go: the first wins
		{`{"x/y":0}`, "x/y", `"<&>"`, `{"x/y":"<&>"}`},
	} {
		if got := SetMember(c.obj, c.name, c.val); got != c.want {
			t.Errorf("SetMember(%s, %q, %s) = %s, want %s", c.obj, c.name, c.val, got, c.want)
		}
	}
}

func TestAppendObject(t *testing.T) {
	for _, c := range []struct{ obj, add, want string }{
		{`{}`, `{}`, `{}`},
		{`{}`, `{"a":1}`, `{"a":1}`},
		{`{"b" : 2 }`, `{"a":1,"c":{"d":[]}}`, `{"b" : 2,"a":1,"c":{"d":[]} }`},
	} {
		if got := AppendObject(c.obj, c.add); got != c.want {
			t.Errorf("AppendObject(%s, %s) = %s, want %s", c.obj, c.add, got, c.want)
		}
	}
}

func TestAppendCanonical(t *testing.T) {
	for in, want := range map[string]string{
		`{"b":1,"a":{"d":[ {"z":1,"y":2} ],"c":null}}`: `{"a":{"c":null,"d":[{"y":2,"z":1}]},"b":1}`,
		`{"a":1,"a":2}`:      `{"a":1}`, // the first of repeated names, as gjson reads it
		`{"\u0061":1,"a":2}`: `{"a":1}`,
		`[1.0, "x\u0041"]`:   `[1.0,"x\u0041"]`, // scalars as written
		`{}`:                 `{}`,
	} {
		if got := string(AppendCanonical(nil, gjson.Parse(in))); got != want {
			t.Errorf("AppendCanonical(%s) = %s, want %s", in, got, want)
		}
	}
}

func TestMarshalAndQuote(t *testing.T) {
	b, err := Marshal(NewRequest(json.RawMessage(`"gw-1"`), "a<b", struct {
		S string `json:"s"`
	}{"<&>"}))
	if err != nil || string(b) != `{"jsonrpc":"2.0","id":"gw-1","method":"a<b","params":{"s":"<&>"}}` {
		t.Errorf("Marshal = %s, %v", b, err)
	}
	if b, _ := Marshal(NewRequest(nil, "n", nil)); string(b) != `{"jsonrpc":"2.0","method":"n"}` {
		t.Errorf("notification = %s", b)
	}
	for in, want := range map[string]string{"x": `"x"`, "\x00\"<": `"\u0000\"<"`, "é\u2028": `"é\u2028"`} {
		if got := Quote(in); got != want {
			t.Errorf("Quote(%q) = %s, want %s", in, got, want)
		}
	}
}

// FuzzQuote: Quote writes what encoding/json writes, without HTML
// escaping, for every string (its printable-ASCII shortcut included).
func FuzzQuote(f *testing.F) {
	for _, s := range []string{"", "x", "gw-1", "a b<&>", "\x00\"\\", "é\u2028", "\x7f", "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := Marshal(s)
		if got := Quote(s); got != string(want) {
			t.Fatalf("Quote(%q) = %s, want %s", s, got, want)
		}
	})
}
