package legacy

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// goSDKServer is a real legacy MCP server (the go-sdk, sessionful) in the
// test process.
func goSDKServer(t *testing.T) (*mcp.Server, string) {
	t.Helper()
	server := mcp.NewServer(&mcp.Implementation{Name: "pool-test", Version: "1"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "caps", Description: "Reports the session's client capabilities."},
		func(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			c := req.Session.InitializeParams().Capabilities
			text := "none"
			if c != nil && c.Elicitation != nil {
				text = "elicitation"
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, nil, nil
		})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil))
	t.Cleanup(ts.Close)
	return server, ts.URL
}

func countSessions(s *mcp.Server) int {
	n := 0
	for range s.Sessions() {
		n++
	}
	return n
}

func waitSessions(t *testing.T, s *mcp.Server, want int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for countSessions(s) != want {
		if time.Now().After(deadline) {
			t.Fatalf("upstream has %d sessions, want %d", countSessions(s), want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestPoolLeasesByKey(t *testing.T) {
	server, url := goSDKServer(t)
	ctx := context.Background()
	p := NewPool(PoolOptions{MaxSessions: 10, IdleTimeout: time.Minute, Client: http.DefaultClient})
	defer p.Close()
	plain := PoolKey{Upstream: url, Principal: "a", Caps: "{}"}
	asking := PoolKey{Upstream: url, Principal: "a", Caps: `{"elicitation":{}}`}

	s1, err := p.Lease(ctx, plain, nil, []byte("{}"), nil, LeaseLimits{})
	if err != nil {
		t.Fatal(err)
	}
	if got := callText(t, s1, "caps"); got != "none" {
		t.Fatalf("session initialized with %q capabilities, want none", got)
	}
	p.Release(plain, s1, true)
	s2, err := p.Lease(ctx, plain, nil, []byte("{}"), nil, LeaseLimits{})
	if err != nil {
		t.Fatal(err)
	}
	if s2 != s1 {
		t.Fatal("an idle session of the same key was not reused")
	}
	s3, err := p.Lease(ctx, asking, nil, []byte(`{"elicitation":{}}`), nil, LeaseLimits{})
	if err != nil {
		t.Fatal(err)
	}
	if s3 == s2 {
		t.Fatal("a session was shared across capability sets")
	}
	if got := callText(t, s3, "caps"); got != "elicitation" {
		t.Fatalf("session initialized with %q, want elicitation", got)
	}
	if open, idle := p.Stats(); open != 2 || idle != 0 {
		t.Fatalf("stats %d open %d idle, want 2 and 0", open, idle)
	}
	waitSessions(t, server, 2)
	p.Release(asking, s3, false) // a broken session is ended upstream
	waitSessions(t, server, 1)
	p.Release(plain, s2, true)
	if st := p.StatsByUpstream()[url]; st != (UpstreamStats{Open: 1, Idle: 1, Initialized: 2}) {
		t.Fatalf("stats of %s = %+v, want 1 open, 1 idle, 2 initialized", url, st)
	}
}

// TestPoolMaxUses: a session is reused for MaxUses leases, then ended
// upstream at its last release, and the next lease opens a new one.
func TestPoolMaxUses(t *testing.T) {
	server, url := goSDKServer(t)
	ctx := context.Background()
	p := NewPool(PoolOptions{MaxSessions: 10, IdleTimeout: time.Minute, MaxUses: 3, Client: http.DefaultClient})
	defer p.Close()
	key := PoolKey{Upstream: url, Principal: "a", Caps: "{}"}
	var first *Session
	for i := range 4 {
		s, err := p.Lease(ctx, key, nil, []byte("{}"), nil, LeaseLimits{})
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case i == 0:
			first = s
		case i < 3 && s != first:
			t.Fatalf("lease %d opened another session before the first served 3", i)
		case i == 3 && s == first:
			t.Fatal("a session was leased a fourth time with MaxUses 3")
		}
		if got := callText(t, s, "caps"); got != "none" {
			t.Fatalf("lease %d: %q", i, got)
		}
		if i == 2 {
			p.Release(key, s, true) // its third: retired, ended upstream
			waitSessions(t, server, 0)
			continue
		}
		p.Release(key, s, true)
	}
	if st := p.StatsByUpstream()[url]; st != (UpstreamStats{Open: 1, Idle: 1, Initialized: 2}) {
		t.Fatalf("stats of %s = %+v, want 1 open, 1 idle, 2 initialized", url, st)
	}
}

func TestPoolBoundAndReap(t *testing.T) {
	server, url := goSDKServer(t)
	ctx := context.Background()
	p := NewPool(PoolOptions{MaxSessions: 2, IdleTimeout: 50 * time.Millisecond, Client: http.DefaultClient})
	defer p.Close()
	key := func(i string) PoolKey { return PoolKey{Upstream: url, Principal: i, Caps: "{}"} }

	a, err := p.Lease(ctx, key("a"), nil, nil, nil, LeaseLimits{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := p.Lease(ctx, key("b"), nil, nil, nil, LeaseLimits{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Lease(ctx, key("c"), nil, nil, nil, LeaseLimits{}); !errors.Is(err, ErrPoolFull) {
		t.Fatalf("third lease with two leased: %v, want ErrPoolFull", err)
	}
	p.Release(key("a"), a, true)
	c, err := p.Lease(ctx, key("c"), nil, nil, nil, LeaseLimits{}) // evicts a's idle session
	if err != nil {
		t.Fatal(err)
	}
	waitSessions(t, server, 2)
	p.Release(key("b"), b, true)
	p.Release(key("c"), c, true)
	time.Sleep(60 * time.Millisecond)
	if n := p.Reap(time.Now()); n != 2 {
		t.Fatalf("reaped %d idle sessions, want 2", n)
	}
	waitSessions(t, server, 0)
	if open, idle := p.Stats(); open != 0 || idle != 0 {
		t.Fatalf("stats %d open %d idle after reaping", open, idle)
	}
}

func TestSessionGone(t *testing.T) {
	server, url := goSDKServer(t)
	ctx := context.Background()
	s, err := Open(ctx, http.DefaultClient, url, nil, nil, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	for ss := range server.Sessions() {
		_ = ss.Close() // the upstream forgets the session
	}
	if _, err := s.Call(ctx, "tools/list", nil); !errors.Is(err, ErrSessionGone) {
		t.Fatalf("call on a forgotten session: %v, want ErrSessionGone", err)
	}
}

func callText(t *testing.T, s *Session, tool string) string {
	t.Helper()
	c, err := s.Call(context.Background(), "tools/call", []byte(`{"name":"`+tool+`","arguments":{}}`))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	m, err := c.Final()
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		Result struct {
			Content []struct{ Text string } `json:"content"`
		} `json:"result"`
	}
	if err := json.Unmarshal(m.Raw, &res); err != nil || len(res.Result.Content) == 0 {
		t.Fatalf("tool answer %s: %v", m.Raw, err)
	}
	return res.Result.Content[0].Text
}

// TestPoolPerPrincipal: a principal at MaxPerPrincipal gets its own oldest
// idle session closed to make room, or ErrPrincipalFull when none is idle;
// other principals are not affected.
func TestPoolPerPrincipal(t *testing.T) {
	server, url := goSDKServer(t)
	ctx := context.Background()
	p := NewPool(PoolOptions{MaxSessions: 10, IdleTimeout: time.Minute, Client: http.DefaultClient})
	defer p.Close()
	lim := LeaseLimits{MaxPerPrincipal: 2}
	key := func(principal, caps string) PoolKey { return PoolKey{Upstream: url, Principal: principal, Caps: caps} }

	a1, err := p.Lease(ctx, key("a", "{}"), nil, nil, nil, lim)
	if err != nil {
		t.Fatal(err)
	}
	a2, err := p.Lease(ctx, key("a", `{"elicitation":{}}`), nil, []byte(`{"elicitation":{}}`), nil, lim)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Lease(ctx, key("a", `{"sampling":{}}`), nil, nil, nil, lim); !errors.Is(err, ErrPrincipalFull) {
		t.Fatalf("a's third session with two leased: %v, want ErrPrincipalFull", err)
	}
	b1, err := p.Lease(ctx, key("b", "{}"), nil, nil, nil, lim)
	if err != nil {
		t.Fatalf("another principal: %v", err)
	}
	p.Release(key("a", "{}"), a1, true)
	a3, err := p.Lease(ctx, key("a", `{"sampling":{}}`), nil, nil, nil, lim) // closes a1
	if err != nil {
		t.Fatal(err)
	}
	if open, idle := p.Stats(); open != 3 || idle != 0 {
		t.Fatalf("stats %d open %d idle, want 3 and 0", open, idle)
	}
	waitSessions(t, server, 3)
	for _, r := range []struct {
		k PoolKey
		s *Session
	}{{key("a", `{"elicitation":{}}`), a2}, {key("a", `{"sampling":{}}`), a3}, {key("b", "{}"), b1}} {
		p.Release(r.k, r.s, false)
	}
	waitSessions(t, server, 0)
}

// TestPoolLeaseLimits: the limits come with each lease, so two
// configurations sharing the pool keep their own: a lease allowing three
// sessions per principal opens one where a lease allowing two is refused,
// and a session's call buffer is the one of the lease holding it.
func TestPoolLeaseLimits(t *testing.T) {
	_, url := goSDKServer(t)
	ctx := context.Background()
	p := NewPool(PoolOptions{MaxSessions: 10, IdleTimeout: time.Minute, Client: http.DefaultClient})
	defer p.Close()
	key := func(caps string) PoolKey { return PoolKey{Upstream: url, Principal: "a", Caps: caps} }
	two := LeaseLimits{MaxPerPrincipal: 2, CallBuffer: 5}
	three := LeaseLimits{MaxPerPrincipal: 3}

	s1, err := p.Lease(ctx, key("1"), nil, nil, nil, two)
	if err != nil {
		t.Fatal(err)
	}
	if got := s1.callBuffer(); got != 5 {
		t.Fatalf("call buffer %d, want the lease's 5", got)
	}
	s2, err := p.Lease(ctx, key("2"), nil, nil, nil, two)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Lease(ctx, key("3"), nil, nil, nil, two); !errors.Is(err, ErrPrincipalFull) {
		t.Fatalf("third session under a limit of 2: %v, want ErrPrincipalFull", err)
	}
	s3, err := p.Lease(ctx, key("3"), nil, nil, nil, three)
	if err != nil {
		t.Fatalf("third session under a limit of 3: %v", err)
	}
	p.Release(key("1"), s1, true)
	again, err := p.Lease(ctx, key("1"), nil, nil, nil, three) // the idle s1
	if err != nil {
		t.Fatal(err)
	}
	if again != s1 {
		t.Fatal("the idle session was not reused")
	}
	if got := again.callBuffer(); got != DefaultCallBuffer {
		t.Fatalf("call buffer %d after a lease without one, want %d", got, DefaultCallBuffer)
	}
	for _, r := range []struct {
		k PoolKey
		s *Session
	}{{key("1"), again}, {key("2"), s2}, {key("3"), s3}} {
		p.Release(r.k, r.s, false)
	}
}

// TestPoolCloseWaitsForReleases: a session released broken is ended
// upstream (DELETE) in the background; Close waits for that, so that a
// process exiting after its calls ended leaves no session, and no handler
// of a call the upstream did not take a cancellation for, open upstream.
// The upstream here takes 300 ms to answer a DELETE.
func TestPoolCloseWaitsForReleases(t *testing.T) {
	server := mcp.NewServer(&mcp.Implementation{Name: "pool-test", Version: "1"}, nil)
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodDelete {
			time.Sleep(300 * time.Millisecond)
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	p := NewPool(PoolOptions{MaxSessions: 10, IdleTimeout: time.Minute, Client: http.DefaultClient})
	key := PoolKey{Upstream: ts.URL, Principal: "a", Caps: "{}"}
	s, err := p.Lease(context.Background(), key, nil, []byte("{}"), nil, LeaseLimits{})
	if err != nil {
		t.Fatal(err)
	}
	waitSessions(t, server, 1)
	p.Release(key, s, false)
	p.Close()
	if n := countSessions(server); n != 0 {
		t.Fatalf("the upstream holds %d sessions once Close returned, want 0", n)
	}
}
