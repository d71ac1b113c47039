package forward

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/internal/testkit"
	"github.com/tidwall/gjson"
)

// observedBridge is newTestBridge with an observer, and maxParked (0:
// the default).
func observedBridge(t *testing.T, ttl time.Duration, maxParked int) (*Bridge, *testkit.Observer) {
	t.Helper()
	b := newTestBridge(t, ttl)
	obs := &testkit.Observer{}
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
	if served != (translate.Served{Round: 0, Outcome: translate.OutcomeInputRequired}) {
		t.Fatalf("first request served as %+v", served)
	}
	for round := 1; round <= 2; round++ {
		state := gjson.GetBytes(a.final, "result.requestState").String()
		extra := fmt.Sprintf(`,"inputResponses":{"elicitation-%d":{"action":"accept","content":{"a":"x"}}},"requestState":%q`, round, state)
		a = &recordedAnswer{}
		served = b.Serve(t.Context(), askRequest(t, upstream, 1+round, 2, extra), a)
		want := translate.Served{Round: round, Outcome: translate.OutcomeInputRequired}
		if round == 2 {
			want.Outcome = translate.OutcomeComplete
		}
		if served != want {
			t.Fatalf("retry %d served as %+v, want %+v (%s)", round, served, want, a.final)
		}
	}
	calls, unparked := obs.Wait(t, 1)
	c := calls[0]
	if len(calls) != 1 || c.Bridge != "forward" || c.Upstream != upstream || c.Method != "tools/call" || c.Name != "ask" ||
		c.Rounds != 2 || c.Outcome != translate.OutcomeComplete || c.Reason != "" || c.Duration <= 0 || c.Overhead <= 0 || c.Overhead > c.Duration {
		t.Fatalf("reported %+v", calls)
	}
	if !slices.Equal(unparked, []string{translate.ParkAnswered, translate.ParkAnswered}) {
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
		calls, unparked := obs.Wait(t, 1)
		if calls[0].Outcome != translate.OutcomeExpired || calls[0].Rounds != 1 || !strings.Contains(calls[0].Reason, "in time") ||
			!slices.Equal(unparked, []string{translate.ParkExpired}) {
			t.Fatalf("reported %+v, unparked %v", calls, unparked)
		}
	})
	t.Run("refused", func(t *testing.T) {
		b, obs := observedBridge(t, time.Minute, 1)
		serve(b, askRequest(t, upstream, 1, 1, ""))
		second := serve(b, askRequest(t, upstream, 2, 1, ""))
		calls, unparked := obs.Wait(t, 1)
		if calls[0].Outcome != translate.OutcomeRefused || !strings.Contains(calls[0].Reason, "max_parked") ||
			!slices.Equal(unparked, []string{translate.ParkRefused}) || second.status != http.StatusServiceUnavailable || b.Parked() != 1 {
			t.Fatalf("reported %+v, unparked %v; second answered %d %s", calls, unparked, second.status, second.final)
		}
	})
	t.Run("shutdown", func(t *testing.T) {
		b, obs := observedBridge(t, time.Minute, 0)
		serve(b, askRequest(t, upstream, 1, 1, ""))
		b.Close()
		calls, unparked := obs.Wait(t, 1)
		if calls[0].Outcome != translate.OutcomeCancelled || !slices.Equal(unparked, []string{translate.ParkCancelled}) {
			t.Fatalf("reported %+v, unparked %v", calls, unparked)
		}
	})
}

// TestBridgeObserverUnreachable: a call whose upstream cannot be reached
// is reported as an error, with why.
func TestBridgeObserverUnreachable(t *testing.T) {
	b, obs := observedBridge(t, time.Minute, 0)
	a := serve(b, askRequest(t, "http://127.0.0.1:1/mcp", 1, 1, ""))
	if a.status != 502 {
		t.Fatalf("HTTP %d %s, want 502", a.status, a.final)
	}
	calls, _ := obs.Wait(t, 1)
	if c := calls[0]; c.Outcome != translate.OutcomeError || c.Rounds != 0 || c.Method != "tools/call" || !strings.Contains(c.Reason, "unavailable") {
		t.Fatalf("reported %+v", c)
	}
}
