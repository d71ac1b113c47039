package forward

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/legacy"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/tidwall/gjson"
)

// TestPlacesFinishedElsewhere: calls parked on one instance whose retries
// finish them on another give their places back: with max_parked 3, ten
// such calls in a row all park (the 4th was refused with 503 before), the
// upstream keeps none of their sessions, and the parking instance keeps at
// most the places it checked last.
func TestPlacesFinishedElsewhere(t *testing.T) {
	upstream, server := resumableUpstream(t)
	bs := fleet(t, 2, func(o *Options) { o.MaxParked = 3; o.ResumeLinger = -1 })
	for i := range 10 {
		a := serve(bs[0], resumeRequest(t, upstream, 10*i, 1, ""))
		if a.status != http.StatusOK {
			t.Fatalf("call %d: the parking instance refused it: %d %s", i, a.status, a.final)
		}
		extra, _ := answerRound(t, a, fmt.Sprintf("x%d", i))
		a = serve(bs[1], resumeRequest(t, upstream, 10*i+1, 1, extra))
		if got := gjson.GetBytes(a.final, "result.content.0.text").String(); got != fmt.Sprintf("accept:x%d", i) {
			t.Fatalf("call %d on the other instance: %d %s", i, a.status, a.final)
		}
	}
	waitPrimedOnly(t, server, bs[0])
	if n := bs[0].Places(); n > 3 {
		t.Fatalf("%d places on the parking instance, want at most max_parked", n)
	}
}

// TestPlacesEndingNow: a call refused for want of room waits for a place
// whose call has just ended elsewhere, its session's DELETE still on the
// way (the upstream here takes 100 ms to end a session): with max_parked
// 1, each call parked on one instance and finished on the other is
// followed at once by a new call on the first, which parks. Before, the
// check found the previous session alive and the new call was refused.
func TestPlacesEndingNow(t *testing.T) {
	server := askServer()
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server },
		&mcp.StreamableHTTPOptions{EventStore: mcp.NewMemoryEventStore(nil)})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodDelete {
			time.Sleep(100 * time.Millisecond)
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	bs := fleet(t, 2, func(o *Options) { o.MaxParked = 1; o.ResumeLinger = -1 })
	for i := range 4 {
		a := serve(bs[0], resumeRequest(t, ts.URL, 10*i, 1, ""))
		if a.status != http.StatusOK {
			t.Fatalf("call %d: the parking instance refused it: %d %s", i, a.status, a.final)
		}
		extra, _ := answerRound(t, a, fmt.Sprintf("x%d", i))
		a = serve(bs[1], resumeRequest(t, ts.URL, 10*i+1, 1, extra))
		if got := gjson.GetBytes(a.final, "result.content.0.text").String(); got != fmt.Sprintf("accept:x%d", i) {
			t.Fatalf("call %d on the other instance: %d %s", i, a.status, a.final)
		}
	}
}

// TestPlacesStillParkedCount: places of calls still parked keep counting:
// a principal that parks max_parked_per_principal calls and never retries
// is refused the next (429), the check having found their sessions alive,
// while another principal still parks; the refused call's session is
// ended upstream, the parked ones are not.
func TestPlacesStillParkedCount(t *testing.T) {
	upstream, server := resumableUpstream(t)
	b := fleet(t, 1, func(o *Options) { o.MaxParkedPerPrincipal = 2; o.ResumeLinger = -1 })[0]
	for i := range 2 {
		if a := serve(b, resumeRequest(t, upstream, i, 1, "")); a.status != http.StatusOK {
			t.Fatalf("call %d: %d %s", i, a.status, a.final)
		}
	}
	a := serve(b, resumeRequest(t, upstream, 2, 1, ""))
	if a.status != http.StatusTooManyRequests || gjson.GetBytes(a.final, "error.code").Int() != jsonrpc.InternalError {
		t.Fatalf("third call of the principal: %d %s, want 429", a.status, a.final)
	}
	other := resumeRequest(t, upstream, 3, 1, "")
	other.Principal = translate.PrincipalHash("q")
	if a := serve(b, other); a.status != http.StatusOK {
		t.Fatalf("another principal's call: %d %s", a.status, a.final)
	}
	if b.Places() != 3 {
		t.Fatalf("%d places, want the 3 parked calls'", b.Places())
	}
	waitSessions(t, server, 3)
}

// TestPlacesCheckedInTheBackground: a place whose call finished elsewhere
// is freed by the background check, with no new call asking for room; a
// place whose call is still parked stays.
func TestPlacesCheckedInTheBackground(t *testing.T) {
	upstream, _ := resumableUpstream(t)
	bs := fleet(t, 2, func(o *Options) { o.ResumeLinger = -1 })
	bs[0].checkAfter = 50 * time.Millisecond
	parked := serve(bs[0], resumeRequest(t, upstream, 1, 1, ""))
	a := serve(bs[0], resumeRequest(t, upstream, 2, 1, ""))
	extra, _ := answerRound(t, a, "y")
	if a = serve(bs[1], resumeRequest(t, upstream, 3, 1, extra)); gjson.GetBytes(a.final, "result.content.0.text").String() != "accept:y" {
		t.Fatalf("on the other instance: %d %s", a.status, a.final)
	}
	deadline := time.Now().Add(5 * time.Second)
	for bs[0].Places() != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("%d places after the other instance finished one of two calls, want 1", bs[0].Places())
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // several checks of the live one
	if bs[0].Places() != 1 {
		t.Fatalf("the place of the call still parked was freed")
	}
	extra, _ = answerRound(t, parked, "z")
	if a = serve(bs[0], resumeRequest(t, upstream, 4, 1, extra)); gjson.GetBytes(a.final, "result.content.0.text").String() != "accept:z" {
		t.Fatalf("the call still parked: %d %s", a.status, a.final)
	}
}

// TestPlacesOneCallOnePlace: a call whose rounds alternate between two
// instances holds one place on each, not one per round it parked there.
func TestPlacesOneCallOnePlace(t *testing.T) {
	upstream, _ := resumableUpstream(t)
	bs := fleet(t, 2, func(o *Options) { o.ResumeLinger = -1 })
	a := serve(bs[0], resumeRequest(t, upstream, 1, 5, ""))
	for round := 1; round <= 4; round++ {
		extra, _ := answerRound(t, a, fmt.Sprintf("x%d", round))
		a = serve(bs[round%2], resumeRequest(t, upstream, 1+round, 5, extra))
		for i, b := range bs {
			if n := b.Places(); n > 1 {
				t.Fatalf("round %d: %d places of one call on instance %d", round, n, i)
			}
		}
	}
}

// TestPlacesHoldSessions: the places of calls finished elsewhere hold
// sessions of the parking instance's pool; when the pool refuses a new
// call a session (max_sessions_per_principal 2 here), they are checked
// and given back, and the call goes on.
func TestPlacesHoldSessions(t *testing.T) {
	upstream, server := resumableUpstream(t)
	bs := fleet(t, 2, func(o *Options) { o.Lease.MaxPerPrincipal = 2; o.ResumeLinger = -1 })
	for i := range 6 {
		a := serve(bs[0], resumeRequest(t, upstream, 10*i, 1, ""))
		if a.status != http.StatusOK {
			t.Fatalf("call %d: the parking instance refused it: %d %s", i, a.status, a.final)
		}
		extra, _ := answerRound(t, a, fmt.Sprintf("x%d", i))
		if a = serve(bs[1], resumeRequest(t, upstream, 10*i+1, 1, extra)); a.status != http.StatusOK {
			t.Fatalf("call %d on the other instance: %d %s", i, a.status, a.final)
		}
		waitPrimedOnly(t, server, bs[0]) // the other instance ended it
	}
}

// waitPrimedOnly fails unless, within 5s, the upstream holds no session
// but the one b's pool may keep idle for its next call (prime.go).
func waitPrimedOnly(t *testing.T, server *mcp.Server, b *Bridge) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, idle := b.pool.Stats()
		n := sessionsOf(server)
		if n == idle && idle <= 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d upstream sessions, %d idle in the parking instance's pool: want only the one it primed", n, idle)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestPlacesPrimed: once a place was found finished elsewhere, a call whose
// key parked here before leaves an idle session ready in the pool as it
// parks, and the next call here takes it instead of initializing one while
// its client waits; a single instance, whose retries come back, primes
// none.
func TestPlacesPrimed(t *testing.T) {
	upstream, server := resumableUpstream(t)
	alone := fleet(t, 1, func(o *Options) { o.ResumeLinger = -1 })[0]
	a := serve(alone, resumeRequest(t, upstream, 1, 1, ""))
	extra, _ := answerRound(t, a, "z")
	if a = serve(alone, resumeRequest(t, upstream, 2, 1, extra)); gjson.GetBytes(a.final, "result.content.0.text").String() != "accept:z" {
		t.Fatalf("single instance: %d %s", a.status, a.final)
	}
	if st := alone.pool.StatsByUpstream()[upstream]; st.Initialized != 1 {
		t.Fatalf("a single instance initialized %d sessions for one call, want 1", st.Initialized)
	}
	alone.Close()
	alone.pool.Close()
	waitNoSessions(t, server)

	bs := fleet(t, 2, func(o *Options) { o.ResumeLinger = -1 })
	bs[0].checkAfter = 20 * time.Millisecond
	cross := func(i int) {
		t.Helper()
		a := serve(bs[0], resumeRequest(t, upstream, 10*i, 1, ""))
		extra, _ := answerRound(t, a, "y")
		if a = serve(bs[1], resumeRequest(t, upstream, 10*i+1, 1, extra)); gjson.GetBytes(a.final, "result.content.0.text").String() != "accept:y" {
			t.Fatalf("call %d on the other instance: %d %s", i, a.status, a.final)
		}
	}
	cross(0)
	deadline := time.Now().Add(5 * time.Second)
	for !bs[0].retriesGoElsewhere() {
		if time.Now().After(deadline) {
			t.Fatal("the place of a call finished elsewhere was not found so")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cross(1)
	waitPrimedOnly(t, server, bs[0])
	if _, idle := bs[0].pool.Stats(); idle != 1 {
		t.Fatalf("%d idle sessions after a call went elsewhere, want the one primed", idle)
	}
	waitPlaces(t, bs[0], 0) // the second call's, found finished elsewhere
	// The idle session, looked at by leasing it and giving it back.
	next := resumeRequest(t, upstream, 20, 1, "")
	key := poolKey(next)
	sess, err := bs[0].pool.Lease(context.Background(), key, nil, []byte(key.Caps), nil, legacy.LeaseLimits{})
	if err != nil {
		t.Fatal(err)
	}
	primed := sess.ID
	bs[0].pool.Release(key, sess, true)
	if a := serve(bs[0], next); a.status != http.StatusOK {
		t.Fatalf("call 2: %d %s", a.status, a.final)
	}
	bs[0].mu.Lock()
	var parkedOn legacy.UpstreamSessionID
	for _, p := range bs[0].places {
		parkedOn = p.sess.ID
	}
	bs[0].mu.Unlock()
	if parkedOn != primed {
		t.Fatalf("the next call parked on session %q, want the primed %q", parkedOn, primed)
	}
}

// TestPlacesRefusalsCheckOnce: a flood of calls refused for want of room
// does not make the instance check the places once per call: a pass that
// freed nothing answers the refusals made right after it (for at least
// reclaimCooldownMin), and the next pass after it checks again.
func TestPlacesRefusalsCheckOnce(t *testing.T) {
	server := askServer()
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server },
		&mcp.StreamableHTTPOptions{EventStore: mcp.NewMemoryEventStore(nil)})
	var checks atomic.Int32
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if bytes.Contains(body, []byte(`"gw-alive-`)) {
			checks.Add(1)
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	b := fleet(t, 1, func(o *Options) { o.MaxParked = 2; o.ResumeLinger = -1 })[0]
	for i := range 2 {
		if a := serve(b, resumeRequest(t, ts.URL, i, 1, "")); a.status != http.StatusOK {
			t.Fatalf("call %d: %d %s", i, a.status, a.final)
		}
	}
	distrust := func() {
		b.mu.Lock()
		for _, p := range b.places {
			p.trustedUntil = 0
		}
		b.mu.Unlock()
	}
	if reclaimOnce(b) {
		t.Fatal("a pass freed a place of a live call")
	}
	if n := checks.Load(); n != 2 {
		t.Fatalf("the first pass made %d checks, want 2", n)
	}
	distrust()
	for range 10 {
		if reclaimOnce(b) {
			t.Fatal("a pass freed a place of a live call")
		}
	}
	if n := checks.Load(); n != 2 {
		t.Fatalf("ten refusals right after a pass made %d more checks, want none", n-2)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		b.mu.Lock()
		n := len(b.reclaiming)
		b.mu.Unlock()
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the pass was never forgotten")
		}
		time.Sleep(10 * time.Millisecond)
	}
	reclaimOnce(b)
	if n := checks.Load(); n != 4 {
		t.Fatalf("a pass after the cooldown made %d checks, want 2", n-2)
	}
}

// reclaimOnce runs one pass making room among b's default options' places
// (or takes the answer of the pass that stands), as a refused call does,
// and reports whether it freed a place.
func reclaimOnce(b *Bridge) bool {
	b.mu.Lock()
	return b.reclaimLocked(reclaimKey{opts: b.defaults}).freed
}
