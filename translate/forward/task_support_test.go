package forward

import (
	"fmt"
	"strings"
	"testing"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
)

// What one principal's tools/list says of a tool applies to that
// principal's calls only: another principal of the same upstream has
// learned nothing (its calls take forbidden, or what its own listing says).
func TestTaskSupportPerPrincipal(t *testing.T) {
	var s taskSupport
	const up = "http://up/mcp"
	alice, bob := translate.PrincipalHash("Bearer alice"), translate.PrincipalHash("Bearer bob")
	s.learn(up, alice, []byte(`{"tools":[{"name":"report","execution":{"taskSupport":"required"}}]}`))
	if m, ok := s.mode(up, alice, "report"); !ok || m != TaskRequired {
		t.Fatalf("alice's report: %v %v, want required", m, ok)
	}
	if m, ok := s.mode(up, bob, "report"); ok {
		t.Fatalf("bob's report learned from alice's listing: %v", m)
	}
	if s.any(up, bob) || !s.any(up, alice) {
		t.Fatalf("any: alice %v, bob %v", s.any(up, alice), s.any(up, bob))
	}
	var p TaskPolicy
	if r := s.taskRule(&p, up, bob, "report"); r.Mode != TaskForbidden {
		t.Fatalf("bob's rule %v, want forbidden", r.Mode)
	}
	s.learn(up, bob, []byte(`{"tools":[{"name":"report"}]}`))
	if m, ok := s.mode(up, bob, "report"); !ok || m != TaskForbidden {
		t.Fatalf("bob's own listing: %v %v", m, ok)
	}
	if m, _ := s.mode(up, alice, "report"); m != TaskRequired {
		t.Fatalf("bob's listing changed alice's: %v", m)
	}
	if _, ok := s.mode("http://other/mcp", alice, "report"); ok {
		t.Fatal("learned for another upstream")
	}
}

// The memory taskSupport holds is bounded: tools per listing, tools in all
// (the least recently learned listing forgotten first), name length.
func TestTaskSupportBounds(t *testing.T) {
	var s taskSupport
	const up = "http://up/mcp"
	list := func(prefix string, n int) []byte {
		var b strings.Builder
		b.WriteString(`{"tools":[`)
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"name":"%s%d","execution":{"taskSupport":"optional"}}`, prefix, i)
		}
		b.WriteString(`]}`)
		return []byte(b.String())
	}
	first := translate.PrincipalHash("first")
	s.learn(up, first, list("t", maxLearnedTools+10))
	if s.total != maxLearnedTools {
		t.Fatalf("one listing kept %d tools, want %d", s.total, maxLearnedTools)
	}
	for i := range maxLearnedTotal / maxLearnedTools {
		s.learn(up, translate.PrincipalHash(fmt.Sprint("p", i)), list("t", maxLearnedTools))
	}
	if s.total > maxLearnedTotal {
		t.Fatalf("%d tools kept, more than %d", s.total, maxLearnedTotal)
	}
	if _, ok := s.mode(up, first, "t0"); ok {
		t.Fatal("the least recently learned listing was kept")
	}
	last := translate.PrincipalHash(fmt.Sprint("p", maxLearnedTotal/maxLearnedTools-1))
	if m, ok := s.mode(up, last, "t0"); !ok || m != TaskOptional {
		t.Fatal("the latest listing was forgotten")
	}
	long := strings.Repeat("x", maxLearnedName+1)
	s.learn(up, first, []byte(`{"tools":[{"name":"`+long+`","execution":{"taskSupport":"required"}}]}`))
	if _, ok := s.mode(up, first, long); ok {
		t.Fatal("a tool name longer than maxLearnedName was learned")
	}
}
