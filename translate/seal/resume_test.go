package seal

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func testResume() ResumeState {
	return ResumeState{
		Upstream: "http://127.0.0.1:9000/mcp", Session: "S3SS10N", Version: "2025-11-25",
		CallID: []byte(`"gw-7"`), After: "stream_3", Seen: 2,
		Inputs: []ResumeInput{{ID: []byte(`1`), Key: "elicitation-1", Method: "elicitation/create"},
			{ID: []byte(`"x"`), Key: "name", Method: "elicitation/create"}},
		Keys: []byte{1, 2, 3}, ServerInfo: []byte(`{"name":"s","version":"1"}`), Round: 2, Principal: testPrincipal, Digest: testDigest, Place: [16]byte{9, 8, 7},
		Started: time.UnixMilli(testNow.UnixMilli() - 1234), Expires: testNow.Add(5 * time.Minute),
	}
}

func TestResumeRoundTrip(t *testing.T) {
	kr := testKeyring(t)
	long := testResume()
	long.Upstream = strings.Repeat("u", MaxResumeUpstream)
	long.Session = strings.Repeat("s", MaxResumeShort)
	long.After = strings.Repeat("a", MaxResumeShort)
	long.Round, long.Seen = 1<<32-1, 1<<32-1
	for i := range 8 {
		long.Inputs = append(long.Inputs, ResumeInput{ID: bytes.Repeat([]byte{'1'}, MaxResumeID), Key: strings.Repeat("k", 100), Method: "elicitation/create" + string(rune('a'+i))})
	}
	home := testResume()
	home.Home, home.HomeAddress = "gw-a", "http://10.0.0.1:8080"
	homeOnly := testResume()
	homeOnly.Home = "gw-b"
	long.Home, long.HomeAddress = strings.Repeat("h", 100), "http://10.0.0.1:8080"
	for _, s := range []ResumeState{testResume(), {Expires: testNow.Add(time.Second), Started: time.UnixMilli(0)}, long, home, homeOnly} {
		token, err := SealResume(kr, s)
		if err != nil {
			t.Fatal(err)
		}
		st, got, err := OpenRequestState(kr, token, testNow)
		if err != nil || got == nil || st != (State{}) {
			t.Fatalf("open: %v %v", got, err)
		}
		if !reflect.DeepEqual(*got, s) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", *got, s)
		}
	}
}

func TestResumeBounds(t *testing.T) {
	kr := testKeyring(t)
	for name, f := range map[string]func(*ResumeState){
		"upstream": func(s *ResumeState) { s.Upstream = strings.Repeat("u", MaxResumeUpstream+1) },
		"session":  func(s *ResumeState) { s.Session = strings.Repeat("s", MaxResumeShort+1) },
		"callID":   func(s *ResumeState) { s.CallID = bytes.Repeat([]byte{'1'}, MaxResumeID+1) },
		"inputs":   func(s *ResumeState) { s.Inputs = make([]ResumeInput, MaxResumeInputs+1) },
		"inputKey": func(s *ResumeState) { s.Inputs[0].Key = strings.Repeat("k", MaxResumeShort+1) },
		"keys":     func(s *ResumeState) { s.Keys = make([]byte, MaxResumeKeys+1) },
		"info":     func(s *ResumeState) { s.ServerInfo = make([]byte, MaxResumeInfo+1) },
		"home":     func(s *ResumeState) { s.Home = strings.Repeat("h", MaxResumeShort+1) },
		"homeAddress": func(s *ResumeState) {
			s.Home, s.HomeAddress = "gw-a", strings.Repeat("a", MaxResumeUpstream+1)
		},
		"address without home": func(s *ResumeState) { s.HomeAddress = "http://10.0.0.1:8080" },
		"total": func(s *ResumeState) {
			for range MaxResumeInputs - 2 {
				s.Inputs = append(s.Inputs, ResumeInput{ID: bytes.Repeat([]byte{'1'}, MaxResumeID)})
			}
		},
	} {
		s := testResume()
		f(&s)
		if _, err := SealResume(kr, s); !errors.Is(err, ErrResumeTooLarge) {
			t.Errorf("%s: %v, want ErrResumeTooLarge", name, err)
		}
	}
}

func TestResumeKinds(t *testing.T) {
	kr := testKeyring(t)
	token, _ := SealResume(kr, testResume())
	// A resumable state never opens as a held one, nor the other way.
	if _, err := OpenState(kr, token, testNow); !errors.Is(err, ErrStateInvalid) {
		t.Fatalf("OpenState of a resume token: %v", err)
	}
	held := SealState(kr, testState())
	st, rs, err := OpenRequestState(kr, held, testNow)
	if err != nil || rs != nil || st != testState() {
		t.Fatalf("OpenRequestState of a held state: %+v %v %v", st, rs, err)
	}
	// Expired: the state comes back with the error.
	_, rs, err = OpenRequestState(kr, token, testNow.Add(time.Hour))
	if !errors.Is(err, ErrStateExpired) || rs == nil || rs.Session != "S3SS10N" {
		t.Fatalf("expired: %v %v", rs, err)
	}
	// Tampered, other key, other purpose, too long.
	other := testKeyring(t, bytes.Repeat([]byte{9}, KeySize))
	pin := kr.Seal("mcp-gateway/pin/v1", []byte("x"))
	for name, tok := range map[string]string{
		"tampered": tamper(token), "other key": mustSealResume(t, other), "other purpose": pin,
		"too long": strings.Repeat("A", maxResumeToken+1), "empty": "",
	} {
		if _, _, err := OpenRequestState(kr, tok, testNow); !errors.Is(err, ErrStateInvalid) || !errors.Is(err, ErrUnsealable) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func mustSealResume(t *testing.T, kr *Keyring) string {
	t.Helper()
	tok, err := SealResume(kr, testResume())
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// FuzzDecodeResume: the decoder accepts exactly what encode produces (a
// decoded plaintext encodes back to itself) and never panics.
func FuzzDecodeResume(f *testing.F) {
	s := testResume()
	f.Add(s.encode(nil))
	f.Add((&ResumeState{}).encode(nil))
	f.Add([]byte{resumeVersion, 0x80})
	s.Home, s.HomeAddress = "gw-a", "http://10.0.0.1:8080"
	f.Add(s.encode(nil))
	s.Trace = TraceRef{TraceID: [16]byte{1}, SpanID: [8]byte{2}, Flags: 1}
	f.Add(s.encode(nil))
	s.Home, s.HomeAddress = "", ""
	f.Add(s.encode(nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := decodeResume(b)
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
