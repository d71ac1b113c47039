package caddymodule

import (
	"context"
	"testing"
	"time"
)

func TestStreamRegistryClosesAll(t *testing.T) {
	s := newStreamRegistry()
	ctx1, cancel1 := context.WithCancelCause(context.Background())
	ctx2, cancel2 := context.WithCancelCause(context.Background())
	del1 := s.add(cancel1)
	s.add(cancel2)
	del1()
	if ctx1.Err() != nil {
		t.Fatal("removing an exchange cancelled it")
	}
	s.closeAll(0)
	if context.Cause(ctx2) != errStreamsClosed {
		t.Fatalf("open exchange not closed: %v", context.Cause(ctx2))
	}
	if ctx1.Err() != nil {
		t.Fatal("a removed exchange was cancelled")
	}
	ctx3, cancel3 := context.WithCancelCause(context.Background())
	s.add(cancel3)
	if context.Cause(ctx3) != errStreamsClosed {
		t.Fatal("an exchange added after close was not cancelled at once")
	}
}

func TestStreamRegistryDelay(t *testing.T) {
	s := newStreamRegistry()
	ctx, cancel := context.WithCancelCause(context.Background())
	del := s.add(cancel)
	s.closeAll(50 * time.Millisecond)
	if ctx.Err() != nil {
		t.Fatal("closed before the delay")
	}
	// An exchange added during the delay is closed with the others.
	late, lateCancel := context.WithCancelCause(context.Background())
	delLate := s.add(lateCancel)
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("not closed after the delay")
	}
	<-late.Done()
	// Cancelled exchanges count until their handlers are done with them.
	if s.count() != 2 {
		t.Fatalf("%d exchanges left, want the 2 cancelled ones still running", s.count())
	}
	del()
	delLate()
	if s.count() != 0 {
		t.Fatalf("%d exchanges left", s.count())
	}
}

// TestStreamRegistryWait: wait returns once the registry is closed and the
// last exchange ended, and not before.
func TestStreamRegistryWait(t *testing.T) {
	s := newStreamRegistry()
	_, cancel := context.WithCancelCause(context.Background())
	del := s.add(cancel)
	short, stop := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer stop()
	if s.wait(short) {
		t.Fatal("wait returned before the registry was closed")
	}
	s.closeAllWith(0, errStopping)
	short2, stop2 := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer stop2()
	if s.wait(short2) {
		t.Fatal("wait returned with an exchange still running")
	}
	del()
	if !s.wait(context.Background()) {
		t.Fatal("wait did not return once the last exchange ended")
	}
}

func TestStreamRegistryDelayReleasedWhenEmpty(t *testing.T) {
	s := newStreamRegistry()
	_, cancel := context.WithCancelCause(context.Background())
	del := s.add(cancel)
	s.closeAll(time.Hour)
	del() // the last exchange ends on its own: the timer is released
	ctx, cancel2 := context.WithCancelCause(context.Background())
	s.add(cancel2)
	if ctx.Err() == nil {
		t.Fatal("an exchange added after the registry emptied was not cancelled at once")
	}
}
