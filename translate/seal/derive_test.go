package seal

import (
	"errors"
	"testing"
)

func TestForServer(t *testing.T) {
	kr, err := NewKeyring(NewRandomKey(), NewRandomKey())
	if err != nil {
		t.Fatal(err)
	}
	a, err := kr.ForServer("github")
	if err != nil {
		t.Fatal(err)
	}
	a2, _ := kr.ForServer("github")
	b, _ := kr.ForServer("jira")
	if a.ID() != a2.ID() || a.ID() == b.ID() || a.ID() == kr.ID() {
		t.Fatalf("ids: a %x a2 %x b %x kr %x", a.ID(), a2.ID(), b.ID(), kr.ID())
	}
	tok := a.Seal("p", []byte("x"))
	if _, err := a2.Open("p", tok); err != nil {
		t.Fatalf("same server's keyring: %v", err)
	}
	// Another server's keyring, or the block's own, never opens it.
	for name, other := range map[string]*Keyring{"jira": b, "block": kr} {
		if _, err := other.Open("p", tok); !errors.Is(err, ErrUnsealable) {
			t.Errorf("%s opened a github token: %v", name, err)
		}
	}
}
