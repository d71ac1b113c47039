package translate

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/tidwall/gjson"
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

func linger(d time.Duration) func(*BridgeOptions) {
	return func(o *BridgeOptions) { o.ResumeLinger = d }
}

// TestLingerRetryReadsOn: a retry that comes back to the parking instance
// while the call lingers reads on from the call's open stream: the
// upstream sees no GET reopening it. With the linger off, every round
// reopens the stream once.
func TestLingerRetryReadsOn(t *testing.T) {
	for _, c := range []struct {
		name    string
		linger  time.Duration
		reopens int32
	}{{"lingering", time.Minute, 0}, {"off", -1, 3}} {
		t.Run(c.name, func(t *testing.T) {
			upstream, server, reopens := countedResumableUpstream(t)
			b := fleet(t, 1, linger(c.linger))[0]
			a := serve(b, resumeRequest(t, upstream, 1, 3, ""))
			for round := 1; round <= 3; round++ {
				if p := b.Parked(); p != 0 {
					t.Fatalf("round %d: %d calls parked holding (the state must be the resumable one)", round, p)
				}
				if want := 0; c.linger > 0 {
					if want = 1; lingering(b) != want {
						t.Fatalf("round %d: %d calls lingering, want %d", round, lingering(b), want)
					}
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
	waitNoSessions(t, server)
}

// TestLingerClose: closing the bridge lets go of the lingering calls'
// streams; their states stay resumable, and another instance finishes the
// call.
func TestLingerClose(t *testing.T) {
	upstream, server, reopens := countedResumableUpstream(t)
	bs := fleet(t, 2, linger(time.Minute))
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
