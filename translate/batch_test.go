package translate

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/legacy"
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

func TestPeekBatch(t *testing.T) {
	req := `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
	note := `{"jsonrpc":"2.0","method":"notifications/progress","params":{}}`
	resp := `{"jsonrpc":"2.0","id":"gw-1","result":{}}`
	for _, ok := range []string{
		"[" + req + "]",
		"[" + req + "," + note + "]",
		"[" + note + "]",
		"[" + resp + "," + `{"jsonrpc":"2.0","id":null,"error":{"code":-1,"message":"x"}}` + "]",
	} {
		msgs, err := PeekBatch([]byte(ok))
		if err != nil || len(msgs) != strings.Count(ok, `"jsonrpc"`) {
			t.Errorf("%s: %v (%d messages)", ok, err, len(msgs))
		}
	}
	for _, c := range []struct {
		body, want string
		code       int
	}{
		{`[]`, "empty batch", InvalidRequest},
		{`[ ]`, "empty batch", InvalidRequest},
		{`[1]`, "element 0 must be a JSON object", InvalidRequest},
		{`[` + req + `,[` + req + `]]`, "element 1 must be a JSON object", InvalidRequest},
		{`[` + req + `,{"jsonrpc":"1.0","id":2,"method":"x"}]`, `"jsonrpc" must be "2.0" (batch element 1)`, InvalidRequest},
		{`[{"jsonrpc":"2.0","id":true,"method":"x"}]`, `"id" must be a string or a number (batch element 0)`, InvalidRequest},
		{`[{"jsonrpc":"2.0","id":1,"id":2,"method":"x"}]`, `duplicate member "id" (batch element 0)`, InvalidRequest},
		{`[{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}]`, "initialize must not be part of a batch", InvalidRequest},
		{`[` + req + `,` + resp + `]`, "not both (batch element 1)", InvalidRequest},
		{`[` + resp + `,` + note + `]`, "not both (batch element 1)", InvalidRequest},
		{`[` + req, "Parse error", ParseError},
		{strings.Repeat("[", 200) + strings.Repeat("]", 200), "Parse error", ParseError},
		{`{"jsonrpc":"2.0"}`, "must be a JSON array", InvalidRequest},
	} {
		_, err := PeekBatch([]byte(c.body))
		var re *RPCError
		if !errors.As(err, &re) || re.Code != c.code || re.HTTPStatus != http.StatusBadRequest || !strings.Contains(re.Message, c.want) {
			t.Errorf("%.60s: got %v, want %d %q", c.body, err, c.code, c.want)
		}
	}
}

func TestUpstreamOffers(t *testing.T) {
	init := []byte(`{"protocolVersion":"2025-11-25","capabilities":{"tools":{},"resources":{"subscribe":true}},"serverInfo":{"name":"x","version":"1"}}`)
	for method, want := range map[string]bool{
		"tools/call": true, "tools/list": true, "resources/read": true, "resources/templates/list": true,
		"prompts/get": false, "prompts/list": false, "completion/complete": false,
		"server/discover": true, "subscriptions/listen": true,
	} {
		if got := upstreamOffers(init, method); got != want {
			t.Errorf("%s: %v", method, got)
		}
	}
	for _, unreadable := range []string{``, `{}`, `{"capabilities":[]}`} {
		if !upstreamOffers([]byte(unreadable), "prompts/get") {
			t.Errorf("%q: an unreadable InitializeResult must offer everything", unreadable)
		}
	}
}

// FuzzPeekBatch: PeekBatch never panics; it accepts only non-empty arrays of
// objects each of which Peek accepts, and refuses everything else with a 400
// ParseError or InvalidRequest.
func FuzzPeekBatch(f *testing.F) {
	for _, s := range []string{
		`[{"jsonrpc":"2.0","id":1,"method":"tools/list"}]`,
		`[{"jsonrpc":"2.0","method":"n"},{"jsonrpc":"2.0","id":"a","method":"m","params":{}}]`,
		`[{"jsonrpc":"2.0","id":1,"result":{}}]`, `[]`, `[1]`, `[[]]`, `{}`, `[`, `[{"jsonrpc":"2.0","id":1,"id":2,"method":"x"}]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		msgs, err := PeekBatch(body)
		if err != nil {
			var re *RPCError
			if !errors.As(err, &re) || re.HTTPStatus != http.StatusBadRequest || re.Code != ParseError && re.Code != InvalidRequest {
				t.Fatalf("%q: %v", body, err)
			}
			return
		}
		if !IsBatch(body) || len(msgs) == 0 {
			t.Fatalf("%q accepted as a batch of %d", body, len(msgs))
		}
		for _, m := range msgs {
			if m.Kind == legacy.KindInvalid || m.Kind == legacy.KindRequest && m.Method == "initialize" {
				t.Fatalf("%q: element %+v accepted", body, m)
			}
		}
	})
}
