package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// introspectionFixture is an authorization server reduced to RFC 7662:
// OpenID discovery naming its introspection endpoint, which answers from
// a table of tokens (anything else inactive) to the client gw:s3cret
// authenticated by HTTP Basic or in the form, counting requests and the
// most in flight at once. The e2e tests use a real one (oidc-provider).
type introspectionFixture struct {
	srv      *httptest.Server
	answers  map[string]map[string]any
	hold     chan struct{} // when set, each request waits for it to close
	requests atomic.Int32
	inFlight atomic.Int32
	maxIn    atomic.Int32
	lastForm atomic.Value
}

func newIntrospectionFixture(t *testing.T) *introspectionFixture {
	t.Helper()
	f := &introspectionFixture{answers: map[string]map[string]any{}}
	mux := http.NewServeMux()
	mux.HandleFunc("/.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]string{"issuer": f.srv.URL, "introspection_endpoint": f.srv.URL + "/introspect"})
	})
	mux.HandleFunc("/introspect", func(w http.ResponseWriter, r *http.Request) {
		f.requests.Add(1)
		n := f.inFlight.Add(1)
		defer f.inFlight.Add(-1)
		for m := f.maxIn.Load(); n > m && !f.maxIn.CompareAndSwap(m, n); m = f.maxIn.Load() {
		}
		if f.hold != nil {
			<-f.hold
		}
		r.ParseForm()
		f.lastForm.Store(r.PostForm)
		id, secret, ok := r.BasicAuth()
		if !ok {
			id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
		}
		if id != "gw" || secret != "s3cret" || r.PostForm.Get("token_type_hint") != "access_token" {
			http.Error(w, `{"error":"invalid_client"}`, http.StatusUnauthorized)
			return
		}
		a, ok := f.answers[r.PostForm.Get("token")]
		if !ok {
			a = map[string]any{"active": false}
		}
		json.NewEncoder(w).Encode(a)
	})
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

// active is a valid answer for audience, edited.
func (f *introspectionFixture) active(edit func(a map[string]any)) map[string]any {
	a := map[string]any{"active": true, "iss": f.srv.URL, "sub": "alice", "aud": audience, "exp": time.Now().Add(time.Hour).Unix(), "scope": "mcp read", "client_id": "app", "token_type": "Bearer"}
	if edit != nil {
		edit(a)
	}
	return a
}

func (f *introspectionFixture) validator(o Introspection) *Validator {
	o.ClientID, o.ClientSecret = "gw", "s3cret"
	return New(Options{Issuer: f.srv.URL, Audience: audience, Introspection: &o})
}

func TestIntrospect(t *testing.T) {
	f := newIntrospectionFixture(t)
	f.answers["good"] = f.active(nil)
	v := f.validator(Introspection{})
	ctx := context.Background()
	for range 3 {
		c, err := v.Validate(ctx, "good")
		if err != nil {
			t.Fatalf("active token refused: %v", err)
		}
		if c.Issuer != f.srv.URL || c.Subject != "alice" || !c.HasScope("mcp") || c.ClientID != "app" {
			t.Fatalf("claims = %+v", c)
		}
	}
	if n := f.requests.Load(); n != 1 {
		t.Fatalf("introspected %d times for three requests, want 1 (cached)", n)
	}
	attacks := map[string]map[string]any{
		"inactive":          {"active": false, "sub": "alice", "aud": audience, "exp": time.Now().Add(time.Hour).Unix()},
		"wrong audience":    f.active(func(a map[string]any) { a["aud"] = []string{"https://other.example.com/mcp"} }),
		"no audience":       f.active(func(a map[string]any) { delete(a, "aud") }),
		"wrong issuer":      f.active(func(a map[string]any) { a["iss"] = "https://evil.example.com" }),
		"expired":           f.active(func(a map[string]any) { a["exp"] = time.Now().Add(-time.Hour).Unix() }),
		"no exp":            f.active(func(a map[string]any) { delete(a, "exp") }),
		"not yet valid":     f.active(func(a map[string]any) { a["nbf"] = time.Now().Add(time.Hour).Unix() }),
		"no sub":            f.active(func(a map[string]any) { delete(a, "sub") }),
		"a refresh token":   f.active(func(a map[string]any) { a["token_type"] = "refresh_token" }),
		"sender-constraint": f.active(func(a map[string]any) { a["cnf"] = map[string]string{"jkt": "x"} }),
	}
	for name, a := range attacks {
		f.answers[strings.ReplaceAll(name, " ", "-")] = a
	}
	attacks["unknown"] = nil
	for name := range attacks {
		t.Run(name, func(t *testing.T) {
			if _, err := v.Validate(ctx, strings.ReplaceAll(name, " ", "-")); !errors.Is(err, ErrInvalidToken) {
				t.Fatalf("err = %v, want ErrInvalidToken", err)
			}
		})
	}
	before := f.requests.Load()
	for _, junk := range []string{"has space", "quote\"d", "tab\tbed", "===", strings.Repeat("a", MaxTokenLength+1)} {
		if _, err := v.Validate(ctx, junk); !errors.Is(err, ErrInvalidToken) {
			t.Fatalf("%q: err = %v, want ErrInvalidToken", junk, err)
		}
	}
	if n := f.requests.Load(); n != before {
		t.Fatalf("malformed tokens were introspected (%d requests)", n-before)
	}
}

// TestIntrospectWhichTokens: a JWT-shaped token is validated as a JWT
// (its signature) unless every token is introspected.
func TestIntrospectWhichTokens(t *testing.T) {
	f := newIntrospectionFixture(t)
	jwtLike := "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.c2ln"
	f.answers[jwtLike] = f.active(nil)
	if _, err := f.validator(Introspection{}).Validate(context.Background(), jwtLike); err == nil || f.requests.Load() != 0 {
		t.Fatalf("opaque mode: a JWT was introspected (err %v, %d requests)", err, f.requests.Load())
	}
	if _, err := f.validator(Introspection{Tokens: IntrospectAll}).Validate(context.Background(), jwtLike); err != nil || f.requests.Load() != 1 {
		t.Fatalf("all mode: err %v, %d requests", err, f.requests.Load())
	}
	for tok, want := range map[string]bool{jwtLike: true, "abc.def.ghi": false, "opaque": false, "a.b": false} {
		if jwtShaped(tok) != want {
			t.Errorf("jwtShaped(%q) != %v", tok, want)
		}
	}
}

// TestIntrospectClientAuth: the credentials go as HTTP Basic, or in the
// form with client_secret_post; the endpoint is the configured one over
// the metadata's.
func TestIntrospectClientAuth(t *testing.T) {
	f := newIntrospectionFixture(t)
	f.answers["good"] = f.active(nil)
	v := f.validator(Introspection{ClientAuth: ClientSecretPost, Endpoint: f.srv.URL + "/introspect"})
	if _, err := v.Validate(context.Background(), "good"); err != nil {
		t.Fatal(err)
	}
	if form := f.lastForm.Load().(url.Values); fmt.Sprint(form["client_secret"]) != "[s3cret]" {
		t.Fatalf("form %v", form)
	}
}

// TestIntrospectUnavailable: when the authorization server cannot answer,
// or answers something else than an introspection, the token is not
// called invalid (the client's token may be fine).
func TestIntrospectUnavailable(t *testing.T) {
	f := newIntrospectionFixture(t)
	redirect := httptest.NewServer(http.RedirectHandler(f.srv.URL+"/introspect", http.StatusTemporaryRedirect))
	defer redirect.Close()
	odd := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/big":
			w.Write([]byte(`{"active":true,"x":"` + strings.Repeat("a", MaxIntrospectionBytes) + `"}`))
		case "/html":
			w.Write([]byte(`<html>`))
		case "/slow":
			r.ParseForm() // read whole: the server then sees the client leave
			<-r.Context().Done()
		default:
			http.Error(w, "no", http.StatusInternalServerError)
		}
	}))
	defer odd.Close()
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	for name, o := range map[string]Introspection{
		"unreachable":         {Endpoint: down.URL},
		"500":                 {Endpoint: odd.URL + "/500"},
		"too large":           {Endpoint: odd.URL + "/big"},
		"not JSON":            {Endpoint: odd.URL + "/html"},
		"too slow":            {Endpoint: odd.URL + "/slow", Timeout: 100 * time.Millisecond},
		"redirect":            {Endpoint: redirect.URL},
		"wrong credentials":   {Endpoint: f.srv.URL + "/introspect", ClientAuth: ClientSecretPost, Tokens: IntrospectAll},
		"metadata unreadable": {},
	} {
		t.Run(name, func(t *testing.T) {
			o.ClientID, o.ClientSecret = "gw", "s3cret"
			issuer := f.srv.URL
			if name == "metadata unreadable" {
				issuer = odd.URL
			}
			if name == "wrong credentials" {
				o.ClientSecret = "guess"
			}
			v := New(Options{Issuer: issuer, Audience: audience, Introspection: &o})
			if _, err := v.Validate(context.Background(), "good"); !errors.Is(err, ErrUnavailable) {
				t.Fatalf("err = %v, want ErrUnavailable", err)
			}
		})
	}
	if f.requests.Load() != 1 {
		t.Fatalf("the redirect was followed, or: %d requests at the fixture, want 1 (wrong credentials)", f.requests.Load())
	}
}

// TestIntrospectFlood: concurrent requests with one token share one
// introspection; a flood of distinct tokens has at most MaxConcurrent
// introspections in flight; a refused token is not asked about again for
// InactiveCacheAge.
func TestIntrospectFlood(t *testing.T) {
	f := newIntrospectionFixture(t)
	f.answers["good"] = f.active(nil)
	f.hold = make(chan struct{})
	v := f.validator(Introspection{MaxConcurrent: 4})
	ctx := context.Background()
	var wg sync.WaitGroup
	var fails atomic.Int32
	for i := range 50 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			if _, err := v.Validate(ctx, "good"); err != nil {
				fails.Add(1)
			}
		}()
		go func() {
			defer wg.Done()
			if _, err := v.Validate(ctx, fmt.Sprint("junk-", i)); !errors.Is(err, ErrInvalidToken) {
				fails.Add(1)
			}
		}()
	}
	deadline := time.Now().Add(5 * time.Second)
	for f.inFlight.Load() < 4 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	close(f.hold)
	wg.Wait()
	if fails.Load() != 0 {
		t.Fatalf("%d answers were wrong", fails.Load())
	}
	if n, m := f.requests.Load(), f.maxIn.Load(); n != 51 || m != 4 {
		t.Fatalf("%d introspections, %d at most in flight; want 51 (one for the 50 requests with one token) and 4", n, m)
	}
	for range 10 {
		v.Validate(ctx, "junk-7")
	}
	if n := f.requests.Load(); n != 51 {
		t.Fatalf("a refused token was introspected again within InactiveCacheAge (%d requests)", n-51)
	}
}

// TestIntrospectCacheAge: an active token is trusted until its exp, never
// longer than MaxCacheAge without asking again; a refused one is asked
// about again once InactiveCacheAge passed.
func TestIntrospectCacheAge(t *testing.T) {
	f := newIntrospectionFixture(t)
	now := time.Now()
	f.answers["short"] = f.active(func(a map[string]any) { a["exp"] = now.Add(time.Minute).Unix() })
	f.answers["long"] = f.active(nil)
	o := Introspection{ClientID: "gw", ClientSecret: "s3cret"}
	v := New(Options{Issuer: f.srv.URL, Audience: audience, Introspection: &o, Now: func() time.Time { return now }})
	ctx := context.Background()
	for _, tok := range []string{"short", "long", "short", "long", "nope"} {
		v.Validate(ctx, tok)
	}
	if n := f.requests.Load(); n != 3 {
		t.Fatalf("%d introspections, want 3", n)
	}
	delete(f.answers, "long") // revoked
	now = now.Add(InactiveCacheAge + time.Second)
	f.answers["nope"] = f.active(nil)
	if _, err := v.Validate(ctx, "nope"); err != nil {
		t.Fatalf("a token refused %s ago is still refused: %v", InactiveCacheAge+time.Second, err)
	}
	now = now.Add(time.Minute + DefaultLeeway)
	if _, err := v.Validate(ctx, "short"); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("a cached token past its exp: err = %v", err)
	}
	if _, err := v.Validate(ctx, "long"); err != nil {
		t.Fatalf("a cached token within MaxCacheAge: err = %v", err)
	}
	now = now.Add(MaxCacheAge)
	if _, err := v.Validate(ctx, "long"); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("a revoked token, past MaxCacheAge: err = %v", err)
	}
}
