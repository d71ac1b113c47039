package reverse

import (
	"crypto/rand"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/seal"
)

// heldSession is a gateway-held session of principal, issued now, as
// Session returns it (nothing is sent upstream).
func heldSession(t *testing.T, principal string) *Session {
	t.Helper()
	s := &Session{ClientSession: seal.ClientSession{Principal: translate.PrincipalHash(principal), Issued: time.Now(), Upstream: "http://127.0.0.1:9/mcp"}}
	if _, err := rand.Read(s.ID[:]); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestFactTableRefusesWhenFull: a full table refuses new sessions' facts
// (503; 429 for a principal's full share) and keeps every live one; an
// expired entry makes room.
func TestFactTableRefusesWhenFull(t *testing.T) {
	tab := newFactTable(3, 2)
	now := time.Unix(1000, 0)
	key := func(i byte) [16]byte { return [16]byte{i} }
	a, b := translate.PrincipalHash("a"), translate.PrincipalHash("b")
	mark := func(f *sessionFacts) { f.deleted = true }
	for i, p := range map[byte][16]byte{1: a, 2: a, 3: b} {
		exp := now.Add(time.Hour)
		if i == 3 {
			exp = now.Add(time.Minute)
		}
		if rerr := tab.update(key(i), p, exp, now, true, mark); rerr != nil {
			t.Fatalf("entry %d: %v", i, rerr)
		}
	}
	if rerr := tab.update(key(4), b, now.Add(time.Hour), now, true, mark); rerr != errFactsFull {
		t.Fatalf("a fourth entry: %v, want 503", rerr)
	}
	for i := byte(1); i <= 3; i++ {
		gone := false
		tab.view(key(i), now, func(f *sessionFacts) { gone = f.deleted })
		if !gone {
			t.Errorf("entry %d was forgotten", i)
		}
	}
	later := now.Add(2 * time.Minute) // entry 3 expired
	if rerr := tab.update(key(5), a, now.Add(time.Hour), later, true, mark); rerr != errFactsPrincipalFull {
		t.Fatalf("a's third entry: %v, want 429", rerr)
	}
	if rerr := tab.update(key(4), b, now.Add(time.Hour), later, true, mark); rerr != nil {
		t.Fatalf("after an expiry: %v", rerr)
	}
	if n := tab.len(); n != 3 {
		t.Errorf("len %d, want 3", n)
	}
}

// TestReverseDeleteStaysDead: once the table is full, a DELETEd session
// stays refused and another session's level stays set, whatever other
// sessions try; the new ones are refused instead.
func TestReverseDeleteStaysDead(t *testing.T) {
	rv := newTestReverse(t)
	rv.facts = newFactTable(4, 4)
	victim, dead := heldSession(t, "v"), heldSession(t, "v")
	if rerr := rv.setLevel(victim, "debug"); rerr != nil {
		t.Fatal(rerr)
	}
	if rerr := rv.Delete(dead); rerr != nil {
		t.Fatal(rerr)
	}
	refused := 0
	for range 10 {
		if rv.setLevel(heldSession(t, "m"), "info") != nil {
			refused++
		}
	}
	if refused != 8 {
		t.Errorf("%d of 10 new sessions refused, want 8", refused)
	}
	if rerr := rv.Delete(heldSession(t, "m")); rerr == nil || rerr.HTTPStatus != http.StatusServiceUnavailable {
		t.Errorf("DELETE with a full table: %v, want 503", rerr)
	}
	if _, err := rv.Session(nil, dead.ClientSession, dead.Principal, time.Now()); !errors.Is(err, ErrNoSession) {
		t.Errorf("the deleted session: %v", err)
	}
	if l := rv.levelOf(victim); l != "debug" {
		t.Errorf("the victim's level is %q", l)
	}
}

// TestReverseSubscribeBounds: a URI longer than maxSubscribeURI is
// refused; a session holds at most maxSubscriptionBytes, a principal
// maxSubscriptionBytesPerPrincipal (429); unsubscribing and DELETE give
// the bytes back.
func TestReverseSubscribeBounds(t *testing.T) {
	rv := newTestReverse(t)
	s := heldSession(t, "p")
	if rerr := rv.subscribe(s, strings.Repeat("u", maxSubscribeURI+1), true, 0); rerr == nil || rerr.Code != jsonrpc.InvalidParams {
		t.Fatalf("a long URI: %v", rerr)
	}
	uri := func(i int) string {
		return strings.Repeat("x", maxSubscribeURI-8) + strings.Repeat("0", 7) + string(rune('a'+i))
	}
	n := 0
	for i := range 20 {
		if rv.subscribe(s, uri(i), true, 0) != nil {
			break
		}
		n++
	}
	if want := maxSubscriptionBytes / (maxSubscribeURI + subscriptionOverhead); n != want {
		t.Fatalf("%d URIs of %d bytes held, want %d", n, maxSubscribeURI, want)
	}
	if rerr := rv.subscribe(s, uri(0), false, 0); rerr != nil {
		t.Fatal(rerr)
	}
	if rerr := rv.subscribe(s, uri(19), true, 0); rerr != nil {
		t.Fatalf("after an unsubscribe: %v", rerr)
	}
	// The principal's share: its sessions fill 4 MiB, then 429.
	var rerr *jsonrpc.RPCError
	sessions := 1
	for rerr == nil && sessions < 100 {
		o := heldSession(t, "p")
		sessions++
		for i := range 7 {
			if rerr = rv.subscribe(o, uri(i), true, 0); rerr != nil {
				break
			}
		}
	}
	if rerr == nil || rerr.HTTPStatus != http.StatusTooManyRequests {
		t.Fatalf("after %d sessions: %v, want 429", sessions, rerr)
	}
	if rerr := rv.subscribe(heldSession(t, "q"), uri(0), true, 0); rerr != nil {
		t.Errorf("another principal: %v", rerr)
	}
	_, before := rv.subBytes.c.Held(s.Principal)
	if rerr := rv.Delete(s); rerr != nil {
		t.Fatal(rerr)
	}
	if _, after := rv.subBytes.c.Held(s.Principal); before-after != 7*(maxSubscribeURI+subscriptionOverhead) {
		t.Errorf("DELETE gave back %d bytes", before-after)
	}
}

// TestResubscribeBudget: a new filter goes upstream at once while the
// bytes sent stay within 1.5 times the client's and the allowance; else it
// waits for reverseResubscribeEvery after the previous one.
func TestResubscribeBudget(t *testing.T) {
	st := &reverseSubscriptions{heard: 10000}
	now := time.Unix(1000, 0)
	for _, c := range []struct {
		n  int64
		ok bool
	}{{10000, true}, {9000, true}, {200, false}} {
		at, ok := st.admit(c.n, now)
		if ok != c.ok {
			t.Fatalf("a filter of %d bytes after %d sent: %t", c.n, st.sent, ok)
		}
		if !ok && !at.Equal(now.Add(reverseResubscribeEvery)) {
			t.Errorf("it may go at %v", at)
		}
	}
	if _, ok := st.admit(20, now.Add(reverseResubscribeEvery)); !ok {
		t.Error("refused after the period")
	}
}

// TestStreamCount: GET streams are bounded per principal (429) and in all
// (503); leaving frees a place, once.
func TestStreamCount(t *testing.T) {
	c := newStreamCount()
	a, b := translate.PrincipalHash("a"), translate.PrincipalHash("b")
	leaveA, rerr := c.enter(a, 3, 2)
	if rerr != nil {
		t.Fatal(rerr)
	}
	if _, rerr := c.enter(a, 3, 2); rerr != nil {
		t.Fatal(rerr)
	}
	if _, rerr := c.enter(a, 3, 2); rerr == nil || rerr.HTTPStatus != http.StatusTooManyRequests {
		t.Fatalf("a's third: %v, want 429", rerr)
	}
	if _, rerr := c.enter(b, 3, 2); rerr != nil {
		t.Fatal(rerr)
	}
	if _, rerr := c.enter(b, 3, 2); rerr == nil || rerr.HTTPStatus != http.StatusServiceUnavailable {
		t.Fatalf("the fourth: %v, want 503", rerr)
	}
	leaveA()
	leaveA()
	if total, of := c.open(a); total != 2 || of != 1 {
		t.Fatalf("open %d, of a %d", total, of)
	}
}

// TestFactsTidy: an entry that holds nothing (its URIs unsubscribed, no
// level, no DELETE, no live stream) leaves the table, so that only facts
// count toward its bounds; a session keeps its subscriptions otherwise.
func TestFactsTidy(t *testing.T) {
	rv := newTestReverse(t)
	s := heldSession(t, "p")
	if rerr := rv.subscribe(s, "test://a", true, 0); rerr != nil {
		t.Fatal(rerr)
	}
	if n := rv.facts.len(); n != 1 {
		t.Fatalf("%d entries with a subscription, want 1", n)
	}
	if rerr := rv.subscribe(s, "test://a", false, 0); rerr != nil {
		t.Fatal(rerr)
	}
	if n := rv.facts.len(); n != 0 {
		t.Fatalf("%d entries after the last unsubscribe, want 0", n)
	}
	st, _ := rv.subscriptionsOf(s)
	if ok, _ := st.claim(); !ok {
		t.Fatal("no claim")
	}
	rv.facts.tidy(s.ID)
	if n := rv.facts.len(); n != 1 {
		t.Fatalf("%d entries with a live stream, want 1", n)
	}
	st.unclaim()
	rv.facts.tidy(s.ID)
	if rerr := rv.subscribe(s, "test://b", true, 0); rerr != nil {
		t.Fatal(rerr)
	}
	if st2, _ := rv.subscriptionsOf(s); st2 == st || !st2.subscribed([]byte(`{"method":"notifications/resources/updated","params":{"uri":"test://b"}}`)) {
		t.Fatal("the subscription after a tidy went to the retired subscriptions")
	}
	if rerr := rv.setLevel(heldSession(t, "p"), "info"); rerr != nil || rv.facts.len() != 2 {
		t.Fatalf("a level: %v, %d entries", rerr, rv.facts.len())
	}
}
