package forward

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
	"github.com/tidwall/gjson"
)

// as is r with another principal.
func as(r Request, principal string) Request {
	r.Principal = translate.PrincipalHash(principal)
	return r
}

// checkRefused fails unless a is the refusal of a call: status, -32603 and
// a message naming the limit and saying whether the call was sent.
func checkRefused(t *testing.T, a *recordedAnswer, status int, limit, what string) {
	t.Helper()
	msg := gjson.GetBytes(a.final, "error.message").String()
	if a.status != status || gjson.GetBytes(a.final, "error.code").Int() != jsonrpc.InternalError ||
		!strings.Contains(msg, "("+limit+")") || !strings.Contains(msg, what) {
		t.Fatalf("answered %d %s, want %d -32603 naming %s and %q", a.status, a.final, status, limit, what)
	}
}

// answer retries the parked call a answered with "x" and returns the
// final answer.
func answer(t *testing.T, b *Bridge, upstream, principal string, id int, a *recordedAnswer) *recordedAnswer {
	t.Helper()
	return serve(b, as(retryOf(t, upstream, id, 1, a), principal))
}

func completed(a *recordedAnswer) bool {
	return gjson.GetBytes(a.final, "result.content.0.text").String() == "accept:x"
}

func (b *Bridge) placesHeld() (held int, sets int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, s := range b.sets {
		held += s.held
	}
	return held, len(b.sets)
}

// TestBridgeFullRefusesNewCall: with max_parked reached, a new call of
// another principal is refused (503), never one of the parked calls ended:
// a target not known to ask is refused when it parks (its upstream session
// is ended), a known one before it reaches the upstream (no session is
// opened); the parked calls all complete afterwards.
func TestBridgeFullRefusesNewCall(t *testing.T) {
	upA, _ := legacyUpstream(t)
	upB, serverB := legacyUpstream(t)
	b := limitedBridge(t, bridgeOptions(func(o *Options) { o.ParkTTL, o.MaxParked = time.Minute, 2 }))
	var alice []*recordedAnswer
	for i := range 2 {
		a := serve(b, as(askRequest(t, upA, 1+i, 1, ""), "alice"))
		if gjson.GetBytes(a.final, "result.resultType").String() != "input_required" {
			t.Fatalf("alice's call %d: %d %s", i, a.status, a.final)
		}
		alice = append(alice, a)
	}

	// upB's ask is not known to ask: it runs, asks, and is refused.
	checkRefused(t, serve(b, as(askRequest(t, upB, 10, 1, ""), "mallory-1")), http.StatusServiceUnavailable, "max_parked", "was cancelled")
	waitNoSessions(t, serverB)
	// upA's ask is: refused before it is sent.
	checkRefused(t, serve(b, as(askRequest(t, upA, 11, 1, ""), "mallory-2")), http.StatusServiceUnavailable, "max_parked", "was not sent")
	if n := b.pool.StatsByUpstream()[upA].Initialized; n != 2 {
		t.Fatalf("%d upstream sessions initialized on A, want alice's 2 only", n)
	}
	if b.Parked() != 2 {
		t.Fatalf("%d parked, want alice's 2", b.Parked())
	}
	for i, a := range alice {
		if done := answer(t, b, upA, "alice", 20+i, a); !completed(done) {
			t.Fatalf("alice's call %d: %d %s", i, done.status, done.final)
		}
	}
	if held, sets := b.placesHeld(); b.Parked() != 0 || held != 0 || sets != 0 {
		t.Fatalf("%d parked, %d places held in %d sets after every call ended", b.Parked(), held, sets)
	}
	// Room again.
	if a := serve(b, as(askRequest(t, upA, 30, 1, ""), "mallory-3")); gjson.GetBytes(a.final, "result.resultType").String() != "input_required" {
		t.Fatalf("after the table emptied: %d %s", a.status, a.final)
	}
}

// TestBridgeParkedPerPrincipal: a principal at max_parked_per_principal
// has its new calls refused (429), at park time or before the call is
// sent; another principal still parks, and the first parks again once one
// of its calls ended.
func TestBridgeParkedPerPrincipal(t *testing.T) {
	upA, _ := legacyUpstream(t)
	upB, serverB := legacyUpstream(t)
	b := limitedBridge(t, bridgeOptions(func(o *Options) { o.ParkTTL, o.MaxParked, o.MaxParkedPerPrincipal = time.Minute, 10, 2 }))
	var alice []*recordedAnswer
	for i := range 2 {
		alice = append(alice, serve(b, as(askRequest(t, upA, 1+i, 1, ""), "alice")))
	}
	checkRefused(t, serve(b, as(askRequest(t, upB, 3, 1, ""), "alice")), http.StatusTooManyRequests, "max_parked_per_principal", "was cancelled")
	waitNoSessions(t, serverB)
	checkRefused(t, serve(b, as(askRequest(t, upA, 4, 1, ""), "alice")), http.StatusTooManyRequests, "max_parked_per_principal", "was not sent")
	if a := serve(b, as(askRequest(t, upA, 5, 1, ""), "bob")); gjson.GetBytes(a.final, "result.resultType").String() != "input_required" {
		t.Fatalf("bob: %d %s", a.status, a.final)
	}
	if done := answer(t, b, upA, "alice", 6, alice[0]); !completed(done) {
		t.Fatalf("alice's first call: %d %s", done.status, done.final)
	}
	if a := serve(b, as(askRequest(t, upA, 7, 1, ""), "alice")); gjson.GetBytes(a.final, "result.resultType").String() != "input_required" {
		t.Fatalf("alice after one of her calls ended: %d %s", a.status, a.final)
	}
	if done := answer(t, b, upA, "alice", 8, alice[1]); !completed(done) {
		t.Fatalf("alice's second call: %d %s", done.status, done.final)
	}
}

// TestParkTable drives the table alone: a call keeps its place across
// rounds (admitting it again takes no second place), the bounds hold under
// concurrent admissions and releases (run with -race), and every place is
// given back.
func TestParkTable(t *testing.T) {
	b := New(nil, DefaultOptions())
	o := bridgeOptions(func(o *Options) { o.MaxParked, o.MaxParkedPerPrincipal = 5, 2 }).Ready()
	admit := func(c *call) *jsonrpc.RPCError {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.admitLocked(c)
	}

	first := &call{opts: o, princ: translate.PrincipalHash("a")}
	if admit(first) != nil || admit(first) != nil {
		t.Fatal("a call was refused its own place")
	}
	if held, _ := b.placesHeld(); held != 1 {
		t.Fatalf("%d places held by one call", held)
	}
	second := &call{opts: o, princ: translate.PrincipalHash("a")}
	if admit(second) != nil {
		t.Fatal("the principal's second call was refused")
	}
	if rerr := admit(&call{opts: o, princ: translate.PrincipalHash("a")}); rerr == nil || rerr.HTTPStatus != http.StatusTooManyRequests {
		t.Fatalf("the principal's third call: %v, want 429", rerr)
	}
	b.release(first)
	b.release(first) // a second release frees nothing
	b.release(second)
	if held, sets := b.placesHeld(); held != 0 || sets != 0 {
		t.Fatalf("%d places in %d sets after release", held, sets)
	}

	var admitted, refused, over atomic.Int64
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 500 {
				c := &call{opts: o, princ: translate.PrincipalHash(fmt.Sprint((g + i) % 4))}
				if admit(c) != nil {
					refused.Add(1)
					continue
				}
				admitted.Add(1)
				b.mu.Lock()
				if s := b.sets[o]; s.held > o.MaxParked || s.byPrin[c.princ] > o.MaxParkedPerPrincipal {
					over.Add(1)
				}
				b.mu.Unlock()
				b.release(c)
			}
		}()
	}
	wg.Wait()
	if over.Load() != 0 || admitted.Load() == 0 {
		t.Fatalf("%d admissions over a bound; %d admitted, %d refused", over.Load(), admitted.Load(), refused.Load())
	}
	if held, sets := b.placesHeld(); held != 0 || sets != 0 {
		t.Fatalf("%d places in %d sets after every release", held, sets)
	}
}
