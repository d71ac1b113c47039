package seal

import (
	"errors"
	"testing"
)

func TestTaskRoundTrip(t *testing.T) {
	kr := testKeyring(t, NewRandomKey())
	want := Task{Instance: "inst-a", Address: "http://10.0.0.1:8080", Handle: [16]byte{1, 2, 3}, Principal: [16]byte{9, 8, 7}}
	tok := SealTask(kr, want)
	got, err := OpenTask(kr, tok)
	if err != nil || got != want {
		t.Fatalf("OpenTask = %+v, %v; want %+v", got, err, want)
	}
	// Another purpose's token, another key, a tampered token: invalid.
	other := testKeyring(t, NewRandomKey())
	for name, bad := range map[string]string{
		"other key":   SealTask(other, want),
		"a state":     SealState(kr, State{Instance: "x"}),
		"tampered":    tamper(tok),
		"not a token": "gate-test",
	} {
		if _, err := OpenTask(kr, bad); !errors.Is(err, ErrTaskInvalid) || !errors.Is(err, ErrUnsealable) {
			t.Errorf("%s: OpenTask error %v, want ErrTaskInvalid and ErrUnsealable", name, err)
		}
	}
}

func FuzzDecodeTask(f *testing.F) {
	f.Add([]byte{taskVersion, 1, 'a', 0})
	kr, _ := NewKeyring(goldenKey)
	for _, tk := range goldenTasks() {
		tk.Trace = testTrace
		plain, _ := kr.Open(taskPurpose, SealTask(kr, tk))
		f.Add(plain)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		tk, err := decodeTask(b)
		if err != nil {
			return
		}
		kr := testKeyring(t, NewRandomKey())
		back, err := OpenTask(kr, SealTask(kr, tk))
		if err != nil || back != tk {
			t.Fatalf("round trip of %+v: %+v, %v", tk, back, err)
		}
	})
}
