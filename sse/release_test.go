package sse

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// Release between events: every event still arrives whole, the large one
// (which grows the buffer, so that Release keeps it) included, and a
// Release while input is buffered keeps that input.
func TestReleaseBetweenEvents(t *testing.T) {
	big := strings.Repeat("y", 5000)
	in := "id: 1\ndata: a\n\n" + "data: " + big + "\n\n" + ": c\ndata: b\r" + "\rdata: c\n\n"
	// One byte per read: Release runs in every state the reader can be in
	// between two events.
	r := NewReader(iotest.OneByteReader(strings.NewReader(in)), 0)
	var got []Event
	for {
		r.Release()
		ev, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ev)
	}
	want := []Event{
		{ID: "1", HasID: true, Data: []byte("a"), HasData: true},
		{Data: []byte(big), HasData: true},
		{Data: []byte("b"), HasData: true},
		{Data: []byte("c"), HasData: true},
	}
	if !eventsEqual(got, want) {
		t.Fatalf("got %s, want %s", formatEvents(got), formatEvents(want))
	}
	r.Release() // after the end: nothing to lend, no panic
}

// Two events in one read: Release after the first keeps the second.
func TestReleaseKeepsBufferedInput(t *testing.T) {
	r := NewReader(bytes.NewReader([]byte("data: a\n\ndata: b\n\n")), 0)
	if ev, err := r.Next(); err != nil || string(ev.Data) != "a" {
		t.Fatalf("first: %v %q", err, ev.Data)
	}
	if r.Idle() {
		t.Fatal("Idle with an event buffered")
	}
	r.Release()
	if ev, err := r.Next(); err != nil || string(ev.Data) != "b" {
		t.Fatalf("second: %v %q", err, ev.Data)
	}
}

// With YieldWhen, Next returns ErrWouldBlock where it would read, keeps
// the partial event, and completes it on a later call.
func TestYieldWhen(t *testing.T) {
	src := &stepReader{}
	r := NewReader(src, 0)
	r.YieldWhen(func() bool { return len(src.next) == 0 })
	for _, step := range []string{": comment\n\ndata: a", "bc\n", "\n"} {
		if _, err := r.Next(); err != ErrWouldBlock {
			t.Fatalf("before %q: %v, want ErrWouldBlock", step, err)
		}
		src.next = []byte(step)
	}
	ev, err := r.Next()
	if err != nil || string(ev.Data) != "abc" {
		t.Fatalf("got %q, %v", ev.Data, err)
	}
}

// stepReader returns next once, then nothing until next is set again.
type stepReader struct{ next []byte }

func (s *stepReader) Read(p []byte) (int, error) {
	n := copy(p, s.next)
	s.next = s.next[n:]
	return n, nil
}
