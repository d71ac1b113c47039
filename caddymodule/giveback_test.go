package caddymodule

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/legacy"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/forward"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/seal"
	"go.uber.org/zap"
)

// TestGiveBackCoalesced: the sessions given back to one home while a
// notice is on its way go together in the next notice, each sender learns
// whether the home took its session, and the home verifies every notice
// as a forwarded request of the fleet.
func TestGiveBackCoalesced(t *testing.T) {
	key := seal.NewRandomKey()
	kr, err := seal.NewKeyring(key)
	if err != nil {
		t.Fatal(err)
	}
	homeAuth := seal.NewForwardAuth(kr, "gw-a", seal.NewReplayFilter(64))
	release := make(chan struct{})
	var mu sync.Mutex
	var sizes []int
	home := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if _, err := homeAuth.Verify(r.Header.Get(seal.ForwardedHeader), forwardedRequest(r, body, [16]byte{}), time.Now()); err != nil {
			t.Errorf("the notice does not verify: %v", err)
		}
		ns, err := forward.ParseNotice(body)
		if err != nil {
			t.Errorf("notice %s: %v", body, err)
		}
		mu.Lock()
		sizes = append(sizes, len(ns))
		first := len(sizes) == 1
		mu.Unlock()
		if first {
			<-release
		}
		taken := make([]bool, len(ns))
		for i, n := range ns {
			taken[i] = n.Session != "refused"
		}
		_ = json.NewEncoder(w).Encode(noticeAnswer{Taken: taken})
	}))
	defer home.Close()

	sender := Handler{Fleet: FleetConfig{StateKeys: []string{base64.StdEncoding.EncodeToString(key)}, InstanceID: "gw-b",
		Peers: map[string]string{"gw-a": home.URL}}}
	sender.keyring, sender.logger = kr, zap.NewNop()
	if err := sender.provisionFleet(); err != nil {
		t.Fatal(err)
	}
	send := sender.giveBackVia(httptest.NewRequest(http.MethodPost, "/mcp", nil))
	owner := translate.Owner{Instance: "gw-a"}
	notice := func(session string) forward.SessionNotice {
		return forward.SessionNotice{Upstream: "http://127.0.0.1:1/mcp", Session: legacy.UpstreamSessionID(session)}
	}
	errs := make(chan error, 4)
	go func() { errs <- send(context.Background(), owner, notice("s0")) }()
	waitFor(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(sizes) == 1 })
	for _, s := range []string{"s1", "refused", "s3"} {
		go func() { errs <- send(context.Background(), owner, notice(s)) }()
	}
	waitFor(t, func() bool {
		sender.fleet.notices.mu.Lock()
		defer sender.fleet.notices.mu.Unlock()
		for _, q := range sender.fleet.notices.by {
			return len(q.pending) == 3
		}
		return false
	})
	close(release)
	var refused int
	for range 4 {
		switch err := <-errs; {
		case errors.Is(err, errNotTaken):
			refused++
		case err != nil:
			t.Fatal(err)
		}
	}
	if refused != 1 || len(sizes) != 2 || sizes[0] != 1 || sizes[1] != 3 {
		t.Fatalf("notices of %v sessions, %d refused; want [1 3] and 1", sizes, refused)
	}
	waitFor(t, func() bool {
		sender.fleet.notices.mu.Lock()
		defer sender.fleet.notices.mu.Unlock()
		return len(sender.fleet.notices.by) == 0
	})
}

// waitFor fails unless cond holds within 5s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5s")
		}
		time.Sleep(time.Millisecond)
	}
}
