package legacy

import (
	"context"
	"net/http"
	"testing"
	"time"
)

// TestPoolPrime: Prime opens one idle session for a key that has none, and
// the next Lease takes it without initializing; it never opens a second one
// for the key, never goes past the principal's or the pool's bound, and does
// nothing once the pool is closed.
func TestPoolPrime(t *testing.T) {
	server, url := goSDKServer(t)
	ctx := context.Background()
	p := NewPool(PoolOptions{MaxSessions: 3, IdleTimeout: time.Minute, Client: http.DefaultClient})
	key := PoolKey{Upstream: url, Principal: "a", Caps: "{}"}
	limits := LeaseLimits{MaxPerPrincipal: 2}

	if !p.Prime(ctx, key, nil, []byte("{}"), nil, limits) {
		t.Fatal("Prime of a key without idle session opened none")
	}
	if p.Prime(ctx, key, nil, []byte("{}"), nil, limits) {
		t.Fatal("Prime opened a second idle session for a key that has one")
	}
	waitSessions(t, server, 1)
	s, err := p.Lease(ctx, key, nil, []byte("{}"), nil, limits)
	if err != nil {
		t.Fatal(err)
	}
	if st := p.StatsByUpstream()[url]; st.Initialized != 1 {
		t.Fatalf("the lease after Prime initialized a session (%d initialized), want the primed one", st.Initialized)
	}
	if got := callText(t, s, "caps"); got != "none" {
		t.Fatalf("primed session answered %q", got)
	}
	if !p.Prime(ctx, key, nil, []byte("{}"), nil, limits) {
		t.Fatal("Prime with the key's session leased opened none")
	}
	// The principal holds 2 sessions now (its bound): no more.
	p.Release(key, s, true)
	other := PoolKey{Upstream: url, Principal: "a", Caps: `{"elicitation":{}}`}
	if p.Prime(ctx, other, nil, []byte(`{"elicitation":{}}`), nil, limits) {
		t.Fatal("Prime went past the principal's bound")
	}
	// A third principal's session fills the pool (3): Prime never evicts.
	if !p.Prime(ctx, PoolKey{Upstream: url, Principal: "b", Caps: "{}"}, nil, nil, nil, LeaseLimits{}) {
		t.Fatal("Prime for another principal opened none")
	}
	if p.Prime(ctx, PoolKey{Upstream: url, Principal: "c", Caps: "{}"}, nil, nil, nil, LeaseLimits{}) {
		t.Fatal("Prime went past the pool's bound")
	}
	waitSessions(t, server, 3)
	p.Close()
	waitSessions(t, server, 0)
	if p.Prime(ctx, PoolKey{Upstream: url, Principal: "d", Caps: "{}"}, nil, nil, nil, LeaseLimits{}) {
		t.Fatal("Prime opened a session in a closed pool")
	}
	if n := countSessions(server); n != 0 {
		t.Fatalf("%d upstream sessions after Close", n)
	}
}
