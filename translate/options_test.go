package translate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/legacy/seal"
)

// Two configurations sharing one bridge keep their own options: each
// request carries its configuration's, and a call keeps those it started
// with.

// withOptions returns r carrying o.
func withOptions(r Request, o *BridgeOptions) Request {
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
	kA, kB := testKeyring(t), testKeyring(t, bytes.Repeat([]byte{8}, seal.KeySize))
	optA := bridgeOptions(func(o *BridgeOptions) { o.Keyring, o.Instance, o.ParkTTL, o.MaxRounds = kA, "test", time.Minute, 1 }).Ready()
	optB := bridgeOptions(func(o *BridgeOptions) { o.Keyring, o.Instance, o.ParkTTL, o.MaxRounds = kB, "test", time.Minute, 3 }).Ready()

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
	if code := gjson.GetBytes(refused.final, "error.code").Int(); code != InvalidParams || refused.status != http.StatusBadRequest {
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
	optC := bridgeOptions(func(o *BridgeOptions) { o.Keyring, o.Instance, o.ParkTTL, o.MaxRounds = kA, "test", time.Minute, 3 }).Ready()
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
	kr := testKeyring(t)
	obsA, obsB := &recordingObserver{}, &recordingObserver{}
	optA := bridgeOptions(func(o *BridgeOptions) {
		o.Keyring, o.Instance, o.ParkTTL, o.MaxParked, o.Observer = kr, "test", time.Minute, 1, obsA
	}).Ready()
	optB := bridgeOptions(func(o *BridgeOptions) {
		o.Keyring, o.Instance, o.ParkTTL, o.MaxParked, o.Observer = kr, "test", time.Minute, 2, obsB
	}).Ready()
	short := bridgeOptions(func(o *BridgeOptions) {
		o.Keyring, o.Instance, o.ParkTTL, o.Observer = kr, "test", 100*time.Millisecond, obsA
	}).Ready()

	var bCalls []*recordedAnswer
	for i := range 2 {
		bCalls = append(bCalls, serve(b, withOptions(askRequest(t, upstream, 1+i, 1, ""), optB)))
	}
	for i := range 2 {
		serve(b, withOptions(askRequest(t, upstream, 10+i, 1, ""), optA)) // the second is refused
	}
	if _, unparked := obsA.wait(t, 1); len(unparked) != 1 || unparked[0] != ParkRefused {
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
	if _, unparked := obsB.wait(t, 2); len(unparked) != 2 || unparked[0] != ParkAnswered || unparked[1] != ParkAnswered {
		t.Fatalf("B unparked %v, want two answered", unparked)
	}
	if _, unparked := obsA.wait(t, 2); unparked[1] != ParkExpired {
		t.Fatalf("A unparked %v, want a refusal then an expiry", unparked)
	}
}

// TestReverseOptionsPerSession: a session keeps the options of the
// configuration that opened it (max_rounds), and a session id sealed with
// one configuration's key does not open with another's.
func TestReverseOptionsPerSession(t *testing.T) {
	up := modernUpstream(t)
	rv := newTestReverse(t)
	kB := testKeyring(t, bytes.Repeat([]byte{5}, seal.KeySize))
	optA := reverseOptions(func(o *ReverseOptions) {
		o.Keyring, o.Instance, o.MaxRounds, o.RoundTimeout = rv.defaults.Keyring, "0123456789abcdef", 1, 5*time.Second
	}).Ready()
	optB := reverseOptions(func(o *ReverseOptions) {
		o.Keyring, o.Instance, o.MaxRounds, o.RoundTimeout = kB, "0123456789abcdef", 3, 5*time.Second
	}).Ready()

	open := func(o *ReverseOptions) (*ReverseSession, string) {
		body := []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{}},"clientInfo":{"name":"t","version":"1"}}}`)
		_, sid, rerr := rv.Initialize(context.Background(), InitRequest{Target: Target{Upstream: up}, Principal: PrincipalHash("p"), ID: []byte("1"), Body: body, Options: o})
		if rerr != nil {
			t.Fatal(rerr)
		}
		s, err := rv.Open(o, string(sid), PrincipalHash("p"), time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return s, string(sid)
	}
	run := func(s *ReverseSession, rounds int) (int, sinkResponse) {
		sink := newRecordingSink()
		go rv.Serve(t.Context(), s, callRequest(t, 1, rounds), sink)
		for asked := 0; ; asked++ {
			select {
			case f := <-sink.final:
				return asked, f
			case q := <-sink.notes:
				answer := fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"action":"accept","content":{"answer":"r"}}}`, gjson.GetBytes(q, "id").Raw)
				if rerr := rv.Answer(s, []byte(answer)); rerr != nil {
					t.Fatal(rerr)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("no answer within 5s")
			}
		}
	}

	sA, sidA := open(optA)
	if asked, f := run(sA, 3); asked != 1 || !gjson.GetBytes(f.msg, "result.isError").Bool() {
		t.Fatalf("A's session asked %d rounds, then %s; want 1 then max_rounds' isError result", asked, f.msg)
	}
	sB, _ := open(optB)
	if asked, f := run(sB, 3); asked != 3 || gjson.GetBytes(f.msg, "result.isError").Bool() {
		t.Fatalf("B's session asked %d rounds, then %s; want 3 then the result", asked, f.msg)
	}
	if _, err := rv.Open(optB, sidA, PrincipalHash("p"), time.Now()); !errors.Is(err, ErrNoSession) {
		t.Fatalf("A's session id opened with B's key: %v", err)
	}
}

// bridgeOptions is DefaultBridgeOptions changed by set.
func bridgeOptions(set func(*BridgeOptions)) BridgeOptions {
	o := DefaultBridgeOptions()
	set(&o)
	return o
}

// reverseOptions is DefaultReverseOptions changed by set.
func reverseOptions(set func(*ReverseOptions)) ReverseOptions {
	o := DefaultReverseOptions()
	set(&o)
	return o
}
