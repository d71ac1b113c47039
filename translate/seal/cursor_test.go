package seal

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func testCursor() FederatedCursor {
	return FederatedCursor{Kind: 1, Principal: testPrincipal, Expires: testNow.Add(time.Hour),
		Next: []ServerCursor{{Server: 0, Cursor: "page-2"}, {Server: 3, Cursor: "eyJvZmZzZXQiOjEwMH0="}}}
}

// TestCursorRoundTrip: a cursor seals and opens to itself, at its bounds
// too.
func TestCursorRoundTrip(t *testing.T) {
	kr := testKeyring(t)
	long := FederatedCursor{Kind: 4, Principal: testPrincipal, Expires: testNow.Add(time.Second)}
	for i := range MaxCursorEntries {
		long.Next = append(long.Next, ServerCursor{Server: uint8(i), Cursor: strings.Repeat("c", MaxUpstreamCursor)})
	}
	for _, c := range []FederatedCursor{testCursor(), {Kind: 2, Expires: testNow.Add(time.Second)}, long} {
		token, err := SealFederatedCursor(kr, c)
		if err != nil {
			t.Fatal(err)
		}
		if len(token) > maxCursorToken {
			t.Fatalf("a token of %d characters, over the bound %d", len(token), maxCursorToken)
		}
		got, err := OpenFederatedCursor(kr, token, c.Kind, c.Principal, testNow)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, c) {
			t.Errorf("opened %+v, sealed %+v", got, c)
		}
	}
}

// TestCursorSealBounds: SealFederatedCursor refuses what the codec would
// refuse to open.
func TestCursorSealBounds(t *testing.T) {
	kr := testKeyring(t)
	many := testCursor()
	many.Next = nil
	for i := range MaxCursorEntries + 1 {
		many.Next = append(many.Next, ServerCursor{Server: uint8(i), Cursor: "c"})
	}
	for name, next := range map[string][]ServerCursor{
		"a cursor over 4 KiB":  {{Server: 0, Cursor: strings.Repeat("c", MaxUpstreamCursor+1)}},
		"an empty cursor":      {{Server: 0, Cursor: ""}},
		"servers repeated":     {{Server: 1, Cursor: "a"}, {Server: 1, Cursor: "b"}},
		"servers out of order": {{Server: 2, Cursor: "a"}, {Server: 1, Cursor: "b"}},
		"65 entries":           many.Next,
	} {
		c := testCursor()
		c.Next = next
		if _, err := SealFederatedCursor(kr, c); !errors.Is(err, ErrCursorTooLarge) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestCursorAttacks: a cursor of another list, of another principal,
// expired, tampered, oversized, of another kind of token or key is
// refused, each with ErrCursorInvalid.
func TestCursorAttacks(t *testing.T) {
	kr := testKeyring(t)
	c := testCursor()
	token, err := SealFederatedCursor(kr, c)
	if err != nil {
		t.Fatal(err)
	}
	tampered := []byte(token)
	tampered[len(tampered)/2] ^= 'A' ^ 'B'
	if tampered[len(tampered)/2] == token[len(token)/2] {
		tampered[len(tampered)/2] = 'A'
	}
	saga, err := SealSaga(kr, testSaga())
	if err != nil {
		t.Fatal(err)
	}
	other := testKeyring(t, bytes.Repeat([]byte{0x5a}, KeySize))
	for _, tc := range []struct {
		name      string
		kr        *Keyring
		token     string
		kind      uint8
		principal [16]byte
		now       time.Time
		expired   bool
	}{
		{"another list", kr, token, c.Kind + 1, c.Principal, testNow, false},
		{"another principal", kr, token, c.Kind, [16]byte{0xee}, testNow, false},
		{"expired", kr, token, c.Kind, c.Principal, c.Expires, true},
		{"tampered", kr, string(tampered), c.Kind, c.Principal, testNow, false},
		{"oversized", kr, strings.Repeat("A", maxCursorToken+1), c.Kind, c.Principal, testNow, false},
		{"a sagaToken", kr, saga, c.Kind, c.Principal, testNow, false},
		{"another key", other, token, c.Kind, c.Principal, testNow, false},
	} {
		_, err := OpenFederatedCursor(tc.kr, tc.token, tc.kind, tc.principal, tc.now)
		if !errors.Is(err, ErrCursorInvalid) || errors.Is(err, ErrCursorExpired) != tc.expired {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	// An oversized token is refused before it is decoded or opened.
	if _, err := OpenFederatedCursor(kr, strings.Repeat("A", maxCursorToken+1), c.Kind, c.Principal, testNow); err == nil || !strings.Contains(err.Error(), "too long") {
		t.Errorf("oversized: %v", err)
	}
	if _, err := OpenSaga(kr, token, testNow); err == nil {
		t.Error("a federated cursor opened as a sagaToken")
	}
	if _, err := OpenFederatedCursor(kr, token, c.Kind, c.Principal, testNow); err != nil {
		t.Errorf("the genuine cursor: %v", err)
	}
}

// FuzzDecodeCursor: the decoder accepts exactly what encode produces (a
// decoded plaintext encodes back to itself) and never panics.
func FuzzDecodeCursor(f *testing.F) {
	c := testCursor()
	f.Add(c.encode(nil))
	f.Add((&FederatedCursor{}).encode(nil))
	f.Add([]byte{cursorVersion, 1, 0x80})
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := decodeCursor(b)
		if err != nil {
			return
		}
		if err := c.check(); err != nil {
			t.Fatalf("decoded a cursor beyond the bounds: %v", err)
		}
		if got := c.encode(nil); !bytes.Equal(got, b) {
			t.Fatalf("re-encoded %x, decoded from %x", got, b)
		}
	})
}
