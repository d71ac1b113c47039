package forward

import (
	"testing"
	"time"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/internal/testkit"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/seal"
)

// TestParkedElsewhere: only a retry whose state opens, is the retry's own,
// and names another instance is to be forwarded, with the sealed address.
func TestParkedElsewhere(t *testing.T) {
	kr := testkit.Keyring(t)
	b := New(nil, bridgeOptions(func(o *Options) { o.Keyring, o.Instance = kr, "gw-b" }))
	defer b.Close()
	params := func(state string) []byte {
		return []byte(`{"name":"t","arguments":{"a":1},"inputResponses":{},"requestState":"` + state + `"}`)
	}
	state := func(instance, address, principal string) string {
		return seal.SealState(kr, seal.State{Instance: instance, Address: address, Principal: translate.PrincipalHash(principal),
			Digest: translate.RequestDigest("tools/call", params("")), Expires: time.Now().Add(time.Minute)})
	}
	req := func(method, principal string, body []byte) Request {
		return Request{Principal: translate.PrincipalHash(principal), ModernRequest: &translate.ModernRequest{
			Message: jsonrpc.Message{ID: []byte("1"), Method: method, Kind: jsonrpc.KindRequest,
				Raw: []byte(`{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":` + string(body) + `}`)},
		}}
	}
	elsewhere := req("tools/call", "alice", params(state("gw-a", "http://10.0.0.1:8080", "alice")))
	if o, ok := b.ParkedElsewhere(&elsewhere); !ok ||
		o != (translate.Owner{Instance: "gw-a", Address: "http://10.0.0.1:8080"}) {
		t.Fatalf("a retry parked on gw-a: %+v, %t", o, ok)
	}
	for name, r := range map[string]Request{
		"parked here":       req("tools/call", "alice", params(state("gw-b", "", "alice"))),
		"another principal": req("tools/call", "mallory", params(state("gw-a", "http://10.0.0.1:8080", "alice"))),
		"another request":   req("tools/call", "alice", []byte(`{"name":"t","arguments":{"a":2},"requestState":"`+state("gw-a", "", "alice")+`"}`)),
		"tampered":          req("tools/call", "alice", params(state("gw-a", "", "alice")+"x")),
		"no state":          req("tools/call", "alice", []byte(`{"name":"t","arguments":{"a":1}}`)),
		"not input-capable": req("tools/list", "alice", params(state("gw-a", "", "alice"))),
	} {
		if o, ok := b.ParkedElsewhere(&r); ok {
			t.Errorf("%s: forwarded to %+v", name, o)
		}
	}
}
