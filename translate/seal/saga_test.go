package seal

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func testSaga() SagaState {
	return SagaState{
		ID: [16]byte{1, 2, 3}, Principal: testPrincipal, Expires: testNow.Add(5 * time.Minute),
		Name: "ask", Arguments: []byte(`{"topic":"tea"}`), RequestState: "opaque-state",
		Steps: []SagaStep{{ID: "elicitation-1", Kind: SagaElicitation}, {ID: "toast", Kind: SagaSampling}, {ID: "roots-1", Kind: SagaRoots}},
	}
}

// TestSagaRoundTrip: a state seals and opens to itself, at its bounds too.
func TestSagaRoundTrip(t *testing.T) {
	kr := testKeyring(t)
	long := testSaga()
	long.Name = strings.Repeat("n", MaxSagaName)
	long.Arguments = bytes.Repeat([]byte{'a'}, MaxSagaArguments)
	long.RequestState = strings.Repeat("s", MaxSagaState)
	long.Steps = nil
	for range MaxSagaSteps {
		long.Steps = append(long.Steps, SagaStep{ID: strings.Repeat("k", MaxSagaStepID), Kind: SagaSampling})
	}
	for _, s := range []SagaState{testSaga(), {Expires: testNow.Add(time.Second)}, long} {
		token, err := SealSaga(kr, s)
		if err != nil {
			t.Fatal(err)
		}
		got, err := OpenSaga(kr, token, testNow)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, s) {
			t.Fatalf("opened %+v, sealed %+v", got, s)
		}
	}
}

// TestSagaBounds: a state beyond any bound is not sealed.
func TestSagaBounds(t *testing.T) {
	kr := testKeyring(t)
	for name, mod := range map[string]func(*SagaState){
		"name":      func(s *SagaState) { s.Name = strings.Repeat("n", MaxSagaName+1) },
		"arguments": func(s *SagaState) { s.Arguments = make([]byte, MaxSagaArguments+1) },
		"state":     func(s *SagaState) { s.RequestState = strings.Repeat("s", MaxSagaState+1) },
		"steps":     func(s *SagaState) { s.Steps = make([]SagaStep, MaxSagaSteps+1) },
		"step id":   func(s *SagaState) { s.Steps[0].ID = strings.Repeat("k", MaxSagaStepID+1) },
		"step kind": func(s *SagaState) { s.Steps[0].Kind = 9 },
	} {
		s := testSaga()
		mod(&s)
		if _, err := SealSaga(kr, s); !errors.Is(err, ErrSagaTooLarge) {
			t.Errorf("%s: %v, want ErrSagaTooLarge", name, err)
		}
	}
}

// TestSagaRefusals: tampered, expired, other-purpose and oversized tokens.
func TestSagaRefusals(t *testing.T) {
	kr := testKeyring(t)
	token, err := SealSaga(kr, testSaga())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := OpenSaga(kr, tamper(token), testNow); !errors.Is(err, ErrSagaInvalid) {
		t.Errorf("tampered: %v", err)
	}
	if _, err := OpenSaga(kr, token, testNow.Add(time.Hour)); !errors.Is(err, ErrSagaExpired) {
		t.Errorf("expired: %v", err)
	}
	resume, _ := SealResume(kr, testResume())
	if _, err := OpenSaga(kr, resume, testNow); !errors.Is(err, ErrSagaInvalid) {
		t.Errorf("a resumable requestState opened as a sagaToken: %v", err)
	}
	if _, _, err := OpenRequestState(kr, token, testNow); err == nil {
		t.Error("a sagaToken opened as a requestState")
	}
	if _, err := OpenSaga(kr, strings.Repeat("A", maxSagaToken+1), testNow); !errors.Is(err, ErrSagaInvalid) {
		t.Errorf("oversized: %v", err)
	}
	other := testKeyring(t, bytes.Repeat([]byte{0x5a}, KeySize))
	if _, err := OpenSaga(other, token, testNow); !errors.Is(err, ErrSagaInvalid) {
		t.Errorf("another key: %v", err)
	}
}

// FuzzDecodeSaga: the decoder accepts exactly what encode produces (a
// decoded plaintext encodes back to itself) and never panics.
func FuzzDecodeSaga(f *testing.F) {
	s := testSaga()
	f.Add(s.encode(nil))
	f.Add((&SagaState{}).encode(nil))
	f.Add([]byte{sagaVersion, 0x80})
	s.Trace = testTrace
	f.Add(s.encode(nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := decodeSaga(b)
		if err != nil {
			return
		}
		if err := s.check(); err != nil {
			t.Fatalf("decoded a state beyond the bounds: %v", err)
		}
		if got := s.encode(nil); !bytes.Equal(got, b) {
			t.Fatalf("re-encoded %x, decoded from %x", got, b)
		}
	})
}
