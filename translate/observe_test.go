package translate

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

// recordingObserver keeps what the bridge reports.
type recordingObserver struct {
	mu       sync.Mutex
	calls    []CallReport
	unparked []string
}

func (o *recordingObserver) CallEnded(r CallReport) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.calls = append(o.calls, r)
}

func (o *recordingObserver) Unparked(why string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.unparked = append(o.unparked, why)
}

// wait returns the reports once there are at least n calls.
func (o *recordingObserver) wait(t *testing.T, n int) ([]CallReport, []string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		o.mu.Lock()
		calls, unparked := slices.Clone(o.calls), slices.Clone(o.unparked)
		o.mu.Unlock()
		if len(calls) >= n {
			return calls, unparked
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d calls reported, want %d", len(calls), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// observedBridge is newTestBridge with an observer, and maxParked (0:
// the default).
func observedBridge(t *testing.T, ttl time.Duration, maxParked int) (*Bridge, *recordingObserver) {
	t.Helper()
	b := newTestBridge(t, ttl)
	obs := &recordingObserver{}
	o := *b.defaults
	o.Observer = obs
	if maxParked > 0 {
		o.MaxParked = maxParked
	}
	b.defaults = o.Ready()
	return b, obs
}

// TestBridgeObserverRounds: a call of two rounds is reported once, when it
// ends, with its rounds, outcome and times; each retry unparks it as
// answered and reports the round it carried.
func TestBridgeObserverRounds(t *testing.T) {
	upstream, _ := legacyUpstream(t)
	b, obs := observedBridge(t, time.Minute, 0)
	a := &recordedAnswer{}
	served := b.Serve(t.Context(), askRequest(t, upstream, 1, 2, ""), a)
	if served != (Served{Round: 0, Outcome: OutcomeInputRequired}) {
		t.Fatalf("first request served as %+v", served)
	}
	for round := 1; round <= 2; round++ {
		state := gjson.GetBytes(a.final, "result.requestState").String()
		extra := fmt.Sprintf(`,"inputResponses":{"elicitation-%d":{"action":"accept","content":{"a":"x"}}},"requestState":%q`, round, state)
		a = &recordedAnswer{}
		served = b.Serve(t.Context(), askRequest(t, upstream, 1+round, 2, extra), a)
		want := Served{Round: round, Outcome: OutcomeInputRequired}
		if round == 2 {
			want.Outcome = OutcomeComplete
		}
		if served != want {
			t.Fatalf("retry %d served as %+v, want %+v (%s)", round, served, want, a.final)
		}
	}
	calls, unparked := obs.wait(t, 1)
	c := calls[0]
	if len(calls) != 1 || c.Bridge != "forward" || c.Upstream != upstream || c.Method != "tools/call" || c.Name != "ask" ||
		c.Rounds != 2 || c.Outcome != OutcomeComplete || c.Reason != "" || c.Duration <= 0 || c.Overhead <= 0 || c.Overhead > c.Duration {
		t.Fatalf("reported %+v", calls)
	}
	if !slices.Equal(unparked, []string{ParkAnswered, ParkAnswered}) {
		t.Fatalf("unparked %v, want answered twice", unparked)
	}
}

// TestBridgeObserverAbandoned: expiry, refusal (max_parked) and shutdown
// are reported as such, both as the end of the call and as the reason it
// left (or never entered) the parked list.
func TestBridgeObserverAbandoned(t *testing.T) {
	upstream, _ := legacyUpstream(t)
	t.Run("expired", func(t *testing.T) {
		b, obs := observedBridge(t, 100*time.Millisecond, 0)
		serve(b, askRequest(t, upstream, 1, 1, ""))
		calls, unparked := obs.wait(t, 1)
		if calls[0].Outcome != OutcomeExpired || calls[0].Rounds != 1 || !strings.Contains(calls[0].Reason, "in time") ||
			!slices.Equal(unparked, []string{ParkExpired}) {
			t.Fatalf("reported %+v, unparked %v", calls, unparked)
		}
	})
	t.Run("refused", func(t *testing.T) {
		b, obs := observedBridge(t, time.Minute, 1)
		serve(b, askRequest(t, upstream, 1, 1, ""))
		second := serve(b, askRequest(t, upstream, 2, 1, ""))
		calls, unparked := obs.wait(t, 1)
		if calls[0].Outcome != OutcomeRefused || !strings.Contains(calls[0].Reason, "max_parked") ||
			!slices.Equal(unparked, []string{ParkRefused}) || second.status != http.StatusServiceUnavailable || b.Parked() != 1 {
			t.Fatalf("reported %+v, unparked %v; second answered %d %s", calls, unparked, second.status, second.final)
		}
	})
	t.Run("shutdown", func(t *testing.T) {
		b, obs := observedBridge(t, time.Minute, 0)
		serve(b, askRequest(t, upstream, 1, 1, ""))
		b.Close()
		calls, unparked := obs.wait(t, 1)
		if calls[0].Outcome != OutcomeCancelled || !slices.Equal(unparked, []string{ParkCancelled}) {
			t.Fatalf("reported %+v, unparked %v", calls, unparked)
		}
	})
}

// TestReverseObserver: a legacy request that goes through two in-line
// rounds is reported once with its rounds, and served with round 2; a call
// whose client does not answer in time is reported as expired.
func TestReverseObserver(t *testing.T) {
	up := modernUpstream(t)
	rv := newTestReverse(t)
	obs := &recordingObserver{}
	o := *rv.defaults
	o.Observer = obs
	rv.defaults = o.Ready()
	s := openSession(t, rv, up, "p", `{"elicitation":{}}`)

	sink := newRecordingSink()
	done := make(chan Served, 1)
	go func() { done <- rv.Serve(t.Context(), s, callRequest(t, 1, 2), sink) }()
	for round := range 2 {
		q := wantNote(t, sink)
		answer := fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"action":"accept","content":{"answer":"r%d"}}}`, q.Get("id").Raw, round)
		if rerr := rv.Answer(s, []byte(answer)); rerr != nil {
			t.Fatal(rerr)
		}
	}
	wantFinal(t, sink)
	if served := <-done; served != (Served{Round: 2, Outcome: OutcomeComplete}) {
		t.Fatalf("served as %+v", served)
	}
	calls, _ := obs.wait(t, 1)
	c := calls[0]
	if c.Bridge != "reverse" || c.Upstream != up || c.Method != "tools/call" || c.Name != "rounds" || c.Rounds != 2 ||
		c.Outcome != OutcomeComplete || c.Duration <= 0 || c.Overhead <= 0 {
		t.Fatalf("reported %+v", c)
	}

	o.RoundTimeout = 50 * time.Millisecond
	s.opts = o.Ready() // as if opened by a configuration with a short round_timeout
	sink = newRecordingSink()
	go func() { done <- rv.Serve(t.Context(), s, callRequest(t, 2, 1), sink) }()
	wantNote(t, sink)
	wantFinal(t, sink)
	if served := <-done; served.Outcome != OutcomeExpired || served.Round != 0 {
		t.Fatalf("unanswered call served as %+v", served)
	}
	calls, _ = obs.wait(t, 2)
	if calls[1].Outcome != OutcomeExpired || !strings.HasPrefix(calls[1].Reason, noAnswer) {
		t.Fatalf("unanswered call reported as %+v", calls[1])
	}
}

// TestBridgeObserverUnreachable: a call whose upstream cannot be reached
// is reported as an error, with why.
func TestBridgeObserverUnreachable(t *testing.T) {
	b, obs := observedBridge(t, time.Minute, 0)
	a := serve(b, askRequest(t, "http://127.0.0.1:1/mcp", 1, 1, ""))
	if a.status != 502 {
		t.Fatalf("HTTP %d %s, want 502", a.status, a.final)
	}
	calls, _ := obs.wait(t, 1)
	if c := calls[0]; c.Outcome != OutcomeError || c.Rounds != 0 || c.Method != "tools/call" || !strings.Contains(c.Reason, "unavailable") {
		t.Fatalf("reported %+v", c)
	}
}
