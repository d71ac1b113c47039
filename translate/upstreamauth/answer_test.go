package upstreamauth

import (
	"strings"
	"testing"
)

// TestReadTokenAnswer: a token endpoint's answer is hostile until read: a
// nesting bomb, a member of the wrong type or not an object is no answer.
func TestReadTokenAnswer(t *testing.T) {
	bomb := `{"access_token":"t","x":` + strings.Repeat("[", 100000) + strings.Repeat("]", 100000) + `}`
	for _, body := range []string{bomb, `[]`, `not json`, `{"access_token":7}`, `{"access_token":"t","expires_in":"60"}`, `{"access_token":"t","token_type":{}}`} {
		if _, ok := readTokenAnswer([]byte(body)); ok {
			t.Errorf("readTokenAnswer(%.40s…) took it", body)
		}
	}
	a, ok := readTokenAnswer([]byte(`{"access_token":"t","token_type":"Bearer","expires_in":60,"issued_token_type":"urn:ietf:params:oauth:token-type:access_token"}`))
	if !ok || a.AccessToken != "t" || a.TokenType != "Bearer" || a.ExpiresIn != 60 {
		t.Errorf("a good answer: %+v %v", a, ok)
	}
}
