package forward

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
)

// lingering counts the calls lingering with their streams open on b.
func lingering(b *Bridge) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, p := range b.places {
		if p.hot != nil {
			n++
		}
	}
	return n
}

// waitNotLingering fails unless no call lingers on b within 5s.
func waitNotLingering(t *testing.T, b *Bridge) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for lingering(b) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d calls still linger with their streams open", lingering(b))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func linger(d time.Duration) func(*Options) {
	return func(o *Options) { o.ResumeLinger = d }
}

// teach makes the ask tool a quick target on b: a call whose retry comes
// back to b at once (it does not linger: the target is not known yet).
func teach(t *testing.T, b *Bridge, upstream string) {
	t.Helper()
	a := serve(b, resumeRequest(t, upstream, 100, 1, ""))
	if lingering(b) != 0 {
		t.Fatalf("the call of a target not known to be quick lingers")
	}
	extra, _ := answerRound(t, a, "warm")
	if a = serve(b, resumeRequest(t, upstream, 101, 1, extra)); gjson.GetBytes(a.final, "result.content.0.text").String() != "accept:warm" {
		t.Fatalf("teaching call: %d %s", a.status, a.final)
	}
}

// TestLingerRetryReadsOn: the first round of a target not known to be
// quick does not linger; its retry, back at once, teaches the parking
// instance, and the next rounds linger: their retries read on from the
// call's open stream, and the upstream sees no GET reopening it. With the
// linger off, every round reopens the stream once.
func TestLingerRetryReadsOn(t *testing.T) {
	for _, c := range []struct {
		name    string
		linger  time.Duration
		reopens int32
	}{{"lingering", time.Minute, 1}, {"off", -1, 3}} {
		t.Run(c.name, func(t *testing.T) {
			upstream, server, reopens := countedResumableUpstream(t)
			b := fleet(t, 1, linger(c.linger))[0]
			a := serve(b, resumeRequest(t, upstream, 1, 3, ""))
			for round := 1; round <= 3; round++ {
				if p := b.Parked(); p != 0 {
					t.Fatalf("round %d: %d calls parked holding (the state must be the resumable one)", round, p)
				}
				want := 0
				if c.linger > 0 && round > 1 {
					want = 1
				}
				if lingering(b) != want {
					t.Fatalf("round %d: %d calls lingering, want %d", round, lingering(b), want)
				}
				extra, _ := answerRound(t, a, fmt.Sprintf("x%d", round))
				a = serve(b, resumeRequest(t, upstream, 1+round, 3, extra))
			}
			if got := gjson.GetBytes(a.final, "result.content.0.text").String(); got != "accept:x1,accept:x2,accept:x3" {
				t.Fatalf("final %d %s", a.status, a.final)
			}
			if got := reopens.Load(); got != c.reopens {
				t.Fatalf("the upstream saw %d GETs reopening the call's stream, want %d", got, c.reopens)
			}
			if _, idle := b.pool.Stats(); idle != 1 {
				t.Fatalf("%d idle sessions in the pool after the call, want its session back", idle)
			}
			if sessionsOf(server) != 1 || lingering(b) != 0 || b.Places() != 0 {
				t.Fatalf("after the call: %d upstream sessions, %d lingering, %d places", sessionsOf(server), lingering(b), b.Places())
			}
		})
	}
}

// TestLingerRetryElsewhere: a call lingering on the instance that parked
// it (for a minute: only a stir on its stream ends that) is resumed by
// another instance at once. The go-sdk server lets one connection hold a
// stream; the answer posted by the other instance makes the tool ask
// again on the stream the first still holds, which lets go of it at that
// stir, and the other instance's GET gets it: each round of three goes on
// through the other instance.
func TestLingerRetryElsewhere(t *testing.T) {
	upstream, server, reopens := countedResumableUpstream(t)
	bs := fleet(t, 2, linger(time.Minute))
	teach(t, bs[0], upstream)
	teach(t, bs[1], upstream)
	reopens.Store(0)
	a := serve(bs[0], resumeRequest(t, upstream, 1, 3, ""))
	for round := 1; round <= 3; round++ {
		parker, next := bs[(round-1)%2], bs[round%2]
		if lingering(parker) != 1 {
			t.Fatalf("round %d: %d calls lingering on the parking instance, want 1", round, lingering(parker))
		}
		extra, _ := answerRound(t, a, fmt.Sprintf("x%d", round))
		a = serve(next, resumeRequest(t, upstream, 1+round, 3, extra))
		waitNotLingering(t, parker)
	}
	if got := gjson.GetBytes(a.final, "result.content.0.text").String(); got != "accept:x1,accept:x2,accept:x3" {
		t.Fatalf("final %d %s", a.status, a.final)
	}
	if reopens.Load() < 3 {
		t.Fatalf("%d GETs reopened the call's stream, want one per round at least", reopens.Load())
	}
	// The call's session ended with it; the teaching calls' wait in
	// their pools.
	_, idle0 := bs[0].pool.Stats()
	_, idle1 := bs[1].pool.Stats()
	waitSessions(t, server, idle0+idle1)
}

// TestLingerClose: closing the bridge lets go of the lingering calls'
// streams; their states stay resumable, and another instance finishes the
// call.
func TestLingerClose(t *testing.T) {
	upstream, server, reopens := countedResumableUpstream(t)
	bs := fleet(t, 2, linger(time.Minute))
	teach(t, bs[0], upstream)
	reopens.Store(0)
	a := serve(bs[0], resumeRequest(t, upstream, 1, 1, ""))
	if lingering(bs[0]) != 1 {
		t.Fatalf("%d calls lingering, want 1", lingering(bs[0]))
	}
	bs[0].Close()
	if lingering(bs[0]) != 0 {
		t.Fatalf("%d calls lingering after Close", lingering(bs[0]))
	}
	extra, _ := answerRound(t, a, "after")
	a = serve(bs[1], resumeRequest(t, upstream, 2, 1, extra))
	if got := gjson.GetBytes(a.final, "result.content.0.text").String(); got != "accept:after" || a.status != http.StatusOK {
		t.Fatalf("final %d %s", a.status, a.final)
	}
	if reopens.Load() != 1 {
		t.Fatalf("%d GETs reopened the call's stream, want 1", reopens.Load())
	}
	waitNoSessions(t, server)
}

// TestLingerUnlearned: a linger that ends with no retry makes the target
// not quick any more: its next call parks with no stream held at once.
func TestLingerUnlearned(t *testing.T) {
	upstream, server := resumableUpstream(t)
	b := fleet(t, 1, linger(50*time.Millisecond))[0]
	teach(t, b, upstream)
	a := serve(b, resumeRequest(t, upstream, 1, 1, ""))
	if lingering(b) != 1 {
		t.Fatalf("%d calls lingering, want 1", lingering(b))
	}
	waitNotLingering(t, b)
	late := serve(b, resumeRequest(t, upstream, 2, 1, ""))
	if lingering(b) != 0 {
		t.Fatalf("%d calls lingering after a linger that nobody came back to", lingering(b))
	}
	for i, x := range []*recordedAnswer{a, late} {
		extra, _ := answerRound(t, x, "late")
		if x = serve(b, resumeRequest(t, upstream, 3+i, 1, extra)); gjson.GetBytes(x.final, "result.content.0.text").String() != "accept:late" {
			t.Fatalf("call %d: %d %s", i, x.status, x.final)
		}
	}
	if _, idle := b.pool.Stats(); idle != sessionsOf(server) {
		t.Fatalf("%d upstream sessions, %d idle in the pool", sessionsOf(server), idle)
	}
}

// TestLingerRelayHint: a call that lingers on its home says so in its
// state: another instance that gets the retry is told to relay it there
// (Retry.Lingers, with the home), the home itself is not, and once the
// linger is over nobody is. A call that does not linger says nothing.
func TestLingerRelayHint(t *testing.T) {
	upstream, _ := resumableUpstream(t)
	bs := fleet(t, 2, linger(300*time.Millisecond), func(o *Options) { o.Address = "http://gw.example" })
	retryOn := func(b *Bridge, a *recordedAnswer, id int) Retry {
		t.Helper()
		extra, _ := answerRound(t, a, "x")
		r := resumeRequest(t, upstream, id, 1, extra)
		return b.RetryOf(&r)
	}
	cold := serve(bs[0], resumeRequest(t, upstream, 1, 1, ""))
	if rt := retryOn(bs[1], cold, 2); rt.Whose != Resumable || rt.Lingers {
		t.Fatalf("a call that does not linger: %+v", rt)
	}
	teach(t, bs[0], upstream)
	hot := serve(bs[0], resumeRequest(t, upstream, 3, 1, ""))
	if lingering(bs[0]) != 1 {
		t.Fatalf("%d calls lingering, want 1", lingering(bs[0]))
	}
	rt := retryOn(bs[1], hot, 4)
	if rt.Whose != Resumable || !rt.Lingers || rt.Owner.Instance != "gw-0" || rt.Owner.Address != "http://gw.example" {
		t.Fatalf("on another instance: %+v, want relayed to gw-0", rt)
	}
	if rt := retryOn(bs[0], hot, 5); rt.Lingers {
		t.Fatalf("on the home: %+v, want served there", rt)
	}
	waitNotLingering(t, bs[0]) // its linger ended: so did the state's LingerUntil (set at the park, before it)
	if rt := retryOn(bs[1], hot, 6); rt.Lingers {
		t.Fatalf("after the linger: %+v, want resumed where it lands", rt)
	}
}

// TestLingerLearnedFromGiveBack: a session given back within the linger
// (the call's retry came quickly, to another instance) teaches the home,
// whose next call of that target lingers.
func TestLingerLearnedFromGiveBack(t *testing.T) {
	upstream, _ := resumableUpstream(t)
	bs := fleet(t, 2, linger(time.Minute))
	home := func(_ context.Context, _ translate.Owner, n SessionNotice) error {
		if !bs[0].TakeBack(n) {
			return errors.New("not taken")
		}
		return nil
	}
	a := serve(bs[0], resumeRequest(t, upstream, 1, 1, ""))
	if lingering(bs[0]) != 0 {
		t.Fatal("the first call of a target lingers")
	}
	extra, _ := answerRound(t, a, "q")
	retry := resumeRequest(t, upstream, 2, 1, extra)
	retry.GiveBack = home
	if a = serve(bs[1], retry); gjson.GetBytes(a.final, "result.content.0.text").String() != "accept:q" {
		t.Fatalf("retry elsewhere: %d %s", a.status, a.final)
	}
	waitPlaces(t, bs[0], 0)
	serve(bs[0], resumeRequest(t, upstream, 3, 1, ""))
	if lingering(bs[0]) != 1 {
		t.Fatalf("%d calls lingering after a session given back at once, want 1", lingering(bs[0]))
	}
}

// TestPlaceLingers: a place says until when its call lingers, and no
// random place (an earlier release's) nor a time past, too close or too
// far reads as lingering.
func TestPlaceLingers(t *testing.T) {
	now := time.Now()
	for _, c := range []struct {
		until time.Time
		want  bool
	}{
		{now.Add(250 * time.Millisecond), true},
		{now.Add(MaxResumeLinger), true},
		{now.Add(lingerRelayMargin / 2), false},
		{now.Add(-time.Second), false},
		{now.Add(time.Hour), false},
		{time.Time{}, false},
	} {
		if got := placeLingers(newPlace(c.until), now); got != c.want {
			t.Errorf("until %v from now: lingers %v, want %v", c.until.Sub(now), got, c.want)
		}
	}
	for i := range 100_000 {
		var p [16]byte
		_, _ = rand.Read(p[:])
		if placeLingers(p, now) {
			t.Fatalf("random place %d %x reads as lingering", i, p)
		}
	}
	for _, tail := range []uint64{0, 1, 1 << 63, 1<<64 - 1} {
		var p [16]byte
		binary.BigEndian.PutUint64(p[8:], tail)
		if placeLingers(p, now) {
			t.Fatalf("place ending %x reads as lingering", tail)
		}
	}
}
