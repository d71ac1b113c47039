package seal

import (
	"bytes"
	"encoding/hex"
	"testing"
)

// TestPrincipalName: a principal's storage name is keyed (another key
// names it otherwise, and it is not the plain digest), stable, and the
// names before list the other keys' names then the plain digest.
func TestPrincipalName(t *testing.T) {
	kr := testKeyring(t)
	other := testKeyring(t, bytes.Repeat([]byte{0x5a}, KeySize))
	p := testPrincipal
	name := kr.PrincipalName(p)
	switch {
	case len(name) != 32:
		t.Fatalf("name %q: want 32 hex digits", name)
	case name != kr.PrincipalName(p):
		t.Fatal("the name is not stable")
	case name == other.PrincipalName(p):
		t.Fatal("two keys name a principal alike")
	case name == hex.EncodeToString(p[:]):
		t.Fatal("the name is the plain digest")
	case name == kr.PrincipalName([16]byte{9}):
		t.Fatal("two principals share a name")
	}
	rotated, err := NewKeyring(bytes.Repeat([]byte{0x5a}, KeySize), bytes.Repeat([]byte{0x11}, KeySize))
	if err != nil {
		t.Fatal(err)
	}
	before := rotated.PrincipalNamesBefore(p)
	want := []string{testKeyring(t, bytes.Repeat([]byte{0x11}, KeySize)).PrincipalName(p), hex.EncodeToString(p[:])}
	if len(before) != 2 || before[0] != want[0] || before[1] != want[1] {
		t.Fatalf("names before: %q, want %q", before, want)
	}
}
