package federate

import (
	"fmt"
	"strings"
	"testing"
)

// BenchmarkMergeTools merges three servers' pages of 1,000 tools each.
func BenchmarkMergeTools(b *testing.B) {
	s := testSet(b)
	parts := make([]Part, 3)
	for i := range parts {
		var sb strings.Builder
		sb.WriteString(`{"tools":[`)
		for j := range 1000 {
			if j > 0 {
				sb.WriteByte(',')
			}
			fmt.Fprintf(&sb, `{"name":"issue_%d","description":"Tool %d of server %d.","inputSchema":{"type":"object","properties":{"n":{"type":"integer"}}}}`, j, j, i)
		}
		sb.WriteString(`],"ttlMs":60000,"cacheScope":"public"}`)
		parts[i] = Part{Server: i, Result: []byte(sb.String())}
	}
	b.ReportAllocs()
	for b.Loop() {
		Merge(s, Tools, parts)
	}
}

// BenchmarkMatchTemplateHostile matches a 32-expression template that
// fails at its end against an 8 KiB URI: the worst case a server's
// template and a client's URI can make.
func BenchmarkMatchTemplateHostile(b *testing.B) {
	template := "x://" + strings.Repeat("{+a}", MaxTemplateExpressions) + "!"
	uri := "x://" + strings.Repeat("a", MaxMatchURI-4)
	b.ReportAllocs()
	for b.Loop() {
		MatchTemplate(template, uri)
	}
}

// BenchmarkClaimsOwner finds the owner of a URI only the last of 100
// ordinary templates matches.
func BenchmarkClaimsOwner(b *testing.B) {
	c := NewClaims(testSet(b))
	var sb strings.Builder
	sb.WriteString(`{"resourceTemplates":[`)
	for i := range 100 {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `{"uriTemplate":"svc%d://{owner}/{repo}/issues/{n}"}`, i)
	}
	sb.WriteString(`]}`)
	c.AddTemplates(1, []byte(sb.String()))
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := c.Owner("svc99://octo/cat/issues/42"); !ok {
			b.Fatal("no owner")
		}
	}
}
