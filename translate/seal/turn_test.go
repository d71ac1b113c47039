package seal

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func testTurn() TurnState {
	return TurnState{
		ID: [16]byte{7, 8, 9}, Principal: testPrincipal, Session: [16]byte{'s', 'i', 'd'}, Expires: testNow.Add(5 * time.Minute),
		CallID: []byte(`"call-1"`), Name: "ask", Arguments: []byte(`{"topic":"tea"}`), RequestState: "opaque-state",
		Upstream: "http://127.0.0.1:9/mcp",
		Inputs:   []TurnInput{{Key: "elicitation-1", Kind: TurnElicitation}, {Key: "toast", Kind: TurnSampling}, {Key: "r", Kind: TurnRoots}},
	}
}

// TestTurnRoundTrip: a state seals and opens to itself, at its bounds too,
// and its token is no longer than MaxTurnToken.
func TestTurnRoundTrip(t *testing.T) {
	kr := testKeyring(t)
	long := testTurn()
	long.CallID = []byte(`"` + strings.Repeat("i", MaxTurnCallID-2) + `"`)
	long.Name = strings.Repeat("n", MaxTurnName)
	long.Arguments = bytes.Repeat([]byte{'a'}, 2048)
	long.Upstream = strings.Repeat("u", MaxTurnUpstream)
	long.Inputs = nil
	for range MaxTurnInputs {
		long.Inputs = append(long.Inputs, TurnInput{Key: strings.Repeat("k", MaxTurnKey), Kind: TurnSampling})
	}
	long.RequestState = ""
	// Fill up to the whole bound (its length takes one more byte).
	long.RequestState = strings.Repeat("s", MaxTurnPlain-len(long.encode(nil))-1)
	for _, s := range []TurnState{testTurn(), {Expires: testNow.Add(time.Second)}, long} {
		token, err := SealTurn(kr, s)
		if err != nil {
			t.Fatal(err)
		}
		if len(token) > MaxTurnToken {
			t.Fatalf("token of %d bytes, bound %d", len(token), MaxTurnToken)
		}
		got, err := OpenTurn(kr, token, testNow)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, s) {
			t.Fatalf("opened %+v, sealed %+v", got, s)
		}
	}
	long.RequestState += "s"
	if _, err := SealTurn(kr, long); !errors.Is(err, ErrTurnTooLarge) {
		t.Fatalf("a state one byte over the whole bound: %v", err)
	}
}

// TestTurnBounds: a state beyond any field's bound is not sealed.
func TestTurnBounds(t *testing.T) {
	kr := testKeyring(t)
	for name, mod := range map[string]func(*TurnState){
		"call id":   func(s *TurnState) { s.CallID = make([]byte, MaxTurnCallID+1) },
		"name":      func(s *TurnState) { s.Name = strings.Repeat("n", MaxTurnName+1) },
		"arguments": func(s *TurnState) { s.Arguments = make([]byte, MaxTurnArguments+1) },
		"state":     func(s *TurnState) { s.RequestState = strings.Repeat("s", MaxTurnState+1) },
		"upstream":  func(s *TurnState) { s.Upstream = strings.Repeat("u", MaxTurnUpstream+1) },
		"inputs":    func(s *TurnState) { s.Inputs = make([]TurnInput, MaxTurnInputs+1) },
		"key":       func(s *TurnState) { s.Inputs[0].Key = strings.Repeat("k", MaxTurnKey+1) },
		"kind":      func(s *TurnState) { s.Inputs[0].Kind = 9 },
	} {
		s := testTurn()
		mod(&s)
		if _, err := SealTurn(kr, s); !errors.Is(err, ErrTurnTooLarge) {
			t.Errorf("%s: %v, want ErrTurnTooLarge", name, err)
		}
	}
}

// TestTurnRefusals: tampered, expired, other-purpose, other-key and
// oversized tokens.
func TestTurnRefusals(t *testing.T) {
	kr := testKeyring(t)
	token, err := SealTurn(kr, testTurn())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := OpenTurn(kr, tamper(token), testNow); !errors.Is(err, ErrTurnInvalid) {
		t.Errorf("tampered: %v", err)
	}
	if _, err := OpenTurn(kr, token, testNow.Add(time.Hour)); !errors.Is(err, ErrTurnExpired) {
		t.Errorf("expired: %v", err)
	}
	saga, _ := SealSaga(kr, testSaga())
	if _, err := OpenTurn(kr, saga, testNow); !errors.Is(err, ErrTurnInvalid) {
		t.Errorf("a sagaToken opened as a turn: %v", err)
	}
	if _, err := OpenSaga(kr, token, testNow); err == nil {
		t.Error("a turn opened as a sagaToken")
	}
	if _, _, err := OpenRequestState(kr, token, testNow); err == nil {
		t.Error("a turn opened as a requestState")
	}
	if _, err := OpenTurn(kr, strings.Repeat("A", MaxTurnToken+1), testNow); !errors.Is(err, ErrTurnInvalid) {
		t.Errorf("oversized: %v", err)
	}
	other := testKeyring(t, bytes.Repeat([]byte{0x5a}, KeySize))
	if _, err := OpenTurn(other, token, testNow); !errors.Is(err, ErrTurnInvalid) {
		t.Errorf("another key: %v", err)
	}
}

// FuzzDecodeTurn: the decoder accepts exactly what encode produces (a
// decoded plaintext encodes back to itself, within the bounds) and never
// panics.
func FuzzDecodeTurn(f *testing.F) {
	s := testTurn()
	f.Add(s.encode(nil))
	f.Add((&TurnState{}).encode(nil))
	f.Add([]byte{turnVersion, 0x80})
	s.Trace = testTrace
	f.Add(s.encode(nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := decodeTurn(b)
		if err != nil {
			return
		}
		if err := s.check(); err != nil {
			t.Fatalf("decoded a state beyond the bounds: %v", err)
		}
		got := s.encode(nil)
		if !bytes.Equal(got, b) {
			t.Fatalf("re-encoded %x, decoded from %x", got, b)
		}
		if len(got) > MaxTurnPlain {
			t.Fatalf("decoded a plaintext of %d bytes", len(got))
		}
	})
}
