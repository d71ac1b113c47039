package sse

import (
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// ErrClosed is returned by writes on a [Writer] that was closed, either by
// [Writer.Close] or because an earlier write failed; in the latter case the
// error also wraps that earlier failure.
var ErrClosed = errors.New("sse: writer closed")

// keepAliveComment is what [Writer.KeepAlive] writes on an idle stream.
var keepAliveComment = []byte(": keep-alive\n\n")

// maxKeepBuf is the largest encoding buffer a Writer keeps between writes.
const maxKeepBuf = 64 << 10

// Writer encodes events and comments onto an HTTP response and flushes each
// one to the client immediately.
//
// A Writer is safe for concurrent use: writes are serialized, so a proxy loop
// and the keep-alive timer can share one. The first failed write or flush
// (typically, the client went away) closes the Writer.
type Writer struct {
	mu        sync.Mutex
	w         http.ResponseWriter
	rc        *http.ResponseController
	buf       []byte
	closed    bool
	cause     error // the write or flush failure that closed the Writer
	lastWrite time.Time

	writeTimeout time.Duration

	interval time.Duration
	timer    *time.Timer
	gen      uint64 // identifies the current timer; stale callbacks do nothing
}

// NewWriter returns a Writer on w. The caller sets the headers (see
// [SetHeaders]) and may write the status code first; otherwise the first
// event implies 200 OK.
//
// Flushing goes through [http.NewResponseController], so w may be a wrapper
// that exposes the real writer through an Unwrap method, as Caddy's are.
func NewWriter(w http.ResponseWriter) *Writer {
	return &Writer{w: w, rc: http.NewResponseController(w)}
}

// WriteEvent writes ev and flushes it.
//
// The id line is written when ev.HasID is set (even with an empty ID), the
// event line when ev.Type is not empty, the retry line when ev.HasRetry is
// set, and data lines when ev.HasData is set or ev.Data is not empty: one
// "data:" line per line of Data, where CRLF, LF and a lone CR all count as
// line breaks (so a lone CR arrives at the client as LF). An event with no
// field at all writes nothing.
//
// An ID containing CR, LF or NUL, a Type containing CR or LF, or a negative
// Retry is rejected with an error matching [ErrInvalidField]; nothing is
// written and the Writer stays usable.
func (w *Writer) WriteEvent(ev Event) error {
	return w.writeBuilt(func(b []byte) ([]byte, error) { return appendEvent(b, ev) })
}

// WriteComment writes the comment ": text" followed by a blank line, and
// flushes it. Clients ignore comments; they keep idle connections open. A
// text containing CR or LF is rejected with an error matching
// [ErrInvalidField].
func (w *Writer) WriteComment(text string) error {
	return w.writeBuilt(func(b []byte) ([]byte, error) { return appendComment(b, text) })
}

// writeBuilt writes and flushes what build appends to the Writer's buffer
// (nothing when it appends nothing), under the Writer's lock.
func (w *Writer) writeBuilt(build func([]byte) ([]byte, error)) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return w.closedErr()
	}
	buf, err := build(w.buf[:0])
	if err != nil {
		return err
	}
	if len(buf) == 0 {
		return nil
	}
	err = w.write(buf)
	w.keepBuf(buf)
	return err
}

// KeepAlive makes the Writer write the comment ": keep-alive" whenever
// nothing has been written for interval, so that idle connections are not
// dropped by intermediaries. Every write, of any kind, restarts the wait.
// Calling KeepAlive again replaces the interval; interval <= 0 turns
// keep-alives off. It uses a single [time.AfterFunc] timer and no goroutine
// of its own. A failed keep-alive closes the Writer like any failed write.
func (w *Writer) KeepAlive(interval time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stopTimer()
	if w.closed || interval <= 0 {
		return
	}
	w.interval = interval
	gen := w.gen
	w.timer = time.AfterFunc(interval, func() { w.tick(gen) })
}

// WriteTimeout bounds how long each write (with its flush) may block, for
// example on a client that stopped reading: a write still blocked after d
// fails, which closes the Writer. d <= 0 (the default) means no bound. The
// deadline is set on the connection for the duration of each write only,
// when the ResponseWriter supports it.
func (w *Writer) WriteTimeout(d time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writeTimeout = d
}

// Close stops keep-alives and makes further writes fail with [ErrClosed]. It
// waits for a write in progress, so once it returns the Writer no longer
// touches the ResponseWriter and the handler may return. Close does not end
// the response or close the connection. It is idempotent.
func (w *Writer) Close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
	w.stopTimer()
}

// tick runs on the keep-alive timer.
func (w *Writer) tick(gen uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed || gen != w.gen {
		return
	}
	if idle := time.Since(w.lastWrite); idle < w.interval {
		w.timer.Reset(w.interval - idle)
		return
	}
	if w.write(keepAliveComment) == nil {
		w.timer.Reset(w.interval)
	}
}

// write sends p and flushes it; any failure closes the Writer. The caller
// holds w.mu.
func (w *Writer) write(p []byte) error {
	if w.writeTimeout > 0 && w.rc.SetWriteDeadline(time.Now().Add(w.writeTimeout)) == nil {
		defer func() { _ = w.rc.SetWriteDeadline(time.Time{}) }()
	}
	if _, err := w.w.Write(p); err != nil {
		return w.fail(fmt.Errorf("sse: write: %w", err))
	}
	if err := w.rc.Flush(); err != nil {
		return w.fail(fmt.Errorf("sse: flush: %w", err))
	}
	w.lastWrite = time.Now()
	return nil
}

func (w *Writer) fail(err error) error {
	w.closed = true
	w.cause = err
	w.stopTimer()
	return err
}

func (w *Writer) closedErr() error {
	if w.cause != nil {
		return fmt.Errorf("%w: %w", ErrClosed, w.cause)
	}
	return ErrClosed
}

// stopTimer stops the keep-alive timer and invalidates any callback already
// waiting for the lock. The caller holds w.mu.
func (w *Writer) stopTimer() {
	if w.timer != nil {
		w.timer.Stop()
		w.timer = nil
	}
	w.gen++
}

// keepBuf retains buf for reuse unless it grew unusually large.
func (w *Writer) keepBuf(buf []byte) {
	if cap(buf) <= maxKeepBuf {
		w.buf = buf[:0]
	} else {
		w.buf = nil
	}
}
