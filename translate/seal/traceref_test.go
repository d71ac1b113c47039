package seal

import (
	"bytes"
	"encoding/hex"
	"reflect"
	"strings"
	"testing"
	"time"
)

// A sagaToken, a turn token and a REST call record minted by the gateway
// before they carried a trace (at 4bf60db), under goldenKey.
const (
	goldenSaga    = "AUJe1OSi_o-BSJlDqPlY8DCJmDQ4nOVHg-JwHabH_r5xaXy4y9J5yYwMA4bfULxOYQ4736Mzd_K0fUmVSz0CyIRyUwW7UVnBF-8EuBmkCjq4elp_0ixpJlwS35fVRdeizrVs0ArIn5tmpXoP"
	goldenTurn    = "AUJe1ORdaiyC5UY82IEYfNgc75dgnrYsR9VFKOLDjMJh7PmazzRXyewfJU52nS5yEK4LVuIeWGSZm_YF9cGemdYGROYeFq-_vRkMlyP9HLmkBxq8YC4t68TtK_osK8JoItJJFXMywiWOCo0I9gWE4MpRfIUb9RdA0VIpvlhHjFVtp4zHdUsNU2pkWN2kupxFg8M"
	goldenRESTHex = "01425ed4e4b5360f0cd4397d832b66dfa3dd57feaf8cb616db39109bcf47680bc6fed0685bfa398183d83391e2996e13a7bf5720cc8a157b93e1f3f65ff018cf2981c87f347d277769eb96fa7a70b1bdc591584c799981ad1da184d502d1ee77b9bc1cd602bde1919382ea6d69617aeb51db375231a3e0b22fc553d3ae33d04a33a957f25ee8b94aef5c7a8417d20eb45269070cd90d22c6fd45527b8410874a928a401dfa2021fb1477d476f897c4110ec944262f394c9e59"
	goldenRESTAt  = "rest/calls/x"
)

var (
	goldenExpires = time.Unix(1_800_000_600, 0)
	goldenSagaSt  = SagaState{ID: [16]byte{1}, Principal: [16]byte{2}, Expires: goldenExpires, Name: "ask",
		Arguments: []byte(`{"q":"tea"}`), RequestState: "rs-1", Steps: []SagaStep{{ID: "elicitation-1", Kind: SagaElicitation}}}
	goldenTurnSt = TurnState{ID: [16]byte{1}, Principal: [16]byte{2}, Session: [16]byte{3}, Expires: goldenExpires,
		CallID: []byte(`7`), Name: "ask", Arguments: []byte(`{"q":"tea"}`), RequestState: "rs-1", Upstream: "http://10.0.0.2/mcp",
		Inputs: []TurnInput{{Key: "elicitation-1", Kind: TurnElicitation}}}
	goldenRESTCall = RESTCall{Principal: [16]byte{2}, Tool: "ask", ID: "c1", IdempotencyKey: "k1", Status: "running", ETag: "e1",
		Arguments: []byte(`{"q":"tea"}`), Created: 1_800_000_000_123, Updated: 1_800_000_000_123, Version: 2}
)

// TestFaceTokensGoldenBeforeTrace: a sagaToken, a turn token and a REST
// call record minted before they carried a trace go on opening, and one
// without a trace is still sealed byte for byte as then, so that a fleet's
// older instances open it.
func TestFaceTokensGoldenBeforeTrace(t *testing.T) {
	kr, err := NewKeyring(goldenKey)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_800_000_000, 0)
	if got, err := OpenSaga(kr, goldenSaga, now); err != nil || !reflect.DeepEqual(got, goldenSagaSt) {
		t.Errorf("golden saga: %+v, %v", got, err)
	}
	saga, err := SealSaga(kr, goldenSagaSt)
	if err != nil {
		t.Fatal(err)
	}
	sameToken(t, kr, "saga", sagaPurpose, goldenSaga, saga)

	if got, err := OpenTurn(kr, goldenTurn, now); err != nil || !reflect.DeepEqual(got, goldenTurnSt) {
		t.Errorf("golden turn: %+v, %v", got, err)
	}
	turn, err := SealTurn(kr, goldenTurnSt)
	if err != nil {
		t.Fatal(err)
	}
	sameToken(t, kr, "turn", turnPurpose, goldenTurn, turn)

	rec, _ := hex.DecodeString(goldenRESTHex)
	if got, err := OpenRESTCall(kr, goldenRESTAt, rec); err != nil || !reflect.DeepEqual(got, goldenRESTCall) {
		t.Errorf("golden REST call: %+v, %v", got, err)
	}
	want, err := kr.OpenBytes(restCallAt(goldenRESTAt), rec)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := encodeRESTCall(&goldenRESTCall); err != nil || !bytes.Equal(got, want) {
		t.Errorf("REST call plaintext %s, golden %s (%v)", got, want, err)
	}
}

// TestFaceTokensTrace: a sagaToken, a turn token and a REST call record
// with a trace open with it (the binary codecs as version 2); a version 2
// plaintext whose trace is zero, and a record whose trace is not the text
// MarshalText writes, are refused.
func TestFaceTokensTrace(t *testing.T) {
	kr, err := NewKeyring(goldenKey)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_800_000_000, 0)
	saga := goldenSagaSt
	saga.Trace = testTrace
	if plain := saga.encode(nil); plain[0] != sagaVersionTrace {
		t.Errorf("saga version %d, want %d", plain[0], sagaVersionTrace)
	}
	tok, err := SealSaga(kr, saga)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := OpenSaga(kr, tok, now); err != nil || !reflect.DeepEqual(got, saga) {
		t.Errorf("saga with a trace: %+v, %v", got, err)
	}
	turn := goldenTurnSt
	turn.Trace = testTrace
	if plain := turn.encode(nil); plain[0] != turnVersionTrace {
		t.Errorf("turn version %d, want %d", plain[0], turnVersionTrace)
	}
	if tok, err = SealTurn(kr, turn); err != nil {
		t.Fatal(err)
	}
	if got, err := OpenTurn(kr, tok, now); err != nil || !reflect.DeepEqual(got, turn) {
		t.Errorf("turn with a trace: %+v, %v", got, err)
	}
	zeroSaga, zeroTurn := saga.encode(nil), turn.encode(nil)
	clear(zeroSaga[len(zeroSaga)-traceSize:])
	clear(zeroTurn[len(zeroTurn)-traceSize:])
	if got, err := OpenSaga(kr, kr.Seal(sagaPurpose, zeroSaga), now); err == nil {
		t.Errorf("a version 2 saga with a zero trace opened: %+v", got)
	}
	if got, err := OpenTurn(kr, kr.Seal(turnPurpose, zeroTurn), now); err == nil {
		t.Errorf("a version 2 turn with a zero trace opened: %+v", got)
	}

	rec := goldenRESTCall
	rec.Trace = testTrace
	sealed, err := SealRESTCall(kr, goldenRESTAt, rec)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := OpenRESTCall(kr, goldenRESTAt, sealed); err != nil || !reflect.DeepEqual(got, rec) {
		t.Errorf("REST call with a trace: %+v, %v", got, err)
	}
	plain, _ := encodeRESTCall(&rec)
	text, _ := testTrace.MarshalText()
	if !bytes.Contains(plain, []byte(`"tr":"`+string(text)+`"`)) || string(text) != "4bf90000000000000000000000000000-00f0670000000000-01" {
		t.Errorf("REST call's trace: %s", plain)
	}
	for _, bad := range []string{
		"00000000000000000000000000000000-0000000000000000-00", // zero
		"4BF90000000000000000000000000000-00f0670000000000-01", // uppercase
		"4bf90000000000000000000000000000-00f0670000000000-1",  // short
		"4bf90000000000000000000000000000_00f0670000000000-01", // separator
		"4bf9000000000000000000000000000g-00f0670000000000-01", // not hex
	} {
		p := bytes.Replace(plain, text, []byte(bad), 1)
		if got, err := OpenRESTCall(kr, goldenRESTAt, kr.SealBytes(restCallAt(goldenRESTAt), p)); err == nil {
			t.Errorf("a record with trace %q opened: %+v", bad, got.Trace)
		}
	}
}

// TestTurnTraceNeverTooLarge: a turn that fits MaxTurnPlain only without
// its trace is sealed without it, rather than refused.
func TestTurnTraceNeverTooLarge(t *testing.T) {
	kr, err := NewKeyring(goldenKey)
	if err != nil {
		t.Fatal(err)
	}
	st := goldenTurnSt
	st.Arguments = []byte(`"` + strings.Repeat("a", MaxTurnArguments-2) + `"`)
	st.RequestState = strings.Repeat("s", MaxTurnState)
	st.RequestState = st.RequestState[:len(st.RequestState)-(len(st.encode(nil))-MaxTurnPlain)] // exactly full
	if n := len(st.encode(nil)); n != MaxTurnPlain {
		t.Fatalf("the full turn is %d bytes", n)
	}
	st.Trace = testTrace
	tok, err := SealTurn(kr, st)
	if err != nil {
		t.Fatalf("a full turn with a trace: %v", err)
	}
	got, err := OpenTurn(kr, tok, time.Unix(1_800_000_000, 0))
	if err != nil || got.Trace != (TraceRef{}) || got.RequestState != st.RequestState {
		t.Errorf("a full turn: trace %+v, %d bytes of state, %v", got.Trace, len(got.RequestState), err)
	}
}
