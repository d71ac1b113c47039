package federate

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/tidwall/gjson"
)

func TestMergeDiscover(t *testing.T) {
	s := testSet(t)
	got := MergeDiscover(s, []Part{
		{Server: 1, Result: readTestdata(t, "discover-jira.json")},
		{Server: 0, Result: readTestdata(t, "discover-github.json")},
	}, []byte(`{"name":"gateway","version":"2.0"}`))
	want := bytes.TrimSpace(readTestdata(t, "discover-merged.json"))
	if !bytes.Equal(got, want) {
		t.Errorf("merged\n%s\nwant\n%s", got, want)
	}
	if !json.Valid(got) {
		t.Error("not valid JSON")
	}
}

func TestMergeDiscoverRules(t *testing.T) {
	s := testSet(t)
	long := strings.Repeat("é", MaxInstructions) // 2 bytes each
	for _, tc := range []struct {
		name       string
		parts      []string
		serverInfo string
		check      func(r gjson.Result) bool
	}{
		{"no version in common: the first part's", []string{`{"supportedVersions":["a","b"]}`, `{"supportedVersions":["c"]}`}, `{}`,
			func(r gjson.Result) bool { return r.Get("supportedVersions").Raw == `["a","b"]` }},
		{"a part without versions", []string{`{"supportedVersions":["a"]}`, `{}`}, `{}`,
			func(r gjson.Result) bool { return r.Get("supportedVersions").Raw == `["a"]` }},
		{"true wins over false and objects", []string{`{"capabilities":{"r":{"subscribe":false},"t":{}}}`, `{"capabilities":{"r":{"subscribe":true},"t":true}}`}, `{}`,
			func(r gjson.Result) bool { return r.Get("capabilities").Raw == `{"r":{"subscribe":true},"t":true}` }},
		{"deeper than 8 levels: the first part's", []string{
			`{"capabilities":{"a":{"b":{"c":{"d":{"e":{"f":{"g":{"h":{"x":1}}}}}}}}}}`,
			`{"capabilities":{"a":{"b":{"c":{"d":{"e":{"f":{"g":{"h":{"y":2}}}}}}}}}}`}, `{}`,
			func(r gjson.Result) bool {
				return r.Get("capabilities").Raw == `{"a":{"b":{"c":{"d":{"e":{"f":{"g":{"h":{"x":1}}}}}}}}}`
			}},
		{"instructions clipped at a character", []string{`{"instructions":"` + long + `"}`}, `{}`,
			func(r gjson.Result) bool {
				own := r.Get("instructions").Str[strings.Index(r.Get("instructions").Str, "## github\n")+len("## github\n"):]
				return len(own) == MaxInstructions && utf8.ValidString(own)
			}},
		{"serverInfo not an object: no _meta", []string{`{}`}, `"gw"`,
			func(r gjson.Result) bool { return !r.Get("_meta").Exists() }},
		{"a part not JSON: private, 0", []string{`{"ttlMs":5,"cacheScope":"public"}`, `{"ttl`}, `{}`,
			func(r gjson.Result) bool { return r.Get("ttlMs").Raw == "0" && r.Get("cacheScope").Str == "private" }},
		{"no parts", nil, `{}`,
			func(r gjson.Result) bool {
				return r.Get("supportedVersions").Raw == "[]" && r.Get("capabilities").Raw == "{}"
			}},
	} {
		var parts []Part
		for i, p := range tc.parts {
			parts = append(parts, Part{Server: i, Result: []byte(p)})
		}
		got := MergeDiscover(s, parts, []byte(tc.serverInfo))
		if !json.Valid(got) || !tc.check(gjson.ParseBytes(got)) {
			t.Errorf("%s: %s", tc.name, got)
		}
	}
}
