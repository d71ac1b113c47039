package reverse

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/internal/testkit"
)

// TestReverseObserver: a legacy request that goes through two in-line
// rounds is reported once with its rounds, and served with round 2; a call
// whose client does not answer in time is reported as expired.
func TestReverseObserver(t *testing.T) {
	up := modernUpstream(t)
	rv := newTestReverse(t)
	obs := &testkit.Observer{}
	o := *rv.defaults
	o.Observer = obs
	rv.defaults = o.Ready()
	s := openSession(t, rv, up, "p", `{"elicitation":{}}`)

	sink := newRecordingSink()
	done := make(chan translate.Served, 1)
	go func() { done <- rv.Serve(t.Context(), s, callRequest(t, 1, 2), sink) }()
	for round := range 2 {
		q := wantNote(t, sink)
		answer := fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"action":"accept","content":{"answer":"r%d"}}}`, q.Get("id").Raw, round)
		if rerr := rv.Answer(s, []byte(answer)); rerr != nil {
			t.Fatal(rerr)
		}
	}
	wantFinal(t, sink)
	if served := <-done; served != (translate.Served{Round: 2, Outcome: translate.OutcomeComplete}) {
		t.Fatalf("served as %+v", served)
	}
	calls, _ := obs.Wait(t, 1)
	c := calls[0]
	if c.Bridge != "reverse" || c.Upstream != up || c.Method != "tools/call" || c.Name != "rounds" || c.Rounds != 2 ||
		c.Outcome != translate.OutcomeComplete || c.Duration <= 0 || c.Overhead <= 0 {
		t.Fatalf("reported %+v", c)
	}

	o.RoundTimeout = 50 * time.Millisecond
	s.opts = o.Ready() // as if opened by a configuration with a short round_timeout
	sink = newRecordingSink()
	go func() { done <- rv.Serve(t.Context(), s, callRequest(t, 2, 1), sink) }()
	wantNote(t, sink)
	wantFinal(t, sink)
	if served := <-done; served.Outcome != translate.OutcomeExpired || served.Round != 0 {
		t.Fatalf("unanswered call served as %+v", served)
	}
	calls, _ = obs.Wait(t, 2)
	if calls[1].Outcome != translate.OutcomeExpired || !strings.HasPrefix(calls[1].Reason, noAnswer) {
		t.Fatalf("unanswered call reported as %+v", calls[1])
	}
}
