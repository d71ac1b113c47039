package forward

import (
	"fmt"
	"testing"
	"time"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/seal"
)

// TestStateRefusalsAlike: a requestState that does not open, one sealed
// under a key this instance lacks (another instance's), another
// principal's, another request's and an expired one (of the right
// principal and request, or of another principal) are refused with one
// status, code and message; only the reason kept for the log differs
// (RefusedUnknownKey, which the caller tells operators, for the other key).
func TestStateRefusalsAlike(t *testing.T) {
	b := newTestBridge(t, time.Minute)
	answer := func(state string) string {
		return fmt.Sprintf(`,"inputResponses":{"elicitation-1":{"action":"accept","content":{"a":"y"}}},"requestState":%q`, state)
	}
	digest := translate.RequestDigest("tools/call", translate.ParamsOf([]byte(askRequest(t, "", 2, 1, "").Raw)))
	sealed := func(principal string, expires time.Duration) string {
		return seal.SealState(b.defaults.Keyring, seal.State{Instance: "test", Principal: translate.PrincipalHash(principal),
			Digest: digest, Expires: time.Now().Add(expires)})
	}
	otherKeys, err := seal.NewKeyring(seal.NewRandomKey())
	if err != nil {
		t.Fatal(err)
	}
	foreign := seal.SealState(otherKeys, seal.State{Instance: "test", Principal: translate.PrincipalHash("p"),
		Digest: digest, Expires: time.Now().Add(time.Minute)})
	cases := map[string]Request{
		"another instance's key":       askRequest(t, "", 2, 1, answer(foreign)),
		"tampered":                     askRequest(t, "", 2, 1, answer(sealed("p", time.Minute)+"x")),
		"another principal":            askRequest(t, "", 2, 1, answer(sealed("mallory", time.Minute))),
		"another request":              askRequest(t, "", 2, 2, answer(sealed("p", time.Minute))),
		"expired":                      askRequest(t, "", 2, 1, answer(sealed("p", -time.Second))),
		"expired, another principal's": askRequest(t, "", 2, 1, answer(sealed("mallory", -time.Second))),
	}
	whys := map[string]bool{}
	for name, r := range cases {
		if rt := b.RetryOf(&r); rt.Whose != StateUnopened {
			t.Fatalf("%s: %+v, want StateUnopened", name, rt)
		}
		rerr := r.retry.rerr
		if rerr.HTTPStatus != 400 || rerr.Code != jsonrpc.InvalidParams || rerr.Message != StateRefusedMessage || rerr.Data != nil {
			t.Errorf("%s: refused with %d %d %q %v, want 400 %d %q", name, rerr.HTTPStatus, rerr.Code, rerr.Message, rerr.Data, jsonrpc.InvalidParams, StateRefusedMessage)
		}
		why := refusedWhy(rerr)
		if why == "" {
			t.Errorf("%s: no reason for the log", name)
		}
		whys[why] = true
		if (name == "another instance's key") != (why == RefusedUnknownKey) {
			t.Errorf("%s: the log says %q", name, why)
		}
		if name == "expired, another principal's" && why != "another principal's" {
			t.Errorf("%s: the log says %q; the principal is checked before the expiry", name, why)
		}
		if a := serve(b, r); a.status != 400 || string(a.final) != string(jsonrpc.ErrorResponse(r.ID, rerr)) {
			t.Errorf("%s: served %d %s", name, a.status, a.final)
		}
	}
	if len(whys) != 5 {
		t.Errorf("reasons %v: want 5 kinds", whys)
	}
}
