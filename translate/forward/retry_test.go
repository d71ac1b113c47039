package forward

import (
	"fmt"
	"testing"
	"time"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/seal"
	"github.com/tidwall/gjson"
)

// TestRetryOf: a retry's requestState says whose call it resumes — this
// instance's (with the upstream the call runs on while it is parked),
// another's, or none that opens for the request — and Serve then uses the
// state as RetryOf opened it.
func TestRetryOf(t *testing.T) {
	upstream, _ := legacyUpstream(t)
	b := newTestBridge(t, time.Minute)
	a := serve(b, askRequest(t, upstream, 1, 1, ""))
	res := gjson.GetBytes(a.final, "result")
	state := res.Get("requestState").String()
	if res.Get("resultType").String() != "input_required" || state == "" {
		t.Fatalf("want input_required, got %s", a.final)
	}
	answer := func(state string) string {
		return fmt.Sprintf(`,"inputResponses":{"elicitation-1":{"action":"accept","content":{"a":"y"}}},"requestState":%q`, state)
	}

	if rt := b.RetryOf(new(askRequest(t, "", 2, 1, ""))); rt.Whose != NotRetry {
		t.Errorf("a first request: %+v, want NotRetry", rt)
	}
	for name, r := range map[string]Request{
		"tampered":        askRequest(t, "", 2, 1, answer(state+"x")),
		"another request": askRequest(t, "", 2, 2, answer(state)),
	} {
		if rt := b.RetryOf(&r); rt.Whose != StateUnopened {
			t.Errorf("%s: %+v, want StateUnopened", name, rt)
		}
	}
	there := seal.SealState(b.defaults.Keyring, seal.State{Instance: "gw-b", Address: "http://10.0.0.2:8080", Principal: translate.PrincipalHash("p"),
		Digest: translate.RequestDigest("tools/call", translate.ParamsOf([]byte(askRequest(t, "", 2, 1, "").Raw))), Expires: time.Now().Add(time.Minute)})
	if rt := b.RetryOf(new(askRequest(t, "", 2, 1, answer(there)))); rt.Whose != ParkedThere ||
		rt.Owner != (translate.Owner{Instance: "gw-b", Address: "http://10.0.0.2:8080"}) {
		t.Errorf("a call parked on gw-b: %+v", rt)
	}

	// The retry is routed without an upstream (Request.Upstream ""): the
	// call knows its own.
	retry := askRequest(t, "", 2, 1, answer(state))
	if rt := b.RetryOf(&retry); rt.Whose != ParkedHere || rt.Owner.Instance != "test" || rt.Upstream != upstream {
		t.Fatalf("a call parked here: %+v, want ParkedHere on %s", rt, upstream)
	}
	if got := gjson.GetBytes(serve(b, retry).final, "result.content.0.text").String(); got != "accept:y" {
		t.Fatalf("the retry's result %q, want accept:y", got)
	}
	replay := askRequest(t, "", 3, 1, answer(state))
	if rt := b.RetryOf(&replay); rt.Whose != ParkedHere || rt.Upstream != "" {
		t.Errorf("a call no longer parked: %+v, want ParkedHere without an upstream", rt)
	}
}
