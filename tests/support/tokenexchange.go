package support

import (
	"encoding/json"
	"net/http"
	"sync"
	"testing"
)

// TokenExchange is a fixture authorization server's token endpoint that
// performs RFC 8693 token exchange, written for these tests because the
// authorization servers on npm that the tests use (oauth2-mock-server 9.3.0
// among them) do not implement it. It accepts only grant_type
// urn:ietf:params:oauth:grant-type:token-exchange with a subject_token of
// type access_token, from one client (HTTP Basic), and answers the opaque
// token `exchanged:<audience>:<subject_token>`, so that an upstream that
// receives it shows which audience and subject it was made for. It counts
// the exchanges per audience and subject token.
type TokenExchange struct {
	URL string

	ClientID, ClientSecret string
	ExpiresIn              int // seconds; the answer's expires_in

	mu     sync.Mutex
	counts map[string]int // "<audience>:<subject>" → exchanges
	fail   bool
}

// NewTokenExchange is a TokenExchange for client id/secret, not serving
// yet (URL unset): its ServeHTTP answers every path.
func NewTokenExchange(id, secret string) *TokenExchange {
	return &TokenExchange{ClientID: id, ClientSecret: secret, ExpiresIn: 3600, counts: map[string]int{}}
}

// ServeTokenExchange starts a TokenExchange for client id/secret.
func ServeTokenExchange(t testing.TB, id, secret string) *TokenExchange {
	x := NewTokenExchange(id, secret)
	x.URL = Serve(t, x) + "/token"
	return x
}

// Fail makes every later exchange answer 400 invalid_grant, with a
// description that must never reach a client.
func (x *TokenExchange) Fail() {
	x.mu.Lock()
	x.fail = true
	x.mu.Unlock()
}

// Count is how many exchanges were made for audience and subject.
func (x *TokenExchange) Count(audience, subject string) int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.counts[audience+":"+subject]
}

// ServeHTTP answers a token request.
func (x *TokenExchange) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	id, secret, ok := r.BasicAuth()
	if r.Method != http.MethodPost || !ok || id != x.ClientID || secret != x.ClientSecret {
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"error":"invalid_client"}`))
		return
	}
	aud, subject := r.PostFormValue("audience"), r.PostFormValue("subject_token")
	x.mu.Lock()
	fail := x.fail
	x.mu.Unlock()
	if fail || r.PostFormValue("grant_type") != "urn:ietf:params:oauth:grant-type:token-exchange" ||
		r.PostFormValue("subject_token_type") != "urn:ietf:params:oauth:token-type:access_token" || aud == "" || subject == "" {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"error":"invalid_grant","error_description":"secret-detail-of-the-authorization-server"}`))
		return
	}
	x.mu.Lock()
	x.counts[aud+":"+subject]++
	x.mu.Unlock()
	_ = json.NewEncoder(w).Encode(map[string]any{
		"access_token": "exchanged:" + aud + ":" + subject, "token_type": "Bearer", "expires_in": x.ExpiresIn,
		"issued_token_type": "urn:ietf:params:oauth:token-type:access_token",
	})
}
