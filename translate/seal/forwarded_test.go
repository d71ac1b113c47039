package seal

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

func testForwardedRequest() ForwardedRequest {
	return ForwardedRequest{
		Method: "POST", URI: "/mcp", Body: []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call"}`),
		Authorization: "Bearer alice", SessionID: "sid-1", Principal: testPrincipal,
	}
}

func TestForwardAuthRoundTrip(t *testing.T) {
	kr := testKeyring(t)
	a := NewForwardAuth(kr, "gw-a", NewReplayFilter(16))
	b := NewForwardAuth(kr, "gw-b", NewReplayFilter(16))
	r := testForwardedRequest()
	v := a.Sign("gw-b", r, testNow)
	if len(v) > maxForwardedHeader || strings.ContainsAny(v, " \r\n,") {
		t.Fatalf("header %q: too long or not a plain token list", v)
	}
	other := r
	other.Principal = [16]byte{} // not read: the header carries it
	if p, err := b.Verify(v, other, testNow.Add(time.Second)); err != nil || p != r.Principal {
		t.Fatalf("verify: %x, %v; want the signed principal %x", p, err, r.Principal)
	}
	if _, err := b.Verify(v, r, testNow.Add(2*time.Second)); !errors.Is(err, ErrForwardReplayed) {
		t.Fatalf("the same header again: %v, want ErrForwardReplayed", err)
	}
	if v2 := a.Sign("gw-b", r, testNow); v2 == v {
		t.Fatal("two signatures share a nonce")
	}
}

func TestForwardAuthRejects(t *testing.T) {
	kr := testKeyring(t)
	a := NewForwardAuth(kr, "gw-a", NewReplayFilter(16))
	r := testForwardedRequest()
	v := a.Sign("gw-b", r, testNow)
	later := testNow.Add(time.Second)
	verify := func(value string, r ForwardedRequest, now time.Time) error {
		// A fresh verifier each time, so that only the header is judged.
		_, err := NewForwardAuth(kr, "gw-b", NewReplayFilter(16)).Verify(value, r, now)
		return err
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
		"version":            with(0, "v1"),
		"unknown key":        with(1, "k=00000000"),
		"bad key id":         with(1, "k=xyz"),
		"target rewritten":   with(2, "t=gw-b2"),
		"expiry extended":    with(3, "e=9999999999"),
		"nonce changed":      with(4, flip(parts[4])),
		"principal changed":  with(5, flip(parts[5])),
		"principal short":    with(5, parts[5][:10]),
		"signature flipped":  with(6, flip(parts[6])),
		"signature short":    with(6, parts[6][:20]),
		"field order":        strings.Join([]string{parts[0], parts[2], parts[1], parts[3], parts[4], parts[5], parts[6]}, ";"),
		"extra field":        v + ";x=1",
		"too long":           v + strings.Repeat("A", maxForwardedHeader),
		"another fleet's":    NewForwardAuth(testKeyring(t, bytes.Repeat([]byte{9}, KeySize)), "gw-a", nil).Sign("gw-b", r, testNow),
		"signature replaced": with(6, "s="+strings.Repeat("A", 43)),
		"signed with no key": with(6, "s="),
	} {
		if err := verify(bad, r, later); !errors.Is(err, ErrForwardInvalid) {
			t.Errorf("%s: %v, want ErrForwardInvalid", name, err)
		}
	}

	if _, err := NewForwardAuth(kr, "gw-c", NewReplayFilter(16)).Verify(v, r, later); !errors.Is(err, ErrForwardTarget) {
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
	oldKey, newKey := bytes.Repeat([]byte{1}, KeySize), bytes.Repeat([]byte{2}, KeySize)
	before := NewForwardAuth(testKeyring(t, oldKey), "gw-a", NewReplayFilter(16))
	after := NewForwardAuth(testKeyring(t, newKey, oldKey), "gw-a", NewReplayFilter(16))
	r := testForwardedRequest()
	if _, err := after.Verify(before.Sign("gw-a", r, testNow), r, testNow); err != nil {
		t.Errorf("old key at a rotated instance: %v", err)
	}
	if _, err := NewForwardAuth(testKeyring(t, oldKey, newKey), "gw-a", NewReplayFilter(16)).Verify(after.Sign("gw-a", r, testNow), r, testNow); err != nil {
		t.Errorf("new key at an instance that knows it second: %v", err)
	}
	if _, err := before.Verify(after.Sign("gw-a", r, testNow), r, testNow); !errors.Is(err, ErrForwardInvalid) {
		t.Errorf("new key at an instance that does not know it: %v", err)
	}
}

// TestForwardFlood is the starvation attack: one client makes an
// instance forward as fast as it can, filling the owner's cache with live
// nonces. A fresh header of another client still passes, a replay of any
// header it accepted is still refused, and a header that waited longer than
// the cache's window is refused as possibly replayed (503, not 403).
func TestForwardFlood(t *testing.T) {
	kr := testKeyring(t)
	const size = 1000
	owner := NewForwardAuth(kr, "gw-b", NewReplayFilter(size))
	flooder := NewForwardAuth(kr, "gw-a", nil)
	r := testForwardedRequest()
	now := testNow
	legit := flooder.Sign("gw-b", r, now)
	if _, err := owner.Verify(legit, r, now); err != nil {
		t.Fatal(err)
	}
	stale := flooder.Sign("gw-b", r, now) // signed now, delivered after the flood
	var accepted []string
	for i := range 20 * size {
		now = now.Add(100 * time.Microsecond) // 10,000 forwarded requests a second
		v := flooder.Sign("gw-b", r, now)
		if _, err := owner.Verify(v, r, now); err != nil {
			t.Fatalf("flood request %d refused: %v", i, err)
		}
		if i%size == 0 {
			accepted = append(accepted, v)
		}
	}
	fresh := flooder.Sign("gw-b", r, now)
	if _, err := owner.Verify(fresh, r, now); err != nil {
		t.Fatalf("a fresh header after the flood: %v", err)
	}
	for _, v := range append(accepted, legit, fresh) {
		if _, err := owner.Verify(v, r, now.Add(time.Millisecond)); err == nil {
			t.Fatal("a header accepted before was accepted again")
		}
	}
	if _, err := owner.Verify(stale, r, now); !errors.Is(err, ErrForwardBusy) {
		t.Fatalf("a header older than the cache's window: %v, want ErrForwardBusy", err)
	}
	if n := len(owner.seen.seen); n > size {
		t.Fatalf("the cache holds %d nonces, bound %d", n, size)
	}
}

// TestForwardAuthConcurrentReplay: of many concurrent deliveries of one
// header, exactly one is accepted.
func TestForwardAuthConcurrentReplay(t *testing.T) {
	kr := testKeyring(t)
	b := NewForwardAuth(kr, "gw-b", NewReplayFilter(1024))
	r := testForwardedRequest()
	v := NewForwardAuth(kr, "gw-a", nil).Sign("gw-b", r, testNow)
	var wg sync.WaitGroup
	var mu sync.Mutex
	accepted := 0
	for range 32 {
		wg.Go(func() {
			if _, err := b.Verify(v, r, testNow); err == nil {
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
	a := NewForwardAuth(kr, "gw-a", NewReplayFilter(1<<16))
	r := testForwardedRequest()
	now := testNow
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(time.Millisecond) // nonces expire: the cache stays below its bound
		if _, err := a.Verify(a.Sign("gw-a", r, now), r, now); err != nil {
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
	exp := testNow.Add(forwardTTL).UnixMilli()
	good := fmt.Sprintf("v2;k=%08x;t=gw-b;e=%d;n=%s;p=%s;s=%s", k.ID, exp, base64.RawURLEncoding.EncodeToString(nonce[:]),
		base64.RawURLEncoding.EncodeToString(r.Principal[:]), base64.RawURLEncoding.EncodeToString(forwardMAC(k.Key, "gw-b", exp, nonce, r)))
	f.Add(good)
	f.Add("v2;k=;t=;e=;n=;p=;s=")
	f.Add("v2;k=00000000;t=gw-b;e=-1;n=AAAAAAAAAAAAAAAAAAAAAA;p=AAAAAAAAAAAAAAAAAAAAAA;s=" + strings.Repeat("A", 43))
	f.Add(strings.Repeat(";", 300))
	f.Fuzz(func(t *testing.T, v string) {
		_, err := NewForwardAuth(kr, "gw-b", NewReplayFilter(4)).Verify(v, r, testNow)
		if err == nil && v != good {
			t.Fatalf("accepted %q, which is not the signed header", v)
		}
		if err != nil && v == good {
			t.Fatalf("refused the signed header: %v", err)
		}
	})
}
