package forward

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
	"github.com/tidwall/gjson"
)

// resumeEvents passes ResumeObserver events on a channel.
type resumeEvents chan string

func (resumeEvents) CallEnded(translate.CallReport) {}
func (resumeEvents) Unparked(string)                {}
func (e resumeEvents) Resumable(event string)       { e <- event }

// abandonFleet is fleet(t, len(ttls)) whose bridge i parks for ttls[i],
// probes expired states at once, and reports its events on evs[i].
func abandonFleet(t *testing.T, ttls ...time.Duration) (bs []*Bridge, opts []*Options, evs []resumeEvents) {
	t.Helper()
	bs = fleet(t, len(ttls))
	for i, b := range bs {
		b.abandonGrace = 0
		ev := make(resumeEvents, 64)
		o := DefaultOptions()
		o.Keyring, o.Instance, o.Observer, o.ParkTTL = b.defaults.Keyring, fmt.Sprintf("gw-%d", i), ev, ttls[i]
		opts, evs = append(opts, o.Ready()), append(evs, ev)
	}
	return bs, opts, evs
}

// waitEvent waits (10s at most) for event among evs', skipping others.
func waitEvent(t *testing.T, ev resumeEvents, event string) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case e := <-ev:
			if e == event {
				return
			}
			if e == ResumeEnded || e == ResumeLeft {
				t.Fatalf("got %q, want %q", e, event)
			}
		case <-deadline:
			t.Fatalf("no %q event", event)
		}
	}
}

// TestAbandonedResumableEnded: a call parked holding no stream whose state
// expires with no retry is ended upstream by the instance that parked it:
// its upstream session is deleted (the tool's wait ends with it).
func TestAbandonedResumableEnded(t *testing.T) {
	upstream, server := resumableUpstream(t)
	bs, opts, evs := abandonFleet(t, 200*time.Millisecond)
	r := resumeRequest(t, upstream, 1, 1, "")
	r.Options = opts[0]
	a := serve(bs[0], r)
	if gjson.GetBytes(a.final, "result.resultType").String() != "input_required" || bs[0].Places() != 1 {
		t.Fatalf("not parked resumable: %s, %d places", a.final, bs[0].Places())
	}
	waitEvent(t, evs[0], ResumeEnded)
	waitNoSessions(t, server)
	if n := bs[0].Places(); n != 0 {
		t.Fatalf("%d places after expiry", n)
	}
}

// TestAbandonedResumedElsewhereKept: a call whose retry reached another
// instance, which answered and parked the call again, is not ended when
// its first state expires on the instance that parked it first: the
// probe sees the upstream went on; the call completes.
func TestAbandonedResumedElsewhereKept(t *testing.T) {
	upstream, server := resumableUpstream(t)
	bs, opts, evs := abandonFleet(t, 2*time.Second, time.Minute)
	r := resumeRequest(t, upstream, 1, 2, "")
	r.Options = opts[0]
	extra, _ := answerRound(t, serve(bs[0], r), "x1")
	r = resumeRequest(t, upstream, 2, 2, extra)
	r.Options = opts[1]
	a := serve(bs[1], r)
	waitEvent(t, evs[0], ResumeLeft)
	if n := sessionsOf(server); n != 1 {
		t.Fatalf("%d upstream sessions after the first state's expiry", n)
	}
	extra, _ = answerRound(t, a, "x2")
	r = resumeRequest(t, upstream, 3, 2, extra)
	r.Options = opts[1]
	a = serve(bs[1], r)
	if got := gjson.GetBytes(a.final, "result.content.0.text").String(); got != "accept:x1,accept:x2" {
		t.Fatalf("final %d %s", a.status, a.final)
	}
	waitNoSessions(t, server)
}

// TestAbandonedNoProgressKeepsExpiry: a retry elsewhere that answers
// nothing parks the call again with a state expiring when the first one
// did, so the first instance's probe, which cannot tell that park from
// none, ends a call nobody can resume any more.
func TestAbandonedNoProgressKeepsExpiry(t *testing.T) {
	upstream, server := resumableUpstream(t)
	bs, opts, evs := abandonFleet(t, 2*time.Second, time.Minute)
	r := resumeRequest(t, upstream, 1, 1, "")
	r.Options = opts[0]
	state := gjson.GetBytes(serve(bs[0], r).final, "result.requestState").String()
	r = resumeRequest(t, upstream, 2, 1, fmt.Sprintf(`,"inputResponses":{},"requestState":%q`, state))
	r.Options = opts[1]
	a := serve(bs[1], r)
	extra, _ := answerRound(t, a, "late")
	select {
	case e := <-evs[0]:
		if e != ResumeParked {
			t.Fatalf("event %q before the expiry", e)
		}
	default:
	}
	// Both instances probe the same call at the same expiry: one ends
	// it, the other finds it gone.
	got := map[string]int{}
	deadline := time.After(10 * time.Second)
	for got[ResumeEnded]+got[ResumeLeft] < 2 {
		select {
		case e := <-evs[0]:
			got[e]++
		case e := <-evs[1]:
			got[e]++
		case <-deadline:
			t.Fatalf("events %v", got)
		}
	}
	if got[ResumeEnded] != 1 {
		t.Fatalf("events %v, want one ended", got)
	}
	waitNoSessions(t, server)
	r = resumeRequest(t, upstream, 3, 1, extra)
	r.Options = opts[1]
	if a = serve(bs[1], r); a.status == http.StatusOK {
		t.Fatalf("the re-parked state outlived the first: %s", a.final)
	}
}
