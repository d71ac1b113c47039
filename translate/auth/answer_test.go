package auth

import (
	"strings"
	"testing"
)

// TestReadAnswers: the authorization server's answers are hostile until
// read: a nesting bomb, a member of the wrong type or not an object is no
// answer (and nothing recursive ever walks the bomb).
func TestReadAnswers(t *testing.T) {
	bomb := `{"active":true,"sub":"a","exp":1,"aud":"x","x":` + strings.Repeat("[", 100000) + strings.Repeat("]", 100000) + `}`
	for _, body := range []string{bomb, `[]`, `not json`} {
		_, okA := readAnswer([]byte(body))
		_, okM := readMetadata([]byte(body))
		_, errJ := readJWKS([]byte(body))
		if okA || okM || errJ == nil {
			t.Errorf("%.40s…: read as an introspection answer %v, metadata %v, a JWKS %v", body, okA, okM, errJ == nil)
		}
	}
	for _, body := range []string{`{"active":"yes"}`, `{"sub":"a"}`, `{"active":true,"sub":7}`, `{"active":true,"exp":1.5}`, `{"active":true,"iss":{}}`} {
		if _, ok := readAnswer([]byte(body)); ok {
			t.Errorf("readAnswer(%s) took it", body)
		}
	}
	a, ok := readAnswer([]byte(`{"active":true,"sub":"alice","aud":["a","https://mcp.example/mcp"],"exp":1800000000,"scope":"mcp","cnf":null}`))
	if !ok || !a.Active || a.Subject != "alice" || *a.Expiry != 1800000000 || a.Scope != "mcp" || a.NotBefore != nil ||
		!audienceNames(a.Audience, "https://mcp.example/mcp") || audienceNames(a.Audience, "https://other/mcp") {
		t.Errorf("a good answer: %+v %v", a, ok)
	}
	if _, ok := readMetadata([]byte(`{"issuer":"https://as","jwks_uri":5}`)); ok {
		t.Error("readMetadata took a jwks_uri that is a number")
	}
}
