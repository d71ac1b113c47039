package forward

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
	"github.com/tidwall/gjson"
)

// TestGiveBack: calls parked on one instance whose retries finish them on
// another give their sessions back to the first (its pool's, taken back
// with the notice): the upstream initializes one session for all of them
// and none is ended, and the first frees each place at once. A home that
// does not take the session back (unreachable, or not holding the place)
// leaves it to be ended upstream, and a notice signed for another
// principal, or naming another session, is not taken.
func TestGiveBack(t *testing.T) {
	upstream, server := resumableUpstream(t)
	bs := fleet(t, 2, func(o *Options) { o.ResumeLinger = -1 })
	var homes []translate.Owner
	toFirst := func(_ context.Context, home translate.Owner, n SessionNotice) error {
		homes = append(homes, home)
		ns, err := ParseNotice(MarshalNotice([]SessionNotice{n}))
		if err != nil {
			return err
		}
		if !bs[0].TakeBack(ns[0]) {
			return errors.New("not taken")
		}
		return nil
	}
	cross := func(i int, giveBack func(context.Context, translate.Owner, SessionNotice) error) {
		t.Helper()
		a := serve(bs[0], resumeRequest(t, upstream, 10*i, 1, ""))
		if a.status != http.StatusOK {
			t.Fatalf("call %d: %d %s", i, a.status, a.final)
		}
		extra, _ := answerRound(t, a, fmt.Sprintf("g%d", i))
		retry := resumeRequest(t, upstream, 10*i+1, 1, extra)
		retry.GiveBack = giveBack
		if a = serve(bs[1], retry); gjson.GetBytes(a.final, "result.content.0.text").String() != fmt.Sprintf("accept:g%d", i) {
			t.Fatalf("call %d on the other instance: %d %s", i, a.status, a.final)
		}
	}
	for i := range 5 {
		cross(i, toFirst)
		waitPlaces(t, bs[0], 0)
	}
	if st := bs[0].pool.StatsByUpstream()[upstream]; st.Initialized != 1 || st.Idle != 1 {
		t.Fatalf("the first instance's sessions: %+v, want one initialized, back in the pool", st)
	}
	waitSessions(t, server, 1)
	if len(homes) != 5 || homes[0].Instance != "gw-0" {
		t.Fatalf("notices went to %v, want gw-0 five times", homes)
	}

	// The home does not take it: ended upstream, and the first instance
	// finds its place's session gone.
	bs[0].checkAfter = 20 * time.Millisecond
	cross(5, func(context.Context, translate.Owner, SessionNotice) error { return errors.New("unreachable") })
	waitPlaces(t, bs[0], 0)
	waitPrimedOnly(t, server, bs[0])

	// Notices the home must not take.
	a := serve(bs[0], resumeRequest(t, upstream, 70, 1, ""))
	if a.status != http.StatusOK {
		t.Fatalf("call 7: %d %s", a.status, a.final)
	}
	bs[0].mu.Lock()
	var n SessionNotice
	for id, p := range bs[0].places {
		n = SessionNotice{Place: id, Principal: translate.PrincipalHash("mallory"), Upstream: p.key.Upstream, Session: p.sess.ID}
	}
	bs[0].mu.Unlock()
	other := n
	other.Principal, other.Session = translate.PrincipalHash("p"), "another"
	if bs[0].TakeBack(n) || bs[0].TakeBack(other) || bs[0].Places() != 1 {
		t.Fatal("a notice for another principal or session was taken")
	}
}

// waitPlaces fails unless b holds n places within 5s.
func waitPlaces(t *testing.T, b *Bridge, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for b.Places() != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d places, want %d", b.Places(), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestNoticeParse: a notice reads back as it was written, and malformed
// ones, or ones naming more than MaxNotices sessions, are refused.
func TestNoticeParse(t *testing.T) {
	ns := []SessionNotice{
		{Place: [16]byte{1, 2, 3}, Principal: [16]byte{4}, Upstream: "http://127.0.0.1:1/mcp", Session: "s\"1"},
		{Place: [16]byte{5}, Principal: [16]byte{6}, Upstream: "http://127.0.0.1:2/mcp", Session: "s2"},
	}
	got, err := ParseNotice(MarshalNotice(ns))
	if err != nil || len(got) != 2 || got[0] != ns[0] || got[1] != ns[1] {
		t.Fatalf("%+v %v", got, err)
	}
	if _, err := ParseNotice(MarshalNotice(slices.Repeat(ns[:1], MaxNotices+1))); err == nil {
		t.Error("parsed a notice of too many sessions")
	}
	const place, princ = `"place":"01020300000000000000000000000000"`, `"principal":"04000000000000000000000000000000"`
	for _, bad := range []string{
		`{"method":"tools/call","params":{"sessions":[{` + place + `,` + princ + `,"upstream":"u","session":"s"}]}}`,
		`{"method":"` + NoticeSessionReturned + `","params":{` + place + `,"upstream":"u","session":"s"}}`,
		`{"method":"` + NoticeSessionReturned + `","params":{"sessions":[]}}`,
		`{"method":"` + NoticeSessionReturned + `","params":{"sessions":[{"place":"0102",` + princ + `,"upstream":"u","session":"s"}]}}`,
		`{"method":"` + NoticeSessionReturned + `","params":{"sessions":[{` + place + `,"upstream":"u","session":"s"}]}}`,
		`{"method":"` + NoticeSessionReturned + `","params":{"sessions":[{` + place + `,` + princ + `,"upstream":"","session":"s"}]}}`,
		`{"method":"` + NoticeSessionReturned + `","params":{"sessions":[{` + place + `,` + princ + `,"upstream":"u"}]}}`,
	} {
		if _, err := ParseNotice([]byte(bad)); err == nil {
			t.Errorf("parsed %s", bad)
		}
	}
}
