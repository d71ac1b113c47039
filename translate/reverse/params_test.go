package reverse

import (
	"net/http"
	"strings"
	"testing"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
)

// TestCheckUniqueParams: a legacy client's params whose repeated members
// would give the headers one value and the upstream another are refused;
// repeats the headers cannot come from are not the gateway's business.
func TestCheckUniqueParams(t *testing.T) {
	deep := func(n int, inner string) string {
		return strings.Repeat(`{"a":`, n) + inner + strings.Repeat(`}`, n)
	}
	for _, c := range []struct {
		params string
		dup    string // "" when accepted
	}{
		{``, ""},
		{`{"name":"safe","arguments":{"x":1,"y":{"z":2}}}`, ""},
		{`{"name":"safe","arguments":{},"name":"dangerous"}`, "params"},
		{`{"uri":"file:///a","uri":"file:///b"}`, "params"},
		{`{"name":"t","arguments":{"target":"a","target":"b"}}`, "params.arguments"},
		{`{"name":"t","arguments":{"o":{"k":1,"k":2}}}`, "params.arguments"},
		{`{"name":"t","arguments":{"n\u0061me":1,"name":2}}`, "params.arguments"}, // escapes compare unescaped
		{`{"name":"t","arguments":` + deep(maxHeaderDepth-1, `{"k":1,"k":2}`) + `}`, "params.arguments"},
		// Deeper than any header path, or inside arrays: no header reads it.
		{`{"name":"t","arguments":` + deep(maxHeaderDepth, `{"k":1,"k":2}`) + `}`, ""},
		{`{"name":"t","arguments":{"list":[{"k":1,"k":2}]}}`, ""},
		{`{"name":"t","arguments":"not an object"}`, ""},
	} {
		rerr := checkUniqueParams([]byte(c.params))
		switch {
		case c.dup == "" && rerr != nil:
			t.Errorf("%.60s: refused with %v", c.params, rerr)
		case c.dup != "" && rerr == nil:
			t.Errorf("%.60s: accepted, want a duplicate in %s refused", c.params, c.dup)
		case rerr != nil && (rerr.Code != jsonrpc.InvalidParams || rerr.HTTPStatus != http.StatusBadRequest || !strings.Contains(rerr.Message, "in "+c.dup)):
			t.Errorf("%.60s: %v, want -32602/400 naming %s", c.params, rerr, c.dup)
		}
	}
}
