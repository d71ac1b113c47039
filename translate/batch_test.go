package translate

import (
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
	"github.com/tidwall/gjson"
)

func TestIsBatch(t *testing.T) {
	for body, want := range map[string]bool{
		`[]`: true, " \n\t[{}]": true, `{"a":[]}`: false, ``: false, `"["`: false, ` {`: false,
	} {
		if got := IsBatch([]byte(body)); got != want {
			t.Errorf("IsBatch(%q) = %v", body, got)
		}
	}
}

func TestSessionBatchVersion(t *testing.T) {
	for _, c := range []struct {
		vals    []string
		version string
		allowed bool
	}{
		{nil, BatchVersion, true},
		{[]string{""}, BatchVersion, true},
		{[]string{" 2025-03-26 "}, BatchVersion, true},
		{[]string{"2025-06-18"}, "2025-06-18", false},
		{[]string{"2025-11-25"}, "2025-11-25", false},
		{[]string{"2024-11-05"}, "2024-11-05", false},
		{[]string{"2025-03-26", "2025-03-26"}, "", false},
	} {
		h := http.Header{}
		for _, v := range c.vals {
			h.Add(HeaderProtocolVersion, v)
		}
		v, ok := SessionBatchVersion(h)
		if v != c.version || ok != c.allowed {
			t.Errorf("%q: got %q %v, want %q %v", c.vals, v, ok, c.version, c.allowed)
		}
	}
}

func TestCheckBatch(t *testing.T) {
	req := `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
	note := `{"jsonrpc":"2.0","method":"notifications/progress","params":{}}`
	resp := `{"jsonrpc":"2.0","id":"gw-1","result":{}}`
	many := func(n int) string { return "[" + strings.TrimSuffix(strings.Repeat(note+",", n), ",") + "]" }
	for _, ok := range []string{
		"[" + req + "]",
		"[" + req + "," + note + "]",
		" [ " + note + " ,\n" + req + " ] ",
		"[" + note + "]",
		"[" + resp + "," + `{"jsonrpc":"2.0","id":null,"error":{"code":-1,"message":"x"}}` + "]",
		`[{"jsonrpc":"2.0","id":"a,]}\"[","method":"x"}]`,
		many(MaxBatchElements),
	} {
		if err := CheckBatch([]byte(ok)); err != nil {
			t.Errorf("%.80s: %v", ok, err)
		}
	}
	for _, c := range []struct {
		body, want string
		code       int
	}{
		{`[]`, "empty batch", jsonrpc.InvalidRequest},
		{`[ ]`, "empty batch", jsonrpc.InvalidRequest},
		{`[1]`, "element 0 must be a JSON object", jsonrpc.InvalidRequest},
		{`[` + req + `,[` + req + `]]`, "element 1 must be a JSON object", jsonrpc.InvalidRequest},
		{`[` + req + `,{"jsonrpc":"1.0","id":2,"method":"x"}]`, `"jsonrpc" must be "2.0" (batch element 1)`, jsonrpc.InvalidRequest},
		{`[{"jsonrpc":"2.0","id":true,"method":"x"}]`, `"id" must be a string or a number (batch element 0)`, jsonrpc.InvalidRequest},
		{`[{"jsonrpc":"2.0","id":1,"id":2,"method":"x"}]`, `duplicate member "id" (batch element 0)`, jsonrpc.InvalidRequest},
		{`[{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}]`, "initialize must not be part of a batch", jsonrpc.InvalidRequest},
		{`[` + req + `,` + resp + `]`, "not both (batch element 1)", jsonrpc.InvalidRequest},
		{`[` + resp + `,` + note + `]`, "not both (batch element 1)", jsonrpc.InvalidRequest},
		{many(MaxBatchElements + 1), "at most 100 messages", jsonrpc.InvalidRequest},
		{"[" + strings.Repeat("7,", 100000) + "7]", "at most 100 messages", jsonrpc.InvalidRequest},
		{`[` + req, "Parse error", jsonrpc.ParseError},
		{strings.Repeat("[", 200) + strings.Repeat("]", 200), "Parse error", jsonrpc.ParseError},
		{`{"jsonrpc":"2.0"}`, "must be a JSON array", jsonrpc.InvalidRequest},
	} {
		err := CheckBatch([]byte(c.body))
		var re *jsonrpc.RPCError
		if !errors.As(err, &re) || re.Code != c.code || re.HTTPStatus != http.StatusBadRequest || !strings.Contains(re.Message, c.want) {
			t.Errorf("%.60s: got %v, want %d %q", c.body, err, c.code, c.want)
		}
	}
}

// TestCheckBatchAllocations: checking a batch keeps no copy of its
// elements; what it allocates does not grow with the batch.
func TestCheckBatchAllocations(t *testing.T) {
	el := `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"x","progress":1}},`
	small := []byte("[" + strings.TrimSuffix(el, ",") + "]")
	big := []byte("[" + strings.TrimSuffix(strings.Repeat(el, 100000), ",") + "]")
	refused := testing.AllocsPerRun(5, func() { _ = CheckBatch(big) })
	one := testing.AllocsPerRun(5, func() { _ = CheckBatch(small) })
	if refused > one+8 {
		t.Errorf("refusing a batch of 100000 elements took %v allocations, one element %v", refused, one)
	}
}

func TestForEachElement(t *testing.T) {
	for body, want := range map[string][]string{
		`[]`:                               nil,
		` [ 1 , "a,]" ,{"b":[2,3]}, [ ] ]`: {`1`, `"a,]"`, `{"b":[2,3]}`, `[ ]`},
		`["\\",  "\"]" ]`:                  {`"\\"`, `"\"]"`},
	} {
		var got []string
		forEachElement([]byte(body), func(e []byte) bool { got = append(got, string(e)); return true })
		if strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("%s: %q, want %q", body, got, want)
		}
	}
}

// FuzzCheckBatch: CheckBatch never panics; it accepts only non-empty arrays
// of at most MaxBatchElements objects each of which Peek accepts, and
// refuses everything else with a 400 ParseError or InvalidRequest. The
// elements it walks are the ones gjson sees.
func FuzzCheckBatch(f *testing.F) {
	for _, s := range []string{
		`[{"jsonrpc":"2.0","id":1,"method":"tools/list"}]`,
		`[{"jsonrpc":"2.0","method":"n"},{"jsonrpc":"2.0","id":"a","method":"m","params":{}}]`,
		`[{"jsonrpc":"2.0","id":1,"result":{}}]`, `[]`, `[1]`, `[[]]`, `{}`, `[`, `[{"jsonrpc":"2.0","id":1,"id":2,"method":"x"}]`,
		`[{"jsonrpc":"2.0","id":"\\\",]","method":"x"}, 7 ]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if jsonrpc.ValidJSON(body) == nil && IsBatch(body) {
			var walked, seen []string
			forEachElement(body, func(e []byte) bool { walked = append(walked, string(e)); return true })
			gjson.ParseBytes(body).ForEach(func(_, v gjson.Result) bool { seen = append(seen, v.Raw); return true })
			if !slices.Equal(walked, seen) {
				t.Fatalf("%q: walked %q, gjson sees %q", body, walked, seen)
			}
		}
		err := CheckBatch(body)
		if err != nil {
			var re *jsonrpc.RPCError
			if !errors.As(err, &re) || re.HTTPStatus != http.StatusBadRequest || re.Code != jsonrpc.ParseError && re.Code != jsonrpc.InvalidRequest {
				t.Fatalf("%q: %v", body, err)
			}
			return
		}
		n := 0
		gjson.ParseBytes(body).ForEach(func(_, v gjson.Result) bool {
			n++
			if m, err := jsonrpc.Peek([]byte(v.Raw)); err != nil || m.Kind == jsonrpc.KindRequest && m.Method == "initialize" {
				t.Fatalf("%q: element %s accepted", body, v.Raw)
			}
			return true
		})
		if !IsBatch(body) || n == 0 || n > MaxBatchElements {
			t.Fatalf("%q accepted as a batch of %d", body, n)
		}
	})
}
