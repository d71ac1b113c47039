package caddymodule

import (
	"context"
	"sync"
	"time"
)

// streamRegistry tracks every upstream exchange in flight (SSE streams and
// pending JSON answers) so that the handler can end them itself on config
// unload and on shutdown: Caddy's grace period does not end SSE streams, and
// an open stream would hang `caddy stop`.
type streamRegistry struct {
	mu     sync.Mutex
	closed bool
	next   uint64
	open   map[uint64]context.CancelCauseFunc
	timer  *time.Timer
}

// errStreamsClosed is the cause given to exchanges the gateway ends itself.
var errStreamsClosed = &closedError{}

type closedError struct{}

func (*closedError) Error() string { return "mcp_gateway is unloading: stream closed" }

func newStreamRegistry() *streamRegistry {
	return &streamRegistry{open: make(map[uint64]context.CancelCauseFunc)}
}

// add registers an exchange. The returned func removes it; it must be
// called when the exchange ends. If the registry is already closed, cancel is
// called at once.
func (s *streamRegistry) add(cancel context.CancelCauseFunc) (del func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed && s.timer == nil {
		cancel(errStreamsClosed)
		return func() {}
	}
	id := s.next
	s.next++
	s.open[id] = cancel
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.open, id)
		if len(s.open) == 0 && s.timer != nil {
			// Nothing is left to close: release the timer (and through it
			// the handler) now; later exchanges are cancelled at once.
			s.timer.Stop()
			s.timer = nil
		}
	}
}

// closeAll ends every exchange after delay (at once if delay <= 0). Only
// the first call counts.
func (s *streamRegistry) closeAll(delay time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.closed = true
	if delay <= 0 || len(s.open) == 0 {
		s.cancelLocked()
		return
	}
	s.timer = time.AfterFunc(delay, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.timer = nil
		s.cancelLocked()
	})
}

func (s *streamRegistry) cancelLocked() {
	for id, cancel := range s.open {
		cancel(errStreamsClosed)
		delete(s.open, id)
	}
}

// count returns how many exchanges are open.
func (s *streamRegistry) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.open)
}
