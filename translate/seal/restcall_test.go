package seal

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func testRESTCall() RESTCall {
	return RESTCall{
		Principal: testPrincipal, Tool: "ask", ID: "order-42", IdempotencyKey: "k-1", Status: "awaitingElicitationResult",
		ETag: "33a649d4", Arguments: json.RawMessage(`{"topic":"tea"}`),
		Inputs: []RESTInput{
			{Key: "a", Method: "elicitation/create", Params: json.RawMessage(`{"message":"Sure?"}`), Answer: json.RawMessage(`{"action":"accept"}`)},
			{Key: "b", Method: "sampling/createMessage", Params: json.RawMessage(`{"messages":[]}`)},
		},
		RequestState: "opaque", Progress: json.RawMessage(`{"progress":1}`), Created: 1, Updated: 2, Owner: "gw-0", Lease: 3,
	}
}

// TestRESTCallRoundTrip: a record seals and opens to itself.
func TestRESTCallRoundTrip(t *testing.T) {
	kr := testKeyring(t)
	done := RESTCall{Tool: "t", ID: "i", Status: "success", Result: json.RawMessage(`{"content":[]}`)}
	tasked := RESTCall{Tool: "t", ID: "i", Status: "running", TaskID: "sealed-task-id", Owner: "gw-0", Lease: 3}
	for _, c := range []RESTCall{testRESTCall(), {}, done, tasked} {
		sealed, err := SealRESTCall(kr, "p/k", c)
		if err != nil {
			t.Fatal(err)
		}
		got, err := OpenRESTCall(kr, "p/k", sealed)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, c) {
			t.Fatalf("opened %+v, sealed %+v", got, c)
		}
	}
}

// TestRESTCallBounds: a record beyond any bound is not sealed.
func TestRESTCallBounds(t *testing.T) {
	kr := testKeyring(t)
	for name, mod := range map[string]func(*RESTCall){
		"tool":      func(c *RESTCall) { c.Tool = strings.Repeat("n", MaxRESTName+1) },
		"id":        func(c *RESTCall) { c.ID = strings.Repeat("n", MaxRESTName+1) },
		"key":       func(c *RESTCall) { c.IdempotencyKey = strings.Repeat("k", MaxRESTShort+1) },
		"arguments": func(c *RESTCall) { c.Arguments = make([]byte, MaxRESTArguments+1) },
		"state":     func(c *RESTCall) { c.RequestState = strings.Repeat("s", MaxRESTState+1) },
		"inputs":    func(c *RESTCall) { c.Inputs = make([]RESTInput, MaxRESTInputs+1) },
		"params":    func(c *RESTCall) { c.Inputs[0].Params = make([]byte, MaxRESTParams+1) },
		"result":    func(c *RESTCall) { c.Result = make([]byte, MaxRESTPayload+1) },
		"progress":  func(c *RESTCall) { c.Progress = make([]byte, MaxRESTParams+1) },
		"task":      func(c *RESTCall) { c.TaskID = strings.Repeat("t", MaxRESTTask+1) },
	} {
		c := testRESTCall()
		mod(&c)
		if _, err := SealRESTCall(kr, "p/k", c); !errors.Is(err, ErrRESTTooLarge) {
			t.Errorf("%s: %v, want ErrRESTTooLarge", name, err)
		}
	}
}

// TestRESTCallRefusals: tampered, other-purpose, other-key records, and
// roots bound to their principal.
func TestRESTCallRefusals(t *testing.T) {
	kr := testKeyring(t)
	sealed, err := SealRESTCall(kr, "p/k", testRESTCall())
	if err != nil {
		t.Fatal(err)
	}
	b := bytes.Clone(sealed)
	b[len(b)/2] ^= 1
	if _, err := OpenRESTCall(kr, "p/k", b); !errors.Is(err, ErrRESTInvalid) {
		t.Errorf("tampered: %v", err)
	}
	task, _ := SealTaskRecord(kr, TaskRecord{Tool: "t"})
	if _, err := OpenRESTCall(kr, "p/k", task); !errors.Is(err, ErrRESTInvalid) {
		t.Errorf("a task record opened as a REST call: %v", err)
	}
	if _, err := OpenTaskRecord(kr, sealed); err == nil {
		t.Error("a REST call opened as a task record")
	}
	other := testKeyring(t, bytes.Repeat([]byte{0x5a}, KeySize))
	if _, err := OpenRESTCall(other, "p/k", sealed); !errors.Is(err, ErrRESTInvalid) {
		t.Errorf("another key: %v", err)
	}
	roots, err := SealRESTRoots(kr, testPrincipal, []byte(`{"roots":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := OpenRESTRoots(kr, testPrincipal, roots); err != nil || string(got) != `{"roots":[]}` {
		t.Errorf("roots: %q %v", got, err)
	}
	if _, err := OpenRESTRoots(kr, [16]byte{9}, roots); !errors.Is(err, ErrRESTInvalid) {
		t.Errorf("another principal's roots: %v", err)
	}
	if _, err := OpenRESTCall(kr, "p/k", roots); !errors.Is(err, ErrRESTInvalid) {
		t.Errorf("roots opened as a REST call: %v", err)
	}
}

// TestRESTCallPlace: a record opens at the place it was sealed for and
// nowhere else; a record of an older gateway opens with OpenRESTCallV1
// only.
func TestRESTCallPlace(t *testing.T) {
	kr := testKeyring(t)
	c := testRESTCall()
	c.Version = 7
	sealed, err := SealRESTCall(kr, "rest/p/calls/ask/order-42", c)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := OpenRESTCall(kr, "rest/p/calls/ask/order-42", sealed); err != nil || got.Version != 7 {
		t.Fatalf("at its place: %+v %v", got, err)
	}
	for _, place := range []string{"rest/p/calls/ask/order-43", "rest/q/calls/ask/order-42", ""} {
		if _, err := OpenRESTCall(kr, place, sealed); !errors.Is(err, ErrRESTInvalid) {
			t.Errorf("moved to %q: %v", place, err)
		}
	}
	if _, err := OpenRESTCallV1(kr, sealed); !errors.Is(err, ErrRESTInvalid) {
		t.Errorf("a placed record opened as an old one: %v", err)
	}
	b, _ := encodeRESTCall(&c)
	old := []byte(kr.Seal(restCallPurposeV1, b))
	if got, err := OpenRESTCallV1(kr, old); err != nil || got.ID != c.ID {
		t.Errorf("an old record: %+v %v", got, err)
	}
	if _, err := OpenRESTCall(kr, "rest/p/calls/ask/order-42", old); !errors.Is(err, ErrRESTInvalid) {
		t.Errorf("an old record opened as a placed one: %v", err)
	}
}

// FuzzDecodeRESTCall: the decoder never panics, accepts only records
// within the bounds, and what it accepts encodes to a plaintext that
// decodes to the same record.
func FuzzDecodeRESTCall(f *testing.F) {
	c := testRESTCall()
	b, _ := encodeRESTCall(&c)
	f.Add(b)
	f.Add([]byte{restCallVersion, '{', '}'})
	f.Add([]byte{restCallVersion, '{', '"', 't', '"', ':', '1', '}'})
	c.Trace = testTrace
	b, _ = encodeRESTCall(&c)
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := decodeRESTCall(b)
		if err != nil {
			return
		}
		if err := c.check(); err != nil {
			t.Fatalf("decoded a record beyond the bounds: %v", err)
		}
		again, err := encodeRESTCall(&c)
		if err != nil {
			t.Fatalf("re-encoding: %v", err)
		}
		c2, err := decodeRESTCall(again)
		if err != nil || !reflect.DeepEqual(c, c2) {
			t.Fatalf("re-encoded record decodes to %+v (%v), want %+v", c2, err, c)
		}
	})
}
