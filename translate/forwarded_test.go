package translate

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/legacy"
)

func testForwardedRequest() ForwardedRequest {
	return ForwardedRequest{
		Method: "POST", URI: "/mcp", Body: []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call"}`),
		Authorization: "Bearer alice", SessionID: "sid-1",
	}
}

func TestForwardAuthRoundTrip(t *testing.T) {
	kr := testKeyring(t)
	a := NewForwardAuth(kr, "gw-a", NewNonceCache(16))
	b := NewForwardAuth(kr, "gw-b", NewNonceCache(16))
	r := testForwardedRequest()
	v := a.Sign("gw-b", r, testNow)
	if len(v) > maxForwardedHeader || strings.ContainsAny(v, " \r\n,") {
		t.Fatalf("header %q: too long or not a plain token list", v)
	}
	if err := b.Verify(v, r, testNow.Add(time.Second)); err != nil {
		t.Fatalf("verify: %v", err)
	}
	if err := b.Verify(v, r, testNow.Add(2*time.Second)); !errors.Is(err, ErrForwardReplayed) {
		t.Fatalf("the same header again: %v, want ErrForwardReplayed", err)
	}
	if v2 := a.Sign("gw-b", r, testNow); v2 == v {
		t.Fatal("two signatures share a nonce")
	}
}

func TestForwardAuthRejects(t *testing.T) {
	kr := testKeyring(t)
	a := NewForwardAuth(kr, "gw-a", NewNonceCache(16))
	r := testForwardedRequest()
	v := a.Sign("gw-b", r, testNow)
	later := testNow.Add(time.Second)
	verify := func(value string, r ForwardedRequest, now time.Time) error {
		// A fresh verifier each time, so that only the header is judged.
		return NewForwardAuth(kr, "gw-b", NewNonceCache(16)).Verify(value, r, now)
	}

	changed := map[string]func(*ForwardedRequest){
		"method":        func(r *ForwardedRequest) { r.Method = "GET" },
		"uri":           func(r *ForwardedRequest) { r.URI = "/other" },
		"body":          func(r *ForwardedRequest) { r.Body = append(bytes.Clone(r.Body), ' ') },
		"authorization": func(r *ForwardedRequest) { r.Authorization = "Bearer mallory" },
		"session":       func(r *ForwardedRequest) { r.SessionID = "sid-2" },
	}
	for name, change := range changed {
		other := testForwardedRequest()
		change(&other)
		if err := verify(v, other, later); !errors.Is(err, ErrForwardInvalid) {
			t.Errorf("%s changed: %v, want ErrForwardInvalid", name, err)
		}
	}

	parts := strings.Split(v, ";")
	with := func(i int, val string) string {
		p := append([]string(nil), parts...)
		p[i] = val
		return strings.Join(p, ";")
	}
	flip := func(s string) string {
		b := []byte(s)
		if b[len(b)-3] == 'A' {
			b[len(b)-3] = 'B'
		} else {
			b[len(b)-3] = 'A'
		}
		return string(b)
	}
	for name, bad := range map[string]string{
		"empty":              "",
		"garbage":            "hello",
		"version":            with(0, "v2"),
		"unknown key":        with(1, "k=00000000"),
		"bad key id":         with(1, "k=xyz"),
		"target rewritten":   with(2, "t=gw-b2"),
		"expiry extended":    with(3, "e=9999999999"),
		"nonce changed":      with(4, flip(parts[4])),
		"signature flipped":  with(5, flip(parts[5])),
		"signature short":    with(5, parts[5][:20]),
		"field order":        strings.Join([]string{parts[0], parts[2], parts[1], parts[3], parts[4], parts[5]}, ";"),
		"extra field":        v + ";x=1",
		"too long":           v + strings.Repeat("A", maxForwardedHeader),
		"another fleet's":    NewForwardAuth(testKeyring(t, bytes.Repeat([]byte{9}, legacy.KeySize)), "gw-a", nil).Sign("gw-b", r, testNow),
		"signature replaced": with(5, "s="+strings.Repeat("A", 43)),
		"signed with no key": with(5, "s="),
	} {
		if err := verify(bad, r, later); !errors.Is(err, ErrForwardInvalid) {
			t.Errorf("%s: %v, want ErrForwardInvalid", name, err)
		}
	}

	if err := NewForwardAuth(kr, "gw-c", NewNonceCache(16)).Verify(v, r, later); !errors.Is(err, ErrForwardTarget) {
		t.Errorf("at another instance: %v, want ErrForwardTarget", err)
	}
	if err := verify(v, r, testNow.Add(forwardTTL)); !errors.Is(err, ErrForwardExpired) {
		t.Errorf("at expiry: %v, want ErrForwardExpired", err)
	}
	if err := verify(v, r, testNow.Add(-maxClockSkew-time.Second)); !errors.Is(err, ErrForwardExpired) {
		t.Errorf("from too far in the future: %v, want ErrForwardExpired", err)
	}
	if err := verify(v, r, testNow.Add(-maxClockSkew+time.Second)); err != nil {
		t.Errorf("within the clock skew: %v", err)
	}
}

// TestForwardAuthKeyRotation: a header signed with the old key verifies at
// an instance that already seals with the new one, and the other way round.
func TestForwardAuthKeyRotation(t *testing.T) {
	oldKey, newKey := bytes.Repeat([]byte{1}, legacy.KeySize), bytes.Repeat([]byte{2}, legacy.KeySize)
	before := NewForwardAuth(testKeyring(t, oldKey), "gw-a", NewNonceCache(16))
	after := NewForwardAuth(testKeyring(t, newKey, oldKey), "gw-a", NewNonceCache(16))
	r := testForwardedRequest()
	if err := after.Verify(before.Sign("gw-a", r, testNow), r, testNow); err != nil {
		t.Errorf("old key at a rotated instance: %v", err)
	}
	if err := NewForwardAuth(testKeyring(t, oldKey, newKey), "gw-a", NewNonceCache(16)).Verify(after.Sign("gw-a", r, testNow), r, testNow); err != nil {
		t.Errorf("new key at an instance that knows it second: %v", err)
	}
	if err := before.Verify(after.Sign("gw-a", r, testNow), r, testNow); !errors.Is(err, ErrForwardInvalid) {
		t.Errorf("new key at an instance that does not know it: %v", err)
	}
}

func TestNonceCache(t *testing.T) {
	c := NewNonceCache(2)
	n := func(b byte) [16]byte { return [16]byte{b} }
	exp := testNow.Add(forwardTTL)
	if c.add(n(1), exp, testNow) != nil || c.add(n(2), exp, testNow) != nil {
		t.Fatal("the first two nonces refused")
	}
	if err := c.add(n(1), exp, testNow); !errors.Is(err, ErrForwardReplayed) {
		t.Fatalf("a seen nonce: %v", err)
	}
	if err := c.add(n(3), exp, testNow); !errors.Is(err, ErrForwardBusy) {
		t.Fatalf("a full cache: %v, want ErrForwardBusy (never forget a live nonce)", err)
	}
	if err := c.add(n(3), exp.Add(forwardTTL), exp); err != nil {
		t.Fatalf("after the others expired: %v", err)
	}
	if len(c.seen) != 1 || c.order.Len() != 1 {
		t.Fatalf("expired nonces kept: %d, %d", len(c.seen), c.order.Len())
	}
}

// TestForwardAuthConcurrentReplay: of many concurrent deliveries of one
// header, exactly one is accepted.
func TestForwardAuthConcurrentReplay(t *testing.T) {
	kr := testKeyring(t)
	b := NewForwardAuth(kr, "gw-b", NewNonceCache(1024))
	r := testForwardedRequest()
	v := NewForwardAuth(kr, "gw-a", nil).Sign("gw-b", r, testNow)
	var wg sync.WaitGroup
	var mu sync.Mutex
	accepted := 0
	for range 32 {
		wg.Go(func() {
			if b.Verify(v, r, testNow) == nil {
				mu.Lock()
				accepted++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if accepted != 1 {
		t.Fatalf("%d deliveries accepted, want 1", accepted)
	}
}

func BenchmarkForwardAuth(b *testing.B) {
	kr := testKeyring(b)
	a := NewForwardAuth(kr, "gw-a", NewNonceCache(1<<16))
	r := testForwardedRequest()
	now := testNow
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(time.Millisecond) // nonces expire: the cache stays below its bound
		if err := a.Verify(a.Sign("gw-a", r, now), r, now); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzVerifyForwarded: no header value panics the verifier, and only the
// one a fleet member signed for this request is accepted.
func FuzzVerifyForwarded(f *testing.F) {
	kr := testKeyring(f)
	r := testForwardedRequest()
	// Signed by hand with a fixed nonce: every fuzz worker must see the
	// same seeds.
	k := kr.MACKeys(forwardPurpose)[0]
	nonce := [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	exp := testNow.Add(forwardTTL).Unix()
	good := fmt.Sprintf("v1;k=%08x;t=gw-b;e=%d;n=%s;s=%s", k.ID, exp, base64.RawURLEncoding.EncodeToString(nonce[:]),
		base64.RawURLEncoding.EncodeToString(forwardMAC(k.Key, "gw-b", exp, nonce, r)))
	f.Add(good)
	f.Add("v1;k=;t=;e=;n=;s=")
	f.Add("v1;k=00000000;t=gw-b;e=-1;n=AAAAAAAAAAAAAAAAAAAAAA;s=" + strings.Repeat("A", 43))
	f.Add(strings.Repeat(";", 300))
	f.Fuzz(func(t *testing.T, v string) {
		err := NewForwardAuth(kr, "gw-b", NewNonceCache(4)).Verify(v, r, testNow)
		if err == nil && v != good {
			t.Fatalf("accepted %q, which is not the signed header", v)
		}
		if err != nil && v == good {
			t.Fatalf("refused the signed header: %v", err)
		}
	})
}

// TestParkedElsewhere: only a retry whose state opens, is the retry's own,
// and names another instance is to be forwarded, with the sealed address.
func TestParkedElsewhere(t *testing.T) {
	kr := testKeyring(t)
	b := NewBridge(nil, BridgeOptions{Keyring: kr, Instance: "gw-b"})
	defer b.Close()
	params := func(state string) []byte {
		return []byte(`{"name":"t","arguments":{"a":1},"inputResponses":{},"requestState":"` + state + `"}`)
	}
	state := func(instance, address, principal string) string {
		return SealState(kr, State{Instance: instance, Address: address, Principal: PrincipalHash(principal),
			Digest: RequestDigest("tools/call", params("")), Expires: time.Now().Add(time.Minute)})
	}
	req := func(method, principal string, body []byte) Request {
		return Request{Principal: principal, ModernRequest: &ModernRequest{
			Message: Message{ID: []byte("1"), Method: method, Kind: KindRequest},
			Body:    []byte(`{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":` + string(body) + `}`),
		}}
	}
	elsewhere := req("tools/call", "alice", params(state("gw-a", "http://10.0.0.1:8080", "alice")))
	if o, ok := b.ParkedElsewhere(&elsewhere); !ok ||
		o != (Owner{Instance: "gw-a", Address: "http://10.0.0.1:8080"}) {
		t.Fatalf("a retry parked on gw-a: %+v, %t", o, ok)
	}
	for name, r := range map[string]Request{
		"parked here":       req("tools/call", "alice", params(state("gw-b", "", "alice"))),
		"another principal": req("tools/call", "mallory", params(state("gw-a", "http://10.0.0.1:8080", "alice"))),
		"another request":   req("tools/call", "alice", []byte(`{"name":"t","arguments":{"a":2},"requestState":"`+state("gw-a", "", "alice")+`"}`)),
		"tampered":          req("tools/call", "alice", params(state("gw-a", "", "alice")+"x")),
		"no state":          req("tools/call", "alice", []byte(`{"name":"t","arguments":{"a":1}}`)),
		"not input-capable": req("tools/list", "alice", params(state("gw-a", "", "alice"))),
	} {
		if o, ok := b.ParkedElsewhere(&r); ok {
			t.Errorf("%s: forwarded to %+v", name, o)
		}
	}
}
