package caddymodule

import (
	"context"
	"testing"
)

// TestStopOnlyWhenLast: a reload provisions the new handler before it
// cleans up the old one; the old one's Cleanup then refuses nothing and
// cancels nothing (the calls belong to both). The last handler's Cleanup
// stops the gateway: requests are refused, the calls cancelled with
// errStopping.
func TestStopOnlyWhenLast(t *testing.T) {
	old, next := oneUpstream(), oneUpstream()
	if err := provisioned(t, old); err != nil {
		t.Fatal(err)
	}
	if err := provisioned(t, next); err != nil {
		t.Fatal(err)
	}
	call, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	done := next.calls.add(cancel)
	if err := old.Cleanup(); err != nil {
		t.Fatal(err)
	}
	if next.life.isStopping() || call.Err() != nil {
		t.Fatalf("a reload's cleanup stopped the gateway: stopping %v, call %v", next.life.isStopping(), context.Cause(call))
	}
	done() // the call ends on its own, before the last cleanup
	if err := next.Cleanup(); err != nil {
		t.Fatal(err)
	}
	if !next.life.isStopping() {
		t.Fatal("the last handler's cleanup did not stop the gateway")
	}
	late, lateCancel := context.WithCancelCause(context.Background())
	defer lateCancel(nil)
	next.calls.add(lateCancel)()
	if context.Cause(late) != errStopping {
		t.Fatalf("a call after the stop: %v, want errStopping", context.Cause(late))
	}
}
