package upstreamauth

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// endpoint is a token endpoint that answers with answer and counts the
// exchanges; it checks the RFC 8693 form.
func endpoint(t testing.TB, status int, answer string) (*httptest.Server, *atomic.Int32) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		id, secret, _ := r.BasicAuth()
		if r.FormValue("grant_type") != GrantTypeTokenExchange || r.FormValue("subject_token_type") != TokenTypeAccessToken ||
			r.FormValue("audience") != "srv" || id != "gw" || secret != "s3cret" {
			http.Error(w, `{"error":"invalid_request"}`, http.StatusBadRequest)
			return
		}
		w.WriteHeader(status)
		_, _ = w.Write([]byte(strings.ReplaceAll(answer, "SUBJECT", r.FormValue("subject_token"))))
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func newExchanger(t *testing.T, url string) *Exchanger {
	e, err := New(Config{TokenEndpoint: url, ClientID: "gw", ClientSecret: "s3cret", Audience: "srv", Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestTokenCachedPerPrincipalAndSubject(t *testing.T) {
	srv, n := endpoint(t, 200, `{"access_token":"x-SUBJECT","token_type":"Bearer","expires_in":3600}`)
	e := newExchanger(t, srv.URL)
	ctx := context.Background()
	var wg sync.WaitGroup
	for range 8 { // concurrent first calls share one exchange
		wg.Go(func() {
			if tok, err := e.Token(ctx, "alice", "ta"); err != nil || tok != "x-ta" {
				t.Errorf("Token = %q, %v", tok, err)
			}
		})
	}
	wg.Wait()
	if tok, _ := e.Token(ctx, "bob", "tb"); tok != "x-tb" {
		t.Fatalf("bob got %q", tok)
	}
	if tok, _ := e.Token(ctx, "alice", "tb"); tok != "x-tb" { // another subject token: exchanged again
		t.Fatalf("alice with tb got %q", tok)
	}
	if got := n.Load(); got != 3 {
		t.Fatalf("%d exchanges, want 3", got)
	}
	e.now = func() time.Time { return time.Now().Add(3600*time.Second - 10*time.Second) } // within the margin
	if _, err := e.Token(ctx, "alice", "ta"); err != nil || n.Load() != 4 {
		t.Fatalf("near expiry: %v, %d exchanges, want 4", err, n.Load())
	}
}

func TestTokenFailuresNameNoSecret(t *testing.T) {
	cases := map[string]struct {
		status int
		answer string
	}{
		"refused":        {400, `{"error":"invalid_grant","error_description":"leaked-detail"}`},
		"no token":       {200, `{"token_type":"Bearer","leaked-detail":1}`},
		"not bearer":     {200, `{"access_token":"a","token_type":"leaked-detail"}`},
		"header split":   {200, `{"access_token":"a\r\nX: leaked-detail","token_type":"Bearer"}`},
		"oversized":      {200, `{"access_token":"` + strings.Repeat("a", DefaultMaxResponse) + `"}`},
		"not json":       {200, `leaked-detail`},
		"server failure": {500, `leaked-detail`},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			srv, _ := endpoint(t, c.status, c.answer)
			e := newExchanger(t, srv.URL)
			tok, err := e.Token(context.Background(), "p", "subject-secret")
			if err == nil || tok != "" {
				t.Fatalf("Token = %q, %v; want an error", tok, err)
			}
			for _, leak := range []string{"leaked-detail", "subject-secret", "s3cret", srv.URL} {
				if strings.Contains(err.Error(), leak) {
					t.Fatalf("error %q names %q", err, leak)
				}
			}
		})
	}
}

func TestTokenUnreachableAndTimeout(t *testing.T) {
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-release
	}))
	defer slow.Close()
	defer close(release) // before Close, which waits for the handler
	e, _ := New(Config{TokenEndpoint: slow.URL, ClientID: "gw", Audience: "srv", Timeout: 100 * time.Millisecond})
	if _, err := e.Token(context.Background(), "p", "t"); err == nil || strings.Contains(err.Error(), slow.URL) {
		t.Fatalf("slow endpoint: %v", err)
	}
	if _, err := e.Token(context.Background(), "p", ""); err == nil {
		t.Fatal("an empty subject token was exchanged")
	}
}

func TestNewValidates(t *testing.T) {
	for _, c := range []Config{
		{TokenEndpoint: "/token", ClientID: "a", Audience: "b"},
		{TokenEndpoint: "ftp://h/token", ClientID: "a", Audience: "b"},
		{TokenEndpoint: "https://h/token", Audience: "b"},
		{TokenEndpoint: "https://h/token", ClientID: "a"},
	} {
		if _, err := New(c); err == nil {
			t.Errorf("New(%+v) accepted", c)
		}
	}
}
