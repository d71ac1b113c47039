package forward

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/tidwall/gjson"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/legacy"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/tests/support"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
)

// staggeredUpstream is a legacy go-sdk server with support.AddStaggered's
// tool `pair`, which asks two questions concurrently, the second {n} ms
// after the first, and reports both answers. Each second question is
// announced on late just before it is sent.
func staggeredUpstream(t *testing.T) (string, <-chan struct{}) {
	t.Helper()
	server := mcp.NewServer(&mcp.Implementation{Name: "staggered", Version: "1"}, nil)
	late := support.AddStaggered(server)
	return support.ServeMCP(t, server, nil), late
}

// inputKeys returns the sorted inputRequests keys of an input_required
// answer, failing on anything else.
func inputKeys(t *testing.T, a *recordedAnswer) []string {
	t.Helper()
	res := gjson.GetBytes(a.final, "result")
	if res.Get("resultType").String() != "input_required" {
		t.Fatalf("want input_required, got HTTP %d %s", a.status, a.final)
	}
	var keys []string
	res.Get("inputRequests").ForEach(func(k, _ gjson.Result) bool { keys = append(keys, k.String()); return true })
	slices.Sort(keys)
	return keys
}

// answerAll builds the retry of a tools/call that answers every question
// of the input_required answer a.
func answerAll(t *testing.T, upstream, tool string, id, n int, a *recordedAnswer, keys []string) Request {
	t.Helper()
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf(`%q:{"action":"accept","content":{"answer":"x"}}`, k))
	}
	r := toolRequest(t, upstream, tool, id, n)
	state := gjson.GetBytes(a.final, "result.requestState").String()
	body := strings.TrimSuffix(string(r.Raw), "}}")
	body += fmt.Sprintf(`,"inputResponses":{%s},"requestState":%q}}`, strings.Join(parts, ","), state)
	h := http.Header{"Mcp-Protocol-Version": {translate.ModernVersion}, "Mcp-Method": {"tools/call"}, "Mcp-Name": {tool}}
	req, rerr := translate.ValidateModern(http.MethodPost, h, []byte(body), nil)
	if rerr != nil {
		t.Fatalf("invalid retry: %v", rerr)
	}
	return Request{Target: translate.Target{Upstream: upstream}, Principal: translate.PrincipalHash("p"), ModernRequest: req}
}

// parkedHolds waits until the one parked call has an unread message (a
// question that arrived while it was parked).
func parkedHolds(t *testing.T, b *Bridge) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b.mu.Lock()
		n := 0
		for _, c := range b.parked {
			n += c.up.Held()
		}
		b.mu.Unlock()
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no message reached the parked call")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func target(upstream, tool string) *call {
	return &call{key: legacy.PoolKey{Upstream: upstream}, method: "tools/call", name: tool}
}

// TestGatherNoWindowForOneQuestion: a target that asked one question on
// its first round (which waits the window: the target is not known yet)
// never waits the gather window again (here ten minutes from round 2 on: a
// round that waited it would time the test out), and is not learned as
// asking several.
func TestGatherNoWindowForOneQuestion(t *testing.T) {
	upstream, _ := legacyUpstream(t)
	b := limitedBridge(t, bridgeOptions(func(o *Options) { o.ParkTTL, o.GatherWindow = time.Minute, 20*time.Millisecond }))
	a := serve(b, askRequest(t, upstream, 1, 3, ""))
	if !b.gather.waits(target(upstream, "other")) {
		t.Fatal("a target not seen yet does not wait the window")
	}
	b.defaults.GatherWindow = 10 * time.Minute // the parked call's options
	for round := 1; round <= 3; round++ {
		keys := inputKeys(t, a)
		if len(keys) != 1 {
			t.Fatalf("round %d asked %v", round, keys)
		}
		extra := fmt.Sprintf(`,"inputResponses":{%q:{"action":"accept","content":{"a":"x%d"}}},"requestState":%q`,
			keys[0], round, gjson.GetBytes(a.final, "result.requestState").String())
		a = serve(b, askRequest(t, upstream, 1+round, 3, extra))
	}
	if got := gjson.GetBytes(a.final, "result.content.0.text").String(); got != "accept:x1,accept:x2,accept:x3" {
		t.Fatalf("final: %s", a.final)
	}
	if b.gather.waits(target(upstream, "ask")) {
		t.Fatal("a target asking one question at a time was learned as asking several")
	}
}

// TestGatherLearnsLateSibling: a question that arrives while its call is
// parked is not lost (it is asked in the next round) and teaches the bridge
// that the tool asks several questions at once: the tool's next call waits
// the window and asks both questions in one round.
func TestGatherLearnsLateSibling(t *testing.T) {
	upstream, late := staggeredUpstream(t)
	b := limitedBridge(t, bridgeOptions(func(o *Options) { o.ParkTTL, o.GatherWindow = time.Minute, 500*time.Millisecond }))
	const gap = 1500 // ms, beyond the window: the sibling misses the first round

	a := serve(b, toolRequest(t, upstream, "pair", 1, gap))
	first := inputKeys(t, a)
	if len(first) != 1 {
		t.Fatalf("the first round asked %v, want the one question there within the window", first)
	}
	if b.gather.waits(target(upstream, "pair")) {
		t.Fatal("learned as asking several before the sibling arrived")
	}
	<-late
	parkedHolds(t, b)
	a = serve(b, answerAll(t, upstream, "pair", 2, gap, a, first))
	second := inputKeys(t, a)
	if len(second) != 1 || second[0] == first[0] {
		t.Fatalf("the late sibling: round 2 asked %v after %v", second, first)
	}
	if !b.gather.waits(target(upstream, "pair")) {
		t.Fatal("a sibling that arrived while parked did not teach the bridge")
	}
	a = serve(b, answerAll(t, upstream, "pair", 3, gap, a, second))
	if got := gjson.GetBytes(a.final, "result.content.0.text").String(); got != "accept:x,accept:x" {
		t.Fatalf("first call's result: %s", a.final)
	}

	const near = 50 // ms, within the window
	a = serve(b, toolRequest(t, upstream, "pair", 4, near))
	both := inputKeys(t, a)
	if len(both) != 2 {
		t.Fatalf("the learned tool's round asked %v, want both questions", both)
	}
	a = serve(b, answerAll(t, upstream, "pair", 5, near, a, both))
	if got := gjson.GetBytes(a.final, "result.content.0.text").String(); got != "accept:x,accept:x" {
		t.Fatalf("second call's result: %s", a.final)
	}
	if b.Parked() != 0 {
		t.Fatalf("%d calls parked", b.Parked())
	}
}

// TestGatherAlways: a request with GatherAlways waits the window on every
// round, also for a tool learned to ask one question at a time; one
// without does not.
func TestGatherAlways(t *testing.T) {
	upstream, _ := staggeredUpstream(t)
	b := limitedBridge(t, bridgeOptions(func(o *Options) { o.ParkTTL, o.GatherWindow = time.Minute, 2*time.Second }))
	b.gather.learn(target(upstream, "pair"), false)
	r := toolRequest(t, upstream, "pair", 1, 100)
	r.GatherAlways = true
	a := serve(b, r)
	if keys := inputKeys(t, a); len(keys) != 2 {
		t.Fatalf("asked %v, want both questions in the first round", keys)
	}
	b.gather.learned.Add(b.gather.target(target(upstream, "pair")), false) // it just asked two
	// The sibling comes well after the first question: a round that does
	// not wait has ended by then, even on a loaded machine.
	a = serve(b, toolRequest(t, upstream, "pair", 2, 1500))
	if keys := inputKeys(t, a); len(keys) != 1 {
		t.Fatalf("without GatherAlways asked %v, want the first question alone", keys)
	}
}

// TestGatherPolicyBound: the learned targets are bounded, the least
// recently used forgotten first; concurrent use is safe (-race).
func TestGatherPolicyBound(t *testing.T) {
	g := newGatherPolicy()
	first := target("http://u", "t0")
	g.learn(first, true)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range maxGatherTargets / 4 {
				c := target("http://u", fmt.Sprintf("t%d-%d", w, i))
				g.learn(c, true)
				if !g.waits(c) {
					t.Errorf("%s forgotten at once", c.name)
					return
				}
			}
		})
	}
	wg.Wait()
	if g.learned.Contains(g.target(first)) {
		t.Fatal("the least recently used target was kept beyond the bound")
	}
	g.learn(first, false)
	if g.waits(first) {
		t.Fatal("a target that asked one question waits the window")
	}
	g.learn(first, true)
	g.learn(first, false)
	if !g.waits(first) {
		t.Fatal("a target that asked several at once was forgotten by a round that asked one")
	}
	if n := g.learned.Len(); n != maxGatherTargets {
		t.Fatalf("%d targets remembered, want %d", n, maxGatherTargets)
	}
}

// TestGatherReaskTakesArrived: a retry whose answer is invalid is asked
// again together with the sibling question that arrived while the call was
// parked, in one round.
func TestGatherReaskTakesArrived(t *testing.T) {
	upstream, late := staggeredUpstream(t)
	b := limitedBridge(t, bridgeOptions(func(o *Options) { o.ParkTTL = time.Minute }))
	a := serve(b, toolRequest(t, upstream, "pair", 1, 300))
	first := inputKeys(t, a)
	if len(first) != 1 {
		t.Fatalf("first round asked %v", first)
	}
	<-late
	parkedHolds(t, b)
	r := toolRequest(t, upstream, "pair", 2, 300)
	body := strings.TrimSuffix(string(r.Raw), "}}") + fmt.Sprintf(`,"inputResponses":{%q:{"action":"maybe"}},"requestState":%q}}`,
		first[0], gjson.GetBytes(a.final, "result.requestState").String())
	h := http.Header{"Mcp-Protocol-Version": {translate.ModernVersion}, "Mcp-Method": {"tools/call"}, "Mcp-Name": {"pair"}}
	req, rerr := translate.ValidateModern(http.MethodPost, h, []byte(body), nil)
	if rerr != nil {
		t.Fatalf("invalid retry: %v", rerr)
	}
	a = serve(b, Request{Target: translate.Target{Upstream: upstream}, Principal: translate.PrincipalHash("p"), ModernRequest: req})
	both := inputKeys(t, a)
	if len(both) != 2 || !slices.Contains(both, first[0]) {
		t.Fatalf("the round asking again asked %v, want %s again and the sibling", both, first[0])
	}
	a = serve(b, answerAll(t, upstream, "pair", 3, 300, a, both))
	if got := gjson.GetBytes(a.final, "result.content.0.text").String(); got != "accept:x,accept:x" {
		t.Fatalf("result: %s", a.final)
	}
}
