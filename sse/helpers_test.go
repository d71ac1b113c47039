package sse

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
)

// readAll reads events until the first error and returns both.
func readAll(r *Reader) ([]Event, error) {
	var evs []Event
	for {
		ev, err := r.Next()
		if err != nil {
			return evs, err
		}
		evs = append(evs, ev)
		if len(evs) > 1<<20 {
			return evs, fmt.Errorf("runaway reader")
		}
	}
}

// eventsEqual reports whether a and b are the same events; nil and empty
// Data are considered equal.
func eventsEqual(a, b []Event) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !eventEqual(a[i], b[i]) {
			return false
		}
	}
	return true
}

func eventEqual(a, b Event) bool {
	return a.ID == b.ID && a.HasID == b.HasID && a.Type == b.Type &&
		bytes.Equal(a.Data, b.Data) && a.HasData == b.HasData &&
		a.Retry == b.Retry && a.HasRetry == b.HasRetry
}

func formatEvents(evs []Event) string {
	var sb strings.Builder
	for _, ev := range evs {
		fmt.Fprintf(&sb, "{ID:%q HasID:%v Type:%q Data:%q HasData:%v Retry:%d HasRetry:%v} ",
			ev.ID, ev.HasID, ev.Type, ev.Data, ev.HasData, ev.Retry, ev.HasRetry)
	}
	return sb.String()
}

// splitReader returns its input in chunks ending at the given offsets, one
// chunk per Read call, then the rest.
type splitReader struct {
	data  []byte
	cuts  []int
	count int // bytes returned so far
}

func (s *splitReader) Read(p []byte) (int, error) {
	if len(s.data) == 0 {
		return 0, io.EOF
	}
	n := len(s.data)
	for len(s.cuts) > 0 && s.cuts[0] <= s.count {
		s.cuts = s.cuts[1:]
	}
	if len(s.cuts) > 0 {
		n = min(n, s.cuts[0]-s.count)
	}
	n = copy(p, s.data[:n])
	s.data = s.data[n:]
	s.count += n
	return n, nil
}

// recorder is a ResponseWriter that is safe to inspect while a Writer's
// keep-alive timer writes to it, counts flushes, and can be made to fail.
type recorder struct {
	mu       sync.Mutex
	header   http.Header
	body     bytes.Buffer
	flushes  int
	writes   int
	failAt   int // the failAt-th Write (1-based) and later fail; 0 never
	failWith error
}

func newRecorder() *recorder { return &recorder{header: http.Header{}} }

func (r *recorder) Header() http.Header { return r.header }
func (r *recorder) WriteHeader(int)     {}

func (r *recorder) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.writes++
	if r.failAt > 0 && r.writes >= r.failAt {
		return 0, r.failWith
	}
	return r.body.Write(p)
}

func (r *recorder) Flush() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.flushes++
}

func (r *recorder) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.body.String()
}

func (r *recorder) Flushes() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.flushes
}

// unwrapper hides its inner writer's Flush method and exposes it only
// through Unwrap, like Caddy's response writer wrappers.
type unwrapper struct {
	inner http.ResponseWriter
}

func (u unwrapper) Header() http.Header         { return u.inner.Header() }
func (u unwrapper) WriteHeader(code int)        { u.inner.WriteHeader(code) }
func (u unwrapper) Write(p []byte) (int, error) { return u.inner.Write(p) }
func (u unwrapper) Unwrap() http.ResponseWriter { return u.inner }

// discardWriter is a ResponseWriter that throws output away.
type discardWriter struct{ header http.Header }

func (d *discardWriter) Header() http.Header         { return d.header }
func (d *discardWriter) WriteHeader(int)             {}
func (d *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (d *discardWriter) Flush()                      {}
