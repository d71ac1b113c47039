package seal

import (
	"strings"
	"testing"
)

// A taskId wrapping an upstream's own task (2025 experimental tasks) carries
// the upstream task id and session, round trips at the largest sizes, and
// stays within maxTaskToken.
func TestTask2025RoundTrip(t *testing.T) {
	kr := testKeyring(t, NewRandomKey())
	long := strings.Repeat("x", 255)
	for _, want := range []Task{
		{Instance: "inst-a", Handle: [16]byte{1}, Principal: [16]byte{2}, Upstream: "16b5f692", Session: "sess-1"},
		{Instance: "i", Upstream: "u"}, // an upstream that keeps no session
		{Instance: long, Address: long, Handle: [16]byte{3}, Upstream: long, Session: long},
	} {
		tok := SealTask(kr, want)
		if len(tok) > maxTaskToken {
			t.Fatalf("taskId of %d characters, over maxTaskToken %d", len(tok), maxTaskToken)
		}
		got, err := OpenTask(kr, tok)
		if err != nil || got != want {
			t.Fatalf("OpenTask = %+v, %v; want %+v", got, err, want)
		}
	}
	// Version 2 without an upstream task id, or with bytes left over: malformed.
	for _, b := range [][]byte{
		append([]byte{task2025Version, 0, 0}, append(make([]byte, 32), 0, 0)...),
		append([]byte{task2025Version, 0, 0}, append(make([]byte, 32), 1, 'u', 0, 'z')...),
		append([]byte{task2025Version, 0, 0}, append(make([]byte, 32), 5, 'u')...),
	} {
		if _, err := decodeTask(b); err == nil {
			t.Errorf("decodeTask(%v) accepted a malformed plaintext", b)
		}
	}
}

func TestSealTask2025TooLong(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("SealTask sealed an upstream task id over MaxUpstreamTaskLen")
		}
	}()
	SealTask(testKeyring(t, NewRandomKey()), Task{Upstream: strings.Repeat("x", 256)})
}
