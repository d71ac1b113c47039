package seal

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func testTurnSession() TurnSession {
	return TurnSession{
		Inner:        "inner-session-id",
		Capabilities: []byte(`{"elicitation":{},"experimental":{"io.modelcontextprotocol/multi-turn-sse":{}}}`),
		ClientInfo:   []byte(`{"name":"c","version":"1"}`),
	}
}

// TestTurnSessionRoundTrip: a session seals to a prefixed id that opens to
// itself; other session ids are not turn sessions.
func TestTurnSessionRoundTrip(t *testing.T) {
	kr := testKeyring(t)
	for _, s := range []TurnSession{testTurnSession(), {Inner: "x"}} {
		id, err := SealTurnSession(kr, s)
		if err != nil {
			t.Fatal(err)
		}
		if !IsTurnSession(string(id)) {
			t.Fatalf("%q has no prefix", id)
		}
		got, err := OpenTurnSession(kr, id)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, s) {
			t.Fatalf("opened %+v, sealed %+v", got, s)
		}
	}
	pin := SealPin(kr, Pin{Upstream: "http://u"})
	if IsTurnSession(string(pin)) {
		t.Fatal("a pin looks like a turn session")
	}
	if _, err := OpenTurnSession(kr, TurnSessionPrefix+pin); !errors.Is(err, ErrUnsealable) {
		t.Fatalf("a prefixed pin opened: %v", err)
	}
}

// TestTurnSessionRefusals: bounds, tampering, another key, oversized ids.
func TestTurnSessionRefusals(t *testing.T) {
	kr := testKeyring(t)
	big := testTurnSession()
	big.Inner = GatewaySessionID(strings.Repeat("i", MaxTurnSessionInner+1))
	if _, err := SealTurnSession(kr, big); !errors.Is(err, ErrTurnSessionTooLarge) {
		t.Fatalf("inner too large: %v", err)
	}
	id, _ := SealTurnSession(kr, testTurnSession())
	if _, err := OpenTurnSession(kr, GatewaySessionID(tamper(string(id)))); !errors.Is(err, ErrUnsealable) {
		t.Errorf("tampered: %v", err)
	}
	if _, err := OpenTurnSession(testKeyring(t, bytes.Repeat([]byte{0x5a}, KeySize)), id); !errors.Is(err, ErrUnsealable) {
		t.Errorf("another key: %v", err)
	}
	if _, err := OpenTurnSession(kr, GatewaySessionID(TurnSessionPrefix+strings.Repeat("A", maxTurnSessionToken))); !errors.Is(err, ErrUnsealable) {
		t.Errorf("oversized: %v", err)
	}
	if _, err := OpenSessionID(kr, id); err == nil {
		t.Error("a turn session opened as a pin or held session")
	}
}

// FuzzDecodeTurnSession: the decoder never panics, and what it accepts
// seals back to the same plaintext.
func FuzzDecodeTurnSession(f *testing.F) {
	f.Add([]byte{turnSessionVersion, 1, 'x', 2, '{', '}', 0})
	f.Add([]byte{turnSessionVersion, 0x80})
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := decodeTurnSession(b)
		if err != nil {
			return
		}
		got := []byte{turnSessionVersion}
		for _, v := range []string{string(s.Inner), string(s.Capabilities), string(s.ClientInfo)} {
			got = appendField(got, v)
		}
		if !bytes.Equal(got, b) {
			t.Fatalf("re-encoded %x, decoded from %x", got, b)
		}
	})
}
