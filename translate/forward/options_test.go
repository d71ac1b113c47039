package forward

import (
	"bytes"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/internal/testkit"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/seal"
)

// Two configurations sharing one bridge keep their own options: each
// request carries its configuration's, and a call keeps those it started
// with.

// withOptions returns r carrying o.
func withOptions(r Request, o *Options) Request {
	r.Options = o
	return r
}

// retryOf builds the retry of the ask call answered by a, which asked one
// question.
func retryOf(t *testing.T, upstream string, id, rounds int, a *recordedAnswer) Request {
	t.Helper()
	keys := inputKeys(t, a)
	if len(keys) != 1 {
		t.Fatalf("asked %v, want one question: HTTP %d %s", keys, a.status, a.final)
	}
	extra := fmt.Sprintf(`,"inputResponses":{%q:{"action":"accept","content":{"a":"x"}}},"requestState":%q`,
		keys[0], gjson.GetBytes(a.final, "result.requestState").String())
	return askRequest(t, upstream, id, rounds, extra)
}

// TestBridgeOptionsPerRequest: a call of configuration A (max_rounds 1) is
// refused a second round while one of configuration B (max_rounds 3) goes
// through three, on the same bridge; A's requestState does not open with
// B's key, and a call keeps its own options when its retry comes with
// other options sharing its key.
func TestBridgeOptionsPerRequest(t *testing.T) {
	upstream, server := legacyUpstream(t)
	b := newTestBridge(t, time.Minute)
	kA, kB := testkit.Keyring(t), testkit.Keyring(t, bytes.Repeat([]byte{8}, seal.KeySize))
	optA := bridgeOptions(func(o *Options) { o.Keyring, o.Instance, o.ParkTTL, o.MaxRounds = kA, "test", time.Minute, 1 }).Ready()
	optB := bridgeOptions(func(o *Options) { o.Keyring, o.Instance, o.ParkTTL, o.MaxRounds = kB, "test", time.Minute, 3 }).Ready()

	a := serve(b, withOptions(askRequest(t, upstream, 1, 2, ""), optA))
	a = serve(b, withOptions(retryOf(t, upstream, 2, 2, a), optA))
	if msg := gjson.GetBytes(a.final, "error.message").String(); a.status != http.StatusBadGateway || !bytes.Contains([]byte(msg), []byte("max_rounds")) {
		t.Fatalf("A's second round: HTTP %d %s, want 502 naming max_rounds", a.status, a.final)
	}

	a = serve(b, withOptions(askRequest(t, upstream, 3, 3, ""), optB))
	for round := 1; round <= 3; round++ {
		a = serve(b, withOptions(retryOf(t, upstream, 3+round, 3, a), optB))
	}
	if got := gjson.GetBytes(a.final, "result.content.0.text").String(); got != "accept:x,accept:x,accept:x" {
		t.Fatalf("B's third round: HTTP %d %s", a.status, a.final)
	}

	// A's requestState sent to B: another key, refused like a forged one,
	// and the parked call stays parked for A.
	a = serve(b, withOptions(askRequest(t, upstream, 10, 1, ""), optA))
	retry := retryOf(t, upstream, 11, 1, a)
	refused := serve(b, withOptions(retry, optB))
	if code := gjson.GetBytes(refused.final, "error.code").Int(); code != jsonrpc.InvalidParams || refused.status != http.StatusBadRequest {
		t.Fatalf("A's requestState through B: HTTP %d %s, want 400 -32602", refused.status, refused.final)
	}
	if b.Parked() != 1 {
		t.Fatalf("%d calls parked after the refused retry, want A's one", b.Parked())
	}
	if done := serve(b, withOptions(retry, optA)); gjson.GetBytes(done.final, "result.content.0.text").String() != "accept:x" {
		t.Fatalf("A's retry through A: HTTP %d %s", done.status, done.final)
	}

	// C shares A's key but allows three rounds: a call A started and C
	// retries keeps A's max_rounds.
	optC := bridgeOptions(func(o *Options) { o.Keyring, o.Instance, o.ParkTTL, o.MaxRounds = kA, "test", time.Minute, 3 }).Ready()
	a = serve(b, withOptions(askRequest(t, upstream, 20, 2, ""), optA))
	a = serve(b, withOptions(retryOf(t, upstream, 21, 2, a), optC))
	if a.status != http.StatusBadGateway {
		t.Fatalf("A's call retried through C: HTTP %d %s, want A's max_rounds to end it", a.status, a.final)
	}
	waitNoSessions(t, server)
}

// TestBridgeOptionsParked: park_ttl and max_parked are each
// configuration's: A's parked call expires while B's waits, and A's bound
// refuses only A's calls.
func TestBridgeOptionsParked(t *testing.T) {
	upstream, _ := legacyUpstream(t)
	b := newTestBridge(t, time.Minute)
	kr := testkit.Keyring(t)
	obsA, obsB := &testkit.Observer{}, &testkit.Observer{}
	optA := bridgeOptions(func(o *Options) {
		o.Keyring, o.Instance, o.ParkTTL, o.MaxParked, o.Observer = kr, "test", time.Minute, 1, obsA
	}).Ready()
	optB := bridgeOptions(func(o *Options) {
		o.Keyring, o.Instance, o.ParkTTL, o.MaxParked, o.Observer = kr, "test", time.Minute, 2, obsB
	}).Ready()
	short := bridgeOptions(func(o *Options) {
		o.Keyring, o.Instance, o.ParkTTL, o.Observer = kr, "test", 100*time.Millisecond, obsA
	}).Ready()

	var bCalls []*recordedAnswer
	for i := range 2 {
		bCalls = append(bCalls, serve(b, withOptions(askRequest(t, upstream, 1+i, 1, ""), optB)))
	}
	for i := range 2 {
		serve(b, withOptions(askRequest(t, upstream, 10+i, 1, ""), optA)) // the second is refused
	}
	if _, unparked := obsA.Wait(t, 1); len(unparked) != 1 || unparked[0] != translate.ParkRefused {
		t.Fatalf("A unparked %v, want one refusal", unparked)
	}
	if b.Parked() != 3 {
		t.Fatalf("%d parked, want B's two and A's first", b.Parked())
	}

	serve(b, withOptions(askRequest(t, upstream, 20, 1, ""), short))
	deadline := time.Now().Add(5 * time.Second)
	for b.Parked() != 3 {
		if time.Now().After(deadline) {
			t.Fatalf("%d parked, want the short-lived call expired", b.Parked())
		}
		time.Sleep(10 * time.Millisecond)
	}
	for i, a := range bCalls {
		if done := serve(b, withOptions(retryOf(t, upstream, 30+i, 1, a), optB)); gjson.GetBytes(done.final, "result.content.0.text").String() != "accept:x" {
			t.Fatalf("B's call %d: HTTP %d %s", i, done.status, done.final)
		}
	}
	if _, unparked := obsB.Wait(t, 2); len(unparked) != 2 || unparked[0] != translate.ParkAnswered || unparked[1] != translate.ParkAnswered {
		t.Fatalf("B unparked %v, want two answered", unparked)
	}
	if _, unparked := obsA.Wait(t, 2); unparked[1] != translate.ParkExpired {
		t.Fatalf("A unparked %v, want a refusal then an expiry", unparked)
	}
}

// bridgeOptions is DefaultOptions changed by set.
func bridgeOptions(set func(*Options)) Options {
	o := DefaultOptions()
	set(&o)
	return o
}
