package auth

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// issuerFixture is an authorization server reduced to what a resource
// server reads: OpenID discovery (RFC 8414's location answers 404, so the
// fallback is exercised) and a JWKS with one RSA key, counting JWKS
// fetches. The e2e tests use a real one (oauth2-mock-server).
type issuerFixture struct {
	srv     *httptest.Server
	key     *rsa.PrivateKey
	kid     string
	fetches atomic.Int32
}

func newIssuer(t *testing.T) *issuerFixture {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	f := &issuerFixture{key: key, kid: "k1"}
	mux := http.NewServeMux()
	mux.HandleFunc("/.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]string{"issuer": f.srv.URL, "jwks_uri": f.srv.URL + "/jwks"})
	})
	mux.HandleFunc("/jwks", func(w http.ResponseWriter, r *http.Request) {
		f.fetches.Add(1)
		json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: f.kid, Algorithm: "RS256", Use: "sig"}}})
	})
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

const audience = "https://mcp.example.com/mcp"

// sign makes an RS256 token with claims over the defaults (a valid one).
func (f *issuerFixture) sign(t *testing.T, kid string, edit func(c map[string]any)) string {
	t.Helper()
	now := time.Now()
	c := map[string]any{"iss": f.srv.URL, "sub": "alice", "aud": audience, "exp": now.Add(time.Hour).Unix(), "nbf": now.Unix(), "scope": "mcp read"}
	if edit != nil {
		edit(c)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: f.key}, (&jose.SignerOptions{}).WithHeader("kid", kid).WithType("JWT"))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Signed(signer).Claims(c).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// unsigned builds header.payload.signature by hand, for algorithms a
// signer refuses to make (none, HS256 keyed with a public key).
func unsigned(t *testing.T, header, claims map[string]any, sign func(input string) []byte) string {
	t.Helper()
	enc := func(v any) string {
		b, _ := json.Marshal(v)
		return base64.RawURLEncoding.EncodeToString(b)
	}
	input := enc(header) + "." + enc(claims)
	return input + "." + base64.RawURLEncoding.EncodeToString(sign(input))
}

func TestValidate(t *testing.T) {
	f := newIssuer(t)
	v := New(Options{Issuer: f.srv.URL, Audience: audience})
	ctx := context.Background()
	c, err := v.Validate(ctx, f.sign(t, "k1", nil))
	if err != nil {
		t.Fatalf("valid token refused: %v", err)
	}
	if c.Issuer != f.srv.URL || c.Subject != "alice" || !c.HasScope("mcp") || c.HasScope("admin") {
		t.Fatalf("claims = %+v", c)
	}
	pubDER, _ := x509.MarshalPKIXPublicKey(&f.key.PublicKey)
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})
	valid := map[string]any{"iss": f.srv.URL, "sub": "mallory", "aud": audience, "exp": time.Now().Add(time.Hour).Unix()}
	attacks := []struct {
		name  string
		token string
	}{
		{"expired", f.sign(t, "k1", func(c map[string]any) { c["exp"] = time.Now().Add(-time.Minute).Unix() })},
		{"not yet valid", f.sign(t, "k1", func(c map[string]any) { c["nbf"] = time.Now().Add(time.Minute).Unix() })},
		{"wrong audience", f.sign(t, "k1", func(c map[string]any) { c["aud"] = "https://other.example.com/mcp" })},
		{"wrong issuer", f.sign(t, "k1", func(c map[string]any) { c["iss"] = "https://evil.example.com" })},
		{"no exp", f.sign(t, "k1", func(c map[string]any) { delete(c, "exp") })},
		{"no sub", f.sign(t, "k1", func(c map[string]any) { delete(c, "sub") })},
		{"alg none", unsigned(t, map[string]any{"alg": "none", "kid": "k1"}, valid, func(string) []byte { return nil })},
		{"HS256 keyed with the public key", unsigned(t, map[string]any{"alg": "HS256", "kid": "k1"}, valid, func(in string) []byte {
			m := hmac.New(sha256.New, pubPEM)
			m.Write([]byte(in))
			return m.Sum(nil)
		})},
		{"tampered payload", func() string {
			p := strings.Split(f.sign(t, "k1", nil), ".")
			b, _ := json.Marshal(valid)
			return p[0] + "." + base64.RawURLEncoding.EncodeToString(b) + "." + p[2]
		}()},
		{"too long", strings.Repeat("a", MaxTokenLength+1)},
		{"garbage", "not-a-jwt"},
	}
	for _, a := range attacks {
		t.Run(a.name, func(t *testing.T) {
			if _, err := v.Validate(ctx, a.token); !errors.Is(err, ErrInvalidToken) {
				t.Fatalf("err = %v, want ErrInvalidToken", err)
			}
		})
	}
}

// TestUnknownKidRefetchFloor: tokens naming key ids the issuer never
// published cost it one JWKS fetch per floor, however many arrive; a
// rotated-in key is found by that one fetch.
func TestUnknownKidRefetchFloor(t *testing.T) {
	f := newIssuer(t)
	now := time.Now()
	v := New(Options{Issuer: f.srv.URL, Audience: audience, Now: func() time.Time { return now }})
	ctx := context.Background()
	if _, err := v.Validate(ctx, f.sign(t, "k1", nil)); err != nil {
		t.Fatal(err)
	}
	flood := func() {
		for i := range 20 {
			if _, err := v.Validate(ctx, f.sign(t, "made-up-"+string(rune('a'+i)), nil)); !errors.Is(err, ErrInvalidToken) {
				t.Fatalf("unknown kid: err = %v", err)
			}
		}
	}
	flood() // within the floor of the first fetch: none
	if n := f.fetches.Load(); n != 1 {
		t.Fatalf("JWKS fetched %d times within the floor, want 1", n)
	}
	now = now.Add(DefaultRefetchFloor + time.Second)
	flood() // past it: one
	if n := f.fetches.Load(); n != 2 {
		t.Fatalf("JWKS fetched %d times for 20 unknown kids past the floor, want 2", n)
	}
	// The issuer rotates to a new key id; after the floor one fetch finds it.
	f.kid = "k2"
	now = now.Add(DefaultRefetchFloor + time.Second)
	if _, err := v.Validate(ctx, f.sign(t, "k2", nil)); err != nil {
		t.Fatalf("rotated key refused: %v", err)
	}
	if n := f.fetches.Load(); n != 3 {
		t.Fatalf("JWKS fetched %d times, want 3", n)
	}
}

// TestIssuerMismatch: metadata naming another issuer is not trusted.
func TestIssuerMismatch(t *testing.T) {
	f := newIssuer(t)
	v := New(Options{Issuer: f.srv.URL + "/other", Audience: audience})
	if _, err := v.Validate(context.Background(), f.sign(t, "k1", nil)); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
}

func TestChallenge(t *testing.T) {
	md := "https://gw.example.com/.well-known/oauth-protected-resource/mcp"
	if got, want := Challenge(md, true), `Bearer resource_metadata="`+md+`", error="invalid_token"`; got != want {
		t.Fatalf("got %s", got)
	}
	if got, want := ScopeChallenge(md, []string{"mcp", "ops"}), `Bearer resource_metadata="`+md+`", error="insufficient_scope", scope="mcp ops"`; got != want {
		t.Fatalf("got %s", got)
	}
	if MetadataPath("/mcp") != WellKnownPath+"/mcp" || MetadataPath("/") != WellKnownPath {
		t.Fatal("MetadataPath")
	}
}

// TestCache: a validated token is remembered, but never past its expiry,
// nor past MaxCacheAge: a key the issuer withdraws stops being trusted.
func TestCache(t *testing.T) {
	f := newIssuer(t)
	now := time.Now()
	v := New(Options{Issuer: f.srv.URL, Audience: audience, Now: func() time.Time { return now }})
	ctx := context.Background()
	short := f.sign(t, "k1", func(c map[string]any) { c["exp"] = now.Add(time.Minute).Unix() })
	long := f.sign(t, "k1", nil)
	for _, tok := range []string{short, long, short, long} {
		if _, err := v.Validate(ctx, tok); err != nil {
			t.Fatal(err)
		}
	}
	if n := f.fetches.Load(); n != 1 {
		t.Fatalf("JWKS fetched %d times, want 1", n)
	}
	now = now.Add(time.Minute + DefaultLeeway + time.Second)
	if _, err := v.Validate(ctx, short); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("an expired cached token: err = %v", err)
	}
	f.kid = "k2" // k1 withdrawn
	now = now.Add(MaxCacheAge)
	if _, err := v.Validate(ctx, long); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("a cached token of a withdrawn key, past MaxCacheAge: err = %v", err)
	}
}
