package seal

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestOpenSessionID: a session id is told apart by the purpose it
// authenticates for, and nothing else opens: another purpose's token, a
// tampered one, one under an unknown key, an over-long one.
func TestOpenSessionID(t *testing.T) {
	kr := testKeyring(t, NewRandomKey())
	other := testKeyring(t, NewRandomKey())
	pin := Pin{Upstream: "http://127.0.0.1:9/mcp", Session: "s-1", Principal: [16]byte{7}, Issued: time.Unix(1_800_000_000, 0)}
	pinID := SealPin(kr, pin)
	heldID, err := SealClientSession(kr, sampleClientSession())
	if err != nil {
		t.Fatal(err)
	}

	got, err := OpenSessionID(kr, pinID)
	if err != nil || got.Kind != SessionPinned || got.Pin != pin {
		t.Fatalf("pin: %+v, %v", got, err)
	}
	got, err = OpenSessionID(kr, heldID)
	if err != nil || got.Kind != SessionHeld || got.Held.Upstream != sampleClientSession().Upstream || got.Held.ID != sampleClientSession().ID {
		t.Fatalf("held session: %+v, %v", got, err)
	}

	tampered := []byte(pinID)
	tampered[len(tampered)-3] ^= 'A' ^ 'B'
	for name, id := range map[string]GatewaySessionID{
		"another purpose":  GatewaySessionID(kr.Seal("mcp-gateway/request-state/v1", []byte("x"))),
		"tampered":         GatewaySessionID(tampered),
		"unknown key":      SealPin(other, pin),
		"too long":         GatewaySessionID(strings.Repeat("A", maxSessionToken+1)),
		"not base64url":    "not a token!",
		"empty":            "",
		"truncated header": pinID[:10],
	} {
		got, err := OpenSessionID(kr, id)
		if !errors.Is(err, ErrUnsealable) || got.Kind != SessionUnknown {
			t.Errorf("%s: %+v, %v; want SessionUnknown and ErrUnsealable", name, got, err)
		}
	}
}

// TestOpenAny: a token opens only for the purpose it was sealed for,
// whichever others are offered, and says which.
func TestOpenAny(t *testing.T) {
	kr := testKeyring(t, NewRandomKey())
	tok := kr.Seal("b", []byte("hello"))
	p, pt, err := kr.OpenAny(tok, "a", "b", "c")
	if err != nil || p != "b" || string(pt) != "hello" {
		t.Fatalf("got %q %q %v", p, pt, err)
	}
	if _, _, err := kr.OpenAny(tok, "a", "c"); !errors.Is(err, ErrUnsealable) {
		t.Fatalf("opened for a purpose it was not sealed for: %v", err)
	}
	if _, _, err := kr.OpenAny(tok); !errors.Is(err, ErrUnsealable) {
		t.Fatalf("opened for no purpose: %v", err)
	}
}
