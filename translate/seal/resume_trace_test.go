package seal

import (
	"reflect"
	"testing"
	"time"
)

// Resumable requestStates minted by the gateway before states carried a
// trace (at c4d948b), under goldenKey: without a home (version 1) and with
// one (version 2).
const (
	goldenResume     = "AUJe1OQuDxE39iYU15Cd1OGe_IL68FhURtBwOQtAVCEdkzXEviqwO8iq-WyOWKIbuRrG0Rr7JhGZUO48NOZIQn4ViuZLeQ3tprph4TlcVvjfpkUaEx1chRb6ZnCXwaYDF0D9eYzKjbXV2OQZQ83qaPRMlPXGxhPX7IrXCSiF8VOsYXQ2vAkUuNQ5DIrAG3wBBmUL7w5td5dDanSbeEjunozAlAN4mvFqEhOJ6rPQscnolR02shqEFoD24jpRaXLo9cB-"
	goldenResumeHome = "AUJe1OQsc58-xdpLeKKGONg0a_UPUSy0nmqjgSGEuvfRacV8DPRzTAG0_hYFsOz7aG8-oAZ0v_KI3Q8qPpU5DRDX-I0QtIfblkKIglbMveYcV7f1uv2OHkwsg0sdOr8bc_SDcG4Y2cRx0AHOzfNwL85pYjj0AmFw7ClI1MbMp8xGs3ECDukv4kSZwoa8R9-IeqbA6NFUilkyoizL52q9MOm22qysAfA8vyA8oAK-d4e0vAbi6qrpBwfn1pghilJkLIiH2_EvObvs7HA5bVuN1k7hFUMr744EIqhplxo"
)

func goldenResumeState() ResumeState {
	return ResumeState{Upstream: "http://10.0.0.2:9000/mcp", Session: "S1", Version: "2025-11-25", CallID: []byte(`"gw-7"`), After: "e3", Seen: 2,
		Inputs: []ResumeInput{{ID: []byte(`1`), Key: "elicitation-1", Method: "elicitation/create"}}, Keys: []byte{1}, ServerInfo: []byte(`{"name":"s"}`),
		Round: 1, Principal: [16]byte{3}, Digest: [16]byte{4}, Place: [16]byte{5}, Started: time.UnixMilli(1_800_000_000_123), Expires: time.Unix(1_800_000_600, 0)}
}

// TestResumeGoldenBeforeTrace: states minted before the trace existed go on
// opening, and a state without a trace is still sealed byte for byte as
// then (versions 1 and 2), so that a fleet's older instances open it.
func TestResumeGoldenBeforeTrace(t *testing.T) {
	kr, err := NewKeyring(goldenKey)
	if err != nil {
		t.Fatal(err)
	}
	issued := time.Unix(1_800_000_000, 0)
	plain := goldenResumeState()
	home := goldenResumeState()
	home.Home, home.HomeAddress = "gw-a", "http://10.0.0.1:8080"
	for golden, want := range map[string]ResumeState{goldenResume: plain, goldenResumeHome: home} {
		_, got, err := OpenRequestState(kr, golden, issued)
		if err != nil || got == nil || !reflect.DeepEqual(*got, want) {
			t.Errorf("golden %.20s…: %+v, %v", golden, got, err)
			continue
		}
		fresh, err := SealResume(kr, want)
		if err != nil {
			t.Fatal(err)
		}
		sameToken(t, kr, "resume", resumePurpose, golden, fresh)
	}
}

// TestResumeTrace: a state with a trace (with and without a home) is
// version 3 and opens with it; a version 3 plaintext without one, or with
// an address but no home, is refused.
func TestResumeTrace(t *testing.T) {
	kr, err := NewKeyring(goldenKey)
	if err != nil {
		t.Fatal(err)
	}
	issued := time.Unix(1_800_000_000, 0)
	trace := TraceRef{TraceID: [16]byte{0x4b, 0xf9}, SpanID: [8]byte{0, 0xf0, 0x67}, Flags: 1}
	for _, withHome := range []bool{false, true} {
		s := goldenResumeState()
		s.Trace = trace
		if withHome {
			s.Home, s.HomeAddress = "gw-a", "http://10.0.0.1:8080"
		}
		plain := s.encode(nil)
		if plain[0] != resumeVersionTrace {
			t.Errorf("version %d, want %d", plain[0], resumeVersionTrace)
		}
		token, err := SealResume(kr, s)
		if err != nil {
			t.Fatal(err)
		}
		_, got, err := OpenRequestState(kr, token, issued)
		if err != nil || got == nil || !reflect.DeepEqual(*got, s) {
			t.Errorf("home %t: %+v, %v", withHome, got, err)
		}
	}
	s := goldenResumeState()
	s.Trace = trace
	noTrace := s.encode(nil)
	clear(noTrace[len(noTrace)-25:])
	addressOnly := goldenResumeState()
	addressOnly.Trace, addressOnly.HomeAddress = trace, "http://10.0.0.1:8080"
	for name, plain := range map[string][]byte{"zero trace": noTrace, "address without home": addressOnly.encode(nil)} {
		if _, got, err := OpenRequestState(kr, kr.Seal(resumePurpose, plain), issued); err == nil {
			t.Errorf("%s: opened %+v", name, got)
		}
	}
}
