package seal

import (
	"bytes"
	"encoding/base64"
	"reflect"
	"testing"
	"time"
)

// Tokens minted by the gateway before sealing moved into this package (the
// code of translate/seal.go, pin.go, clientsession.go and translate/state.go,
// owner.go, forwarded.go at 8f6ffe3), under goldenKey. A gateway must go on
// opening the tokens its fleet minted before an upgrade, and mint tokens
// the fleet's older instances open: TestGoldenTokens checks both.
const (
	goldenPin   = "AUJe1OQTKs1E9XSKOh4vufF-Qfj_Bmbs_HIqzK9UcdGzIYX_DbNP2EZlrneC23K5_Ozwj-gIVUNAKzvV8pNOnzzqDkEhfaK7PTs5mJ2JEJem_nkrmKsUve6quQ"
	goldenHeld  = "AUJe1OSaFyMURrv_76cAHPI4prrx7dNHReVbDnoHAvviemIXp1Q7-dDROdozHCyUgsRc2hAyigFigObSwB2y1-FiAGTKq-xO-WuXiiqSpjyP8BWMIbZwIZ6RfMy4bSwpioQ5ZEaTvJ-NN4fTFL4aT_D3UcNJpp_BL6aWVNUPjjAStUx4dCfcjvWmo9F31w"
	goldenState = "AUJe1OQHUY4FrVyoBv83PywJa4SxORw0mHE11TrE7vE9CMlgYQOV_v7wr6Cc3_82NgB6POQO2GzERTRj4UF2a4_zG0HpwX5VNGhTymoM5d817EMRVTfOvdtDxoQuzIOiJrabh30yBAu7VbAItA9YzKes"
	goldenOwner = "AUJe1OSYG4pvWtKvNUGKeD1-le3RZkALmQ7M8Yg4Lkf463k-WTERMDxS-kyhfXE_7W8b3pDEd-hq_Q"
	// goldenForwarded was signed by instance gw-a for gw-b at
	// goldenSigned, over goldenRequest.
	// goldenCursor is a federated cursor (minted when the kind was added,
	// by SealFederatedCursor): pages handed out before an upgrade go on
	// opening after it.
	goldenCursor    = "AUJe1OT8hF1pgOH8OEWe1DkAD98VOyXwFGFJzFgQsc9IQuXQ-eV4bsrGEuzgH6v1h9fFZvhyiMv5Wo3b97Sdmum7bv9J5lPg"
	goldenForwarded = "v2;k=425ed4e4;t=gw-b;e=1800000030123;n=80kXr36MW9LL22iJNbVBeA;p=BwAAAAAAAAAAAAAAAAAAAA;s=ozjIiP24ZLcd3eMiuUjq0PsabMCDkyJEiCWf0WAm7tg"
)

var (
	goldenKey     = bytes.Repeat([]byte{0x42}, KeySize)
	goldenSigned  = time.UnixMilli(1_800_000_000_123)
	goldenRequest = ForwardedRequest{Method: "POST", URI: "/mcp?x=1", Body: []byte(`{"jsonrpc":"2.0"}`),
		Authorization: "Bearer t", SessionID: "sid", Principal: [16]byte{7}}
)

// TestGoldenTokens opens tokens minted by the code before the move, and
// checks that tokens minted now are the same bytes: sealed for the same
// purpose (the golden token opens under it), with the same header, over
// the same plaintext. AES-GCM under one key and nonce is deterministic, so
// a token sealed now with the golden token's nonce would equal it.
func TestGoldenTokens(t *testing.T) {
	kr, err := NewKeyring(goldenKey)
	if err != nil {
		t.Fatal(err)
	}
	issued := time.Unix(1_800_000_000, 0)

	pin := Pin{Upstream: "http://10.0.0.2:9000/mcp", Session: "up-sess-1", Principal: [16]byte{1, 2, 3}, Issued: issued}
	if got, err := OpenPin(kr, goldenPin); err != nil || got != pin {
		t.Errorf("golden pin: %+v, %v", got, err)
	}
	sameToken(t, kr, "pin", purposePin, goldenPin, string(SealPin(kr, pin)))

	held := ClientSession{ID: [16]byte{9, 8, 7}, Upstream: "http://10.0.0.3/mcp", Principal: [16]byte{4, 5, 6},
		ProtocolVersion: "2025-06-18", Capabilities: []byte(`{"roots":{}}`), ClientInfo: []byte(`{"name":"c","version":"1"}`), Issued: issued}
	got, err := OpenClientSession(kr, goldenHeld)
	if err != nil || got.ID != held.ID || got.Upstream != held.Upstream || got.Principal != held.Principal ||
		got.ProtocolVersion != held.ProtocolVersion || !bytes.Equal(got.Capabilities, held.Capabilities) ||
		!bytes.Equal(got.ClientInfo, held.ClientInfo) || !got.Issued.Equal(issued) {
		t.Errorf("golden held session: %+v, %v", got, err)
	}
	id, err := SealClientSession(kr, held)
	if err != nil {
		t.Fatal(err)
	}
	sameToken(t, kr, "held session", purposeClientSession, goldenHeld, string(id))
	for token, kind := range map[string]SessionKind{goldenPin: SessionPinned, goldenHeld: SessionHeld} {
		if o, err := OpenSessionID(kr, GatewaySessionID(token)); err != nil || o.Kind != kind {
			t.Errorf("OpenSessionID: kind %d, %v; want %d", o.Kind, err, kind)
		}
	}

	st := State{Instance: "gw-a", Address: "http://10.0.0.1:8080", Handle: [16]byte{1, 2}, Round: 2,
		Principal: [16]byte{3}, Digest: [16]byte{4}, Expires: time.Unix(1_800_000_600, 0)}
	if got, err := OpenState(kr, goldenState, issued); err != nil || !statesEqual(got, st) {
		t.Errorf("golden state: %+v, %v", got, err)
	}
	sameToken(t, kr, "state", statePurpose, goldenState, SealState(kr, st))

	if inst, addr, ok := OpenOwner(kr, goldenOwner); !ok || inst != "gw-a" || addr != "http://10.0.0.1:8080" {
		t.Errorf("golden owner: %q %q %t", inst, addr, ok)
	}
	sameToken(t, kr, "owner", ownerPurpose, goldenOwner, SealOwner(kr, "gw-a", "http://10.0.0.1:8080"))

	cur := FederatedCursor{Kind: 1, Principal: [16]byte{3}, Expires: time.Unix(1_800_003_600, 0),
		Next: []ServerCursor{{Server: 0, Cursor: "page-2"}, {Server: 2, Cursor: "c=100"}}}
	if got, err := OpenFederatedCursor(kr, goldenCursor, 1, [16]byte{3}, issued); err != nil || !reflect.DeepEqual(got, cur) {
		t.Errorf("golden cursor: %+v, %v", got, err)
	}
	fresh, err := SealFederatedCursor(kr, cur)
	if err != nil {
		t.Fatal(err)
	}
	sameToken(t, kr, "cursor", cursorPurpose, goldenCursor, fresh)

	// The forwarding MAC is deterministic: the golden header verifies.
	p, err := NewForwardAuth(kr, "gw-b", NewReplayFilter(4)).Verify(goldenForwarded, goldenRequest, goldenSigned)
	if err != nil || p != goldenRequest.Principal {
		t.Errorf("golden forwarding header: %x, %v", p, err)
	}
	h := NewForwardAuth(kr, "gw-a", NewReplayFilter(4)).Sign("gw-b", goldenRequest, goldenSigned)
	if prefix := "v2;k=425ed4e4;t=gw-b;e=1800000030123;n="; len(h) != len(goldenForwarded) || h[:len(prefix)] != prefix {
		t.Errorf("forwarding header %q is not shaped like %q", h, goldenForwarded)
	}
}

// sameToken checks that fresh, sealed now, is golden's twin: same header
// (version, key id), and the same plaintext under the same purpose.
func sameToken(t *testing.T, kr *Keyring, name string, purpose Purpose, golden, fresh string) {
	t.Helper()
	want, err := kr.Open(purpose, golden)
	if err != nil {
		t.Fatalf("%s: golden token does not open for %q: %v", name, purpose, err)
	}
	got, err := kr.Open(purpose, fresh)
	if err != nil {
		t.Fatalf("%s: fresh token does not open for %q: %v", name, purpose, err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s: plaintext %x, golden %x", name, got, want)
	}
	g, _ := base64.RawURLEncoding.DecodeString(golden)
	f, _ := base64.RawURLEncoding.DecodeString(fresh)
	if len(f) != len(g) || !bytes.Equal(f[:5], g[:5]) {
		t.Errorf("%s: header %x (%d bytes), golden %x (%d bytes)", name, f[:5], len(f), g[:5], len(g))
	}
}
