package sse

import (
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestWriteEventEncoding(t *testing.T) {
	tests := []struct {
		name string
		ev   Event
		want string
	}{
		{name: "data", ev: Event{Data: []byte("hello"), HasData: true}, want: "data: hello\n\n"},
		{name: "data without HasData", ev: Event{Data: []byte("hello")}, want: "data: hello\n\n"},
		{name: "priming", ev: Event{ID: "7", HasID: true, HasData: true}, want: "id: 7\ndata:\n\n"},
		{name: "empty id", ev: Event{HasID: true}, want: "id:\n\n"},
		{name: "type", ev: Event{Type: "message", Data: []byte("x")}, want: "event: message\ndata: x\n\n"},
		{name: "retry", ev: Event{Retry: 1500, HasRetry: true}, want: "retry: 1500\n\n"},
		{name: "retry zero", ev: Event{HasRetry: true}, want: "retry: 0\n\n"},
		{
			name: "all fields",
			ev:   Event{ID: "1", HasID: true, Type: "t", Retry: 5, HasRetry: true, Data: []byte("d"), HasData: true},
			want: "id: 1\nevent: t\nretry: 5\ndata: d\n\n",
		},
		{name: "multi-line", ev: Event{Data: []byte("a\n\nb")}, want: "data: a\ndata:\ndata: b\n\n"},
		{name: "trailing newline", ev: Event{Data: []byte("a\n")}, want: "data: a\ndata:\n\n"},
		{name: "only newline", ev: Event{Data: []byte("\n")}, want: "data:\ndata:\n\n"},
		{name: "CRLF in data", ev: Event{Data: []byte("a\r\nb")}, want: "data: a\ndata: b\n\n"},
		{name: "lone CR in data", ev: Event{Data: []byte("a\rb\r")}, want: "data: a\ndata: b\ndata:\n\n"},
		{name: "CR CR LF in data", ev: Event{Data: []byte("a\r\r\nb")}, want: "data: a\ndata:\ndata: b\n\n"},
		{name: "leading space kept", ev: Event{ID: " x", HasID: true, Data: []byte(" y")}, want: "id:  x\ndata:  y\n\n"},
		{name: "no fields writes nothing", ev: Event{}, want: ""},
		{name: "id ignored without HasID", ev: Event{ID: "9", Data: []byte("x")}, want: "data: x\n\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := newRecorder()
			w := NewWriter(rec)
			if err := w.WriteEvent(tt.ev); err != nil {
				t.Fatalf("WriteEvent: %v", err)
			}
			if got := rec.String(); got != tt.want {
				t.Errorf("wrote %q, want %q", got, tt.want)
			}
		})
	}
}

func TestWriterRejectsInvalidFields(t *testing.T) {
	tests := []struct {
		name  string
		write func(*Writer) error
	}{
		{"id with LF", func(w *Writer) error { return w.WriteEvent(Event{ID: "a\nb", HasID: true}) }},
		{"id with CR", func(w *Writer) error { return w.WriteEvent(Event{ID: "a\rb", HasID: true}) }},
		{"id with NUL", func(w *Writer) error { return w.WriteEvent(Event{ID: "a\x00b", HasID: true}) }},
		{"type with LF", func(w *Writer) error { return w.WriteEvent(Event{Type: "a\ndata: x", Data: []byte("y")}) }},
		{"type with CR", func(w *Writer) error { return w.WriteEvent(Event{Type: "a\r", Data: []byte("y")}) }},
		{"negative retry", func(w *Writer) error { return w.WriteEvent(Event{Retry: -1, HasRetry: true}) }},
		{"comment with LF", func(w *Writer) error { return w.WriteComment("a\ndata: x") }},
		{"comment with CR", func(w *Writer) error { return w.WriteComment("a\r") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := newRecorder()
			w := NewWriter(rec)
			if err := tt.write(w); !errors.Is(err, ErrInvalidField) {
				t.Fatalf("error = %v, want ErrInvalidField", err)
			}
			if got := rec.String(); got != "" {
				t.Fatalf("wrote %q after rejecting", got)
			}
			// The Writer stays usable.
			if err := w.WriteEvent(Event{Data: []byte("ok")}); err != nil {
				t.Fatalf("write after rejection: %v", err)
			}
		})
	}
}

func TestWriteComment(t *testing.T) {
	for text, want := range map[string]string{"hi": ": hi\n\n", "": ":\n\n", " x": ":  x\n\n"} {
		rec := newRecorder()
		if err := NewWriter(rec).WriteComment(text); err != nil {
			t.Fatal(err)
		}
		if got := rec.String(); got != want {
			t.Errorf("WriteComment(%q) wrote %q, want %q", text, got, want)
		}
	}
}

func TestWriterRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		in   Event
		want Event // in, unless set
	}{
		{name: "data", in: Event{Data: []byte("hello"), HasData: true}},
		{name: "priming", in: Event{ID: "7", HasID: true, HasData: true}},
		{name: "empty id", in: Event{HasID: true}},
		{name: "type only", in: Event{Type: "ping"}},
		{name: "retry only", in: Event{Retry: 42, HasRetry: true}},
		{name: "max retry", in: Event{Retry: math.MaxInt, HasRetry: true}},
		{name: "embedded newlines", in: Event{Data: []byte("a\n\nb\n"), HasData: true}},
		{name: "leading spaces", in: Event{ID: "  i", HasID: true, Type: " t", Data: []byte(" d\n  e"), HasData: true}},
		{name: "colons", in: Event{ID: "a:b", HasID: true, Data: []byte(":x: y"), HasData: true}},
		{name: "NUL in data and type", in: Event{Type: "t\x00", Data: []byte("\x00"), HasData: true}},
		{name: "JSON", in: Event{ID: "abc-1", HasID: true, Type: "message",
			Data: []byte(`{"jsonrpc":"2.0","id":1,"result":{"text":"line1\nline2"}}`), HasData: true}},
		{
			name: "CR normalized to LF",
			in:   Event{Data: []byte("a\rb\r\nc\r"), HasData: true},
			want: Event{Data: []byte("a\nb\nc\n"), HasData: true},
		},
		{
			name: "data implies HasData",
			in:   Event{Data: []byte("x")},
			want: Event{Data: []byte("x"), HasData: true},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := tt.want
			if want.ID == "" && !want.HasID && want.Type == "" && want.Data == nil && !want.HasData && !want.HasRetry {
				want = tt.in
			}
			rec := newRecorder()
			w := NewWriter(rec)
			// Write it twice, with a comment in between, to check framing.
			for range 2 {
				if err := w.WriteEvent(tt.in); err != nil {
					t.Fatal(err)
				}
				if err := w.WriteComment("between"); err != nil {
					t.Fatal(err)
				}
			}
			got, err := readAll(NewReader(strings.NewReader(rec.String()), 0))
			if err != io.EOF {
				t.Fatalf("read error = %v, want io.EOF", err)
			}
			if wantEvs := []Event{want, want}; !eventsEqual(got, wantEvs) {
				t.Fatalf("round trip of %q\n got %s\nwant %s", rec.String(), formatEvents(got), formatEvents(wantEvs))
			}
		})
	}
}

func TestWriterFlushesEachWrite(t *testing.T) {
	rec := newRecorder()
	w := NewWriter(rec)
	for i := 1; i <= 3; i++ {
		if err := w.WriteEvent(Event{Data: []byte(fmt.Sprint(i))}); err != nil {
			t.Fatal(err)
		}
		if got := rec.Flushes(); got != i {
			t.Fatalf("after event %d: %d flushes, want %d", i, got, i)
		}
	}
	if err := w.WriteComment("c"); err != nil {
		t.Fatal(err)
	}
	if got := rec.Flushes(); got != 4 {
		t.Fatalf("after comment: %d flushes, want 4", got)
	}
	if err := w.WriteEvent(Event{}); err != nil {
		t.Fatal(err)
	}
	if got := rec.Flushes(); got != 4 {
		t.Fatalf("an empty event flushed: %d flushes, want 4", got)
	}
}

// Flushing must work through a wrapper that exposes the real writer only via
// Unwrap, as Caddy's wrappers do.
func TestWriterFlushesThroughUnwrap(t *testing.T) {
	rec := httptest.NewRecorder()
	w := NewWriter(unwrapper{rec})
	if err := w.WriteEvent(Event{Data: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	if !rec.Flushed {
		t.Fatal("response was not flushed")
	}
	if got := rec.Body.String(); got != "data: x\n\n" {
		t.Fatalf("body = %q", got)
	}
}

// unflushable has no Flush method and no Unwrap.
type unflushable struct{ rec *recorder }

func (u unflushable) Header() http.Header         { return u.rec.Header() }
func (u unflushable) WriteHeader(code int)        {}
func (u unflushable) Write(p []byte) (int, error) { return u.rec.Write(p) }

func TestWriterFlushUnsupportedCloses(t *testing.T) {
	w := NewWriter(unflushable{newRecorder()})
	err := w.WriteEvent(Event{Data: []byte("x")})
	if !errors.Is(err, http.ErrNotSupported) {
		t.Fatalf("error = %v, want http.ErrNotSupported", err)
	}
	if err := w.WriteEvent(Event{Data: []byte("x")}); !errors.Is(err, ErrClosed) || !errors.Is(err, http.ErrNotSupported) {
		t.Fatalf("second write error = %v, want ErrClosed wrapping ErrNotSupported", err)
	}
}

func TestWriterWriteErrorCloses(t *testing.T) {
	boom := errors.New("client gone")
	rec := newRecorder()
	rec.failAt, rec.failWith = 2, boom
	w := NewWriter(rec)
	w.KeepAlive(time.Hour)
	if err := w.WriteEvent(Event{Data: []byte("1")}); err != nil {
		t.Fatalf("first write: %v", err)
	}
	err := w.WriteEvent(Event{Data: []byte("2")})
	if !errors.Is(err, boom) || errors.Is(err, ErrClosed) {
		t.Fatalf("failing write error = %v, want the write error itself", err)
	}
	for _, write := range []func() error{
		func() error { return w.WriteEvent(Event{Data: []byte("3")}) },
		func() error { return w.WriteComment("c") },
	} {
		if err := write(); !errors.Is(err, ErrClosed) || !errors.Is(err, boom) {
			t.Fatalf("later write error = %v, want ErrClosed wrapping the cause", err)
		}
	}
	rec.mu.Lock()
	writes := rec.writes
	rec.mu.Unlock()
	if writes != 2 {
		t.Fatalf("%d writes reached the ResponseWriter, want 2", writes)
	}
	w.mu.Lock()
	timer := w.timer
	w.mu.Unlock()
	if timer != nil {
		t.Fatal("keep-alive timer still set after a write error")
	}
}

func TestWriterClose(t *testing.T) {
	rec := newRecorder()
	w := NewWriter(rec)
	w.Close()
	w.Close() // idempotent
	if err := w.WriteEvent(Event{Data: []byte("x")}); err != ErrClosed {
		t.Fatalf("WriteEvent after Close = %v, want ErrClosed", err)
	}
	if err := w.WriteComment("x"); err != ErrClosed {
		t.Fatalf("WriteComment after Close = %v, want ErrClosed", err)
	}
	w.KeepAlive(time.Millisecond) // no effect after Close
	time.Sleep(20 * time.Millisecond)
	if got := rec.String(); got != "" {
		t.Fatalf("wrote %q after Close", got)
	}
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func TestKeepAlive(t *testing.T) {
	rec := newRecorder()
	w := NewWriter(rec)
	defer w.Close()
	w.KeepAlive(20 * time.Millisecond)
	waitFor(t, 5*time.Second, "two keep-alives", func() bool {
		return strings.Count(rec.String(), ": keep-alive\n\n") >= 2
	})
	if body := rec.String(); strings.ReplaceAll(body, ": keep-alive\n\n", "") != "" {
		t.Fatalf("unexpected output %q", body)
	}
	if rec.Flushes() < 2 {
		t.Fatal("keep-alives were not flushed")
	}
	// Keep-alives are comments: a Reader sees no events.
	if evs, err := readAll(NewReader(strings.NewReader(rec.String()), 0)); len(evs) != 0 || err != io.EOF {
		t.Fatalf("Reader saw %d events, error %v", len(evs), err)
	}
}

// Writes keep the stream from being idle, so no keep-alive is needed.
func TestKeepAliveResetByWrites(t *testing.T) {
	const interval = 250 * time.Millisecond
	rec := newRecorder()
	w := NewWriter(rec)
	defer w.Close()
	w.KeepAlive(interval)
	last := time.Now()
	for end := last.Add(3 * interval); time.Now().Before(end); {
		time.Sleep(5 * time.Millisecond)
		if err := w.WriteEvent(Event{Data: []byte("x")}); err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		if gap := now.Sub(last); gap > interval/2 {
			t.Skipf("test goroutine was descheduled for %v; result would be meaningless", gap)
		}
		last = now
	}
	if strings.Contains(rec.String(), "keep-alive") {
		t.Fatal("keep-alive written although the stream was never idle")
	}
}

func TestKeepAliveDisable(t *testing.T) {
	rec := newRecorder()
	w := NewWriter(rec)
	defer w.Close()
	w.KeepAlive(10 * time.Millisecond)
	w.KeepAlive(0)
	time.Sleep(60 * time.Millisecond)
	if got := rec.String(); got != "" {
		t.Fatalf("wrote %q after keep-alives were disabled", got)
	}
}

func TestCloseStopsKeepAlive(t *testing.T) {
	rec := newRecorder()
	w := NewWriter(rec)
	w.KeepAlive(10 * time.Millisecond)
	waitFor(t, 5*time.Second, "a keep-alive", func() bool { return strings.Contains(rec.String(), "keep-alive") })
	w.Close()
	// Close waits for a keep-alive in progress, so the output is final now.
	before := rec.String()
	time.Sleep(60 * time.Millisecond)
	if after := rec.String(); after != before {
		t.Fatalf("output grew after Close: %q -> %q", before, after)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.timer != nil {
		t.Fatal("timer still set after Close")
	}
}

func TestKeepAliveWriteErrorCloses(t *testing.T) {
	boom := errors.New("client gone")
	rec := newRecorder()
	rec.failAt, rec.failWith = 1, boom
	w := NewWriter(rec)
	w.KeepAlive(5 * time.Millisecond)
	waitFor(t, 5*time.Second, "a keep-alive attempt", func() bool {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		return rec.writes > 0
	})
	if err := w.WriteEvent(Event{Data: []byte("x")}); !errors.Is(err, ErrClosed) || !errors.Is(err, boom) {
		t.Fatalf("error = %v, want ErrClosed wrapping the keep-alive failure", err)
	}
	time.Sleep(30 * time.Millisecond)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if rec.writes != 1 {
		t.Fatalf("%d write attempts, want 1: the timer kept running", rec.writes)
	}
}

func TestWriterConcurrent(t *testing.T) {
	const writers, perWriter = 8, 200
	rec := newRecorder()
	w := NewWriter(rec)
	w.KeepAlive(time.Microsecond)
	var wg sync.WaitGroup
	for g := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWriter {
				id := fmt.Sprintf("%d-%d", g, i)
				ev := Event{ID: id, HasID: true, Type: "message",
					Data: []byte(strings.Repeat(id+"\n", 1+i%5)), HasData: true}
				if err := w.WriteEvent(ev); err != nil {
					t.Error(err)
					return
				}
				if i%10 == 0 {
					if err := w.WriteComment(id); err != nil {
						t.Error(err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	w.Close()

	evs, err := readAll(NewReader(strings.NewReader(rec.String()), 0))
	if err != io.EOF {
		t.Fatalf("read error = %v", err)
	}
	if len(evs) != writers*perWriter {
		t.Fatalf("got %d events, want %d", len(evs), writers*perWriter)
	}
	seen := map[string]bool{}
	for _, ev := range evs {
		var g, i int
		if _, err := fmt.Sscanf(ev.ID, "%d-%d", &g, &i); err != nil || seen[ev.ID] {
			t.Fatalf("bad or duplicate id %q", ev.ID)
		}
		seen[ev.ID] = true
		if want := strings.Repeat(ev.ID+"\n", 1+i%5); string(ev.Data) != want {
			t.Fatalf("event %s data %q, want %q", ev.ID, ev.Data, want)
		}
	}
}

func TestSetHeaders(t *testing.T) {
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	SetHeaders(h)
	for k, v := range map[string]string{
		"Content-Type":      "text/event-stream",
		"Cache-Control":     "no-cache",
		"X-Accel-Buffering": "no",
	} {
		if got := h.Values(k); len(got) != 1 || got[0] != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
}

// TestWriteTimeout: on a client that stops reading, a write fails once it
// has blocked for the timeout, and the Writer is closed.
func TestWriteTimeout(t *testing.T) {
	failed := make(chan error, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) {
		SetHeaders(rw.Header())
		w := NewWriter(rw)
		w.WriteTimeout(200 * time.Millisecond)
		big := []byte(strings.Repeat("x", 64<<10))
		for {
			if err := w.WriteEvent(Event{Data: big}); err != nil {
				// The Writer is closed from then on.
				failed <- w.WriteComment("after")
				return
			}
		}
	}))
	defer srv.Close()
	resp, err := http.Get(srv.URL) // never read
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	select {
	case err := <-failed:
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("write after the timeout: %v, want ErrClosed", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("a write to a client that does not read still blocks after 20s")
	}
}
