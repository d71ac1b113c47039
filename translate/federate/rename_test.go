package federate

import (
	"errors"
	"testing"
)

func TestSetString(t *testing.T) {
	for _, tc := range []struct {
		body, path, value, want string
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"github__issue_get","arguments":{"name":"x"}}}`,
			"params.name", "issue_get",
			`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"issue_get","arguments":{"name":"x"}}}`},
		{` {"params" : { "ref" : {"type":"ref/prompt", "name" : "jira.p"} } }`, "params.ref.name", `q"é`,
			` {"params" : { "ref" : {"type":"ref/prompt", "name" : "q\"é"} } }`},
		{`{"params":{"taskId":"jira:t\u00e9"}}`, "params.taskId", "té", `{"params":{"taskId":"té"}}`},
	} {
		got, err := SetString([]byte(tc.body), tc.path, tc.value)
		if err != nil || string(got) != tc.want {
			t.Errorf("SetString(%s, %s) = %s, %v", tc.body, tc.path, got, err)
		}
	}
	if v, err := String([]byte(`{"params":{"taskId":"jira:t\u00e9"}}`), "params.taskId"); v != "jira:té" || err != nil {
		t.Errorf("String = %q, %v", v, err)
	}
}

// TestSetStringRefuses: a missing path, a value that is not a string, and
// a repeated member on the path (read as one copy here and the other by
// a server) are errors.
func TestSetStringRefuses(t *testing.T) {
	for _, tc := range []struct{ body, path string }{
		{`{"params":{}}`, "params.name"},
		{`{"params":{"name":7}}`, "params.name"},
		{`{"params":{"name":null}}`, "params.name"},
		{`{"params":"x"}`, "params.name"},
		{`{"params":["name"]}`, "params.name"},
		{`{"params":{"name":"github__a","name":"jira.b"}}`, "params.name"},
		{`{"params":{"name":"github__a"},"params":{"name":"jira.b"}}`, "params.name"},
		{`{"params":{"name":"a"}`, "params.name"},
		{`["params"]`, "params"},
		{``, "params.name"},
	} {
		if got, err := SetString([]byte(tc.body), tc.path, "x"); !errors.Is(err, ErrNoString) {
			t.Errorf("SetString(%s, %s) = %s, %v", tc.body, tc.path, got, err)
		}
		if _, err := String([]byte(tc.body), tc.path); !errors.Is(err, ErrNoString) {
			t.Errorf("String(%s, %s): %v", tc.body, tc.path, err)
		}
	}
}
