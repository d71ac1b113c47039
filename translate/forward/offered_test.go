package forward

import "testing"

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
