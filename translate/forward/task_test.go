package forward

import "testing"

// TestWithTasksExtension: the Tasks extension is spliced into a discover
// result's capabilities.extensions; every other member keeps its bytes and
// its place, and of repeated members the first counts (as gjson reads
// them), the later copies going.
func TestWithTasksExtension(t *testing.T) {
	for in, want := range map[string]string{
		`{"resultType":"complete","capabilities":{},"ttlMs":0}`:                                                                `{"resultType":"complete","capabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}},"ttlMs":0}`,
		`{"z":1,"capabilities":{"tools":{"listChanged":true},"extensions":{"x/y":{"a":1}},"logging":{}},"a":2}`:                `{"z":1,"capabilities":{"tools":{"listChanged":true},"extensions":{"x/y":{"a":1},"io.modelcontextprotocol/tasks":{}},"logging":{}},"a":2}`,
		`{"capabilities":{"extensions":{"io.modelcontextprotocol/tasks":{"old":1},"b":{},"io.modelcontextprotocol/tasks":2}}}`: `{"capabilities":{"extensions":{"io.modelcontextprotocol/tasks":{},"b":{}}}}`,
		`{"capabilities":{"extensions":[1],"tools":{}}}`:                                                                       `{"capabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}},"tools":{}}}`,
		`{"capabilities":{"extensions":{"a":1},"extensions":{"b":2}}}`:                                                         `{"capabilities":{"extensions":{"a":1,"io.modelcontextprotocol/tasks":{}}}}`,
		`{"capabilities":null,"x":"<&>"}`:                                                                                      `{"capabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}},"x":"<&>"}`,
		`{"x":1}`:                                                                                                              `{"x":1,"capabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}`,
	} {
		got, err := withTasksExtension([]byte(in))
		if err != nil || string(got) != want {
			t.Errorf("withTasksExtension(%s) = %s, %v; want %s", in, got, err, want)
		}
	}
	for _, bad := range []string{`[]`, `{"a":`, `null`} {
		if got, err := withTasksExtension([]byte(bad)); err == nil {
			t.Errorf("withTasksExtension(%s) = %s, want an error", bad, got)
		}
	}
}
