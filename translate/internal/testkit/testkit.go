// Package testkit holds what the tests of the bridges share: a keyring and
// an observer that records what a bridge reports. Only tests import it.
package testkit

import (
	"bytes"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/seal"
)

// Key is the key of the keyrings tests seal with.
var Key = bytes.Repeat([]byte{7}, seal.KeySize)

// Keyring is a keyring of keys (Key when none), for tests.
func Keyring(t testing.TB, keys ...[]byte) *seal.Keyring {
	t.Helper()
	if len(keys) == 0 {
		keys = [][]byte{Key}
	}
	kr, err := seal.NewKeyring(keys...)
	if err != nil {
		t.Fatal(err)
	}
	return kr
}

// Observer is a translate.Observer that keeps what a bridge reports.
type Observer struct {
	mu       sync.Mutex
	calls    []translate.CallReport
	unparked []string
}

func (o *Observer) CallEnded(r translate.CallReport) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.calls = append(o.calls, r)
}

func (o *Observer) Unparked(why string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.unparked = append(o.unparked, why)
}

// Wait returns the reports once there are at least n calls.
func (o *Observer) Wait(t *testing.T, n int) ([]translate.CallReport, []string) {
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
