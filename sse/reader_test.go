package sse

import (
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

func TestReader(t *testing.T) {
	big := strings.Repeat("x", 100)
	tests := []struct {
		name    string
		in      string
		max     int
		want    []Event
		wantErr error
	}{
		{name: "empty stream", in: "", wantErr: io.EOF},
		{name: "LF", in: "data: a\n\n", want: []Event{{Data: []byte("a"), HasData: true}}},
		{name: "CRLF", in: "data: a\r\n\r\n", want: []Event{{Data: []byte("a"), HasData: true}}},
		{name: "CR", in: "data: a\r\r", want: []Event{{Data: []byte("a"), HasData: true}}},
		{
			name: "mixed endings",
			in:   "data: a\r\ndata: b\rdata: c\n\r\n",
			want: []Event{{Data: []byte("a\nb\nc"), HasData: true}},
		},
		{
			name: "CR CRLF is two line ends",
			in:   "data: a\r\r\ndata: b\n\n",
			want: []Event{{Data: []byte("a"), HasData: true}, {Data: []byte("b"), HasData: true}},
		},
		{
			name: "LF CR is two line ends",
			in:   "data: a\n\rdata: b\r\n\n",
			want: []Event{{Data: []byte("a"), HasData: true}, {Data: []byte("b"), HasData: true}},
		},
		{name: "BOM skipped", in: "\xEF\xBB\xBFdata: a\n\n", want: []Event{{Data: []byte("a"), HasData: true}}},
		{name: "BOM before blank line", in: "\xEF\xBB\xBF\nid: 1\n\n", want: []Event{{ID: "1", HasID: true}}},
		{name: "only one BOM skipped", in: "\xEF\xBB\xBF\xEF\xBB\xBFdata: a\n\n", wantErr: io.EOF},
		{name: "partial BOM is content", in: "\xEF\xBBdata: a\n\n", wantErr: io.EOF},
		{name: "partial BOM at EOF", in: "\xEF\xBB", wantErr: io.ErrUnexpectedEOF},
		{
			name: "BOM not skipped mid-stream",
			in:   "data: a\n\n\xEF\xBB\xBFdata: b\n\n",
			want: []Event{{Data: []byte("a"), HasData: true}},
		},
		{name: "comment-only block", in: ": hello\n\n:\n\n", wantErr: io.EOF},
		{
			name: "comments inside a block",
			in:   ": c1\ndata: a\n: c2\ndata: b\n:c3\n\n",
			want: []Event{{Data: []byte("a\nb"), HasData: true}},
		},
		{name: "data without colon", in: "data\n\n", want: []Event{{HasData: true}}},
		{name: "two data without colon", in: "data\ndata\n\n", want: []Event{{Data: []byte("\n"), HasData: true}}},
		{name: "event without colon", in: "event\ndata: x\n\n", want: []Event{{Data: []byte("x"), HasData: true}}},
		{name: "id without colon", in: "id\n\n", want: []Event{{HasID: true}}},
		{name: "no space after colon", in: "data:a\n\n", want: []Event{{Data: []byte("a"), HasData: true}}},
		{name: "only one space stripped", in: "data:  a \n\n", want: []Event{{Data: []byte(" a "), HasData: true}}},
		{name: "tab not stripped", in: "data:\ta\n\n", want: []Event{{Data: []byte("\ta"), HasData: true}}},
		{
			name: "space stripped in every field",
			in:   "id:  1\nevent:  t\nretry: 5\n\n",
			want: []Event{{ID: " 1", HasID: true, Type: " t", Retry: 5, HasRetry: true}},
		},
		{name: "value with colons", in: "data: a:b: c\n\n", want: []Event{{Data: []byte("a:b: c"), HasData: true}}},
		{
			name: "multi-line data",
			in:   "data: a\ndata:\ndata: b\ndata\n\n",
			want: []Event{{Data: []byte("a\n\nb\n"), HasData: true}},
		},
		{
			name: "full event",
			in:   "id: 7\nevent: message\nretry: 1500\ndata: {\"jsonrpc\":\"2.0\"}\n\n",
			want: []Event{{ID: "7", HasID: true, Type: "message", Retry: 1500, HasRetry: true,
				Data: []byte(`{"jsonrpc":"2.0"}`), HasData: true}},
		},
		{
			name: "last id and event win",
			in:   "id: 1\nid: 2\nevent: a\nevent: b\ndata: x\n\n",
			want: []Event{{ID: "2", HasID: true, Type: "b", Data: []byte("x"), HasData: true}},
		},
		{
			name: "ids are not inherited",
			in:   "id: 1\ndata: a\n\ndata: b\n\n",
			want: []Event{{ID: "1", HasID: true, Data: []byte("a"), HasData: true}, {Data: []byte("b"), HasData: true}},
		},
		{name: "id with NUL ignored", in: "id: a\x00b\ndata: x\n\n", want: []Event{{Data: []byte("x"), HasData: true}}},
		{name: "id with NUL keeps earlier id", in: "id: 1\nid: \x00\n\n", want: []Event{{ID: "1", HasID: true}}},
		{name: "block with only a NUL id", in: "id: \x00\n\n", wantErr: io.EOF},
		{name: "NUL allowed in data", in: "data: a\x00b\n\n", want: []Event{{Data: []byte("a\x00b"), HasData: true}}},
		{name: "id-only block", in: "id: 42\n\n", want: []Event{{ID: "42", HasID: true}}},
		{name: "empty id resets", in: "id:\n\n", want: []Event{{HasID: true}}},
		{name: "MCP priming event", in: "id: 7\ndata:\n\n", want: []Event{{ID: "7", HasID: true, HasData: true}}},
		{name: "retry-only block", in: "retry: 3000\n\n", want: []Event{{Retry: 3000, HasRetry: true}}},
		{name: "event-only block", in: "event: ping\n\n", want: []Event{{Type: "ping"}}},
		{name: "retry leading zeros", in: "retry: 007\n\n", want: []Event{{Retry: 7, HasRetry: true}}},
		{name: "retry zero", in: "retry: 0\n\n", want: []Event{{HasRetry: true}}},
		{
			name: "retry saturates",
			in:   "retry: 99999999999999999999999\n\n",
			want: []Event{{Retry: math.MaxInt, HasRetry: true}},
		},
		{name: "retry with letters ignored", in: "retry: 10a\n\n", wantErr: io.EOF},
		{name: "retry negative ignored", in: "retry: -5\n\n", wantErr: io.EOF},
		{name: "retry empty ignored", in: "retry:\n\n", wantErr: io.EOF},
		{name: "retry with space ignored", in: "retry: 1 0\n\n", wantErr: io.EOF},
		{
			name: "ignored retry keeps earlier",
			in:   "retry: 10\nretry: x\n\n",
			want: []Event{{Retry: 10, HasRetry: true}},
		},
		{name: "unknown fields only", in: "foo: bar\nDATA: x\n\n", wantErr: io.EOF},
		{name: "field names are case-sensitive", in: "Data: x\nID: 1\n\n", wantErr: io.EOF},
		{name: "blank lines between events", in: "\n\n\ndata: a\n\n\n\n", want: []Event{{Data: []byte("a"), HasData: true}}},
		{
			name:    "unterminated block after line end",
			in:      "data: a\n\ndata: b\n",
			want:    []Event{{Data: []byte("a"), HasData: true}},
			wantErr: io.ErrUnexpectedEOF,
		},
		{
			name:    "unterminated line",
			in:      "data: a\n\ndata: b",
			want:    []Event{{Data: []byte("a"), HasData: true}},
			wantErr: io.ErrUnexpectedEOF,
		},
		{name: "unterminated unknown field", in: "foo\n", wantErr: io.ErrUnexpectedEOF},
		{name: "unterminated id-only", in: "id: 1\n", wantErr: io.ErrUnexpectedEOF},
		{name: "trailing comment line", in: "data: a\n\n: bye\n", want: []Event{{Data: []byte("a"), HasData: true}}},
		{name: "trailing unterminated comment", in: "data: a\n\n: bye", want: []Event{{Data: []byte("a"), HasData: true}}},
		{name: "line at limit", in: "data:0123\n\n", max: 9, want: []Event{{Data: []byte("0123"), HasData: true}}},
		{name: "line over limit", in: "data:01234\n\n", max: 9, wantErr: ErrEventTooLarge},
		{name: "comment line over limit", in: ": " + big + "\n\n", max: 10, wantErr: ErrEventTooLarge},
		{name: "unterminated line over limit", in: "data: " + big, max: 10, wantErr: ErrEventTooLarge},
		{
			name:    "events before the limit are returned",
			in:      "data: a\n\ndata: " + big + "\n\n",
			max:     10,
			want:    []Event{{Data: []byte("a"), HasData: true}},
			wantErr: ErrEventTooLarge,
		},
		{
			name: "data at event limit",
			in:   "data:01234\ndata:5678\n\n",
			max:  10,
			want: []Event{{Data: []byte("01234\n5678"), HasData: true}},
		},
		{name: "data over event limit", in: "data:01234\ndata:56789\n\n", max: 10, wantErr: ErrEventTooLarge},
		{name: "many empty data lines", in: strings.Repeat("data\n", 20) + "\n", max: 10, wantErr: ErrEventTooLarge},
		{name: "id and type over event limit", in: "id: 12345\nevent: 123456\n\n", max: 10, wantErr: ErrEventTooLarge},
		{
			name: "repeated ids do not accumulate",
			in:   strings.Repeat("id: 12345\n", 50) + "\n",
			max:  10,
			want: []Event{{ID: "12345", HasID: true}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantErr := tt.wantErr
			if wantErr == nil {
				wantErr = io.EOF
			}
			for name, src := range sources(tt.in) {
				got, err := readAll(NewReader(src, tt.max))
				if !errors.Is(err, wantErr) {
					t.Errorf("%s: error = %v, want %v", name, err, wantErr)
				}
				if !eventsEqual(got, tt.want) {
					t.Errorf("%s: events\n got %s\nwant %s", name, formatEvents(got), formatEvents(tt.want))
				}
			}
		})
	}
}

// sources returns readers that deliver in in different chunkings: whole,
// one byte at a time, data together with io.EOF, and split in two at every
// possible offset.
func sources(in string) map[string]io.Reader {
	m := map[string]io.Reader{
		"whole":   strings.NewReader(in),
		"onebyte": iotest.OneByteReader(strings.NewReader(in)),
		"dataerr": iotest.DataErrReader(strings.NewReader(in)),
		"half":    iotest.HalfReader(strings.NewReader(in)),
	}
	for i := 1; i < len(in); i++ {
		m[fmt.Sprintf("split@%d", i)] = &splitReader{data: []byte(in), cuts: []int{i}}
	}
	return m
}

func TestReaderCRSplitAcrossReads(t *testing.T) {
	tests := []struct {
		name   string
		chunks []string
		want   []Event
	}{
		{
			name:   "CR then LF in next read is one line end",
			chunks: []string{"data: a\r", "\ndata: b\r", "\n\r", "\n"},
			want:   []Event{{Data: []byte("a\nb"), HasData: true}},
		},
		{
			name:   "CR then other byte in next read",
			chunks: []string{"data: a\r", "data: b\r", "\r"},
			want:   []Event{{Data: []byte("a\nb"), HasData: true}},
		},
		{
			name:   "CR CR split",
			chunks: []string{"data: a\r", "\r", "\ndata: b\n\n"},
			want:   []Event{{Data: []byte("a"), HasData: true}, {Data: []byte("b"), HasData: true}},
		},
		{
			name:   "empty reads between CR and LF",
			chunks: []string{"data: a\r", "", "", "\n\r", "", "\n"},
			want:   []Event{{Data: []byte("a"), HasData: true}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := &chunkReader{chunks: tt.chunks}
			got, err := readAll(NewReader(src, 0))
			if err != io.EOF {
				t.Errorf("error = %v, want io.EOF", err)
			}
			if !eventsEqual(got, tt.want) {
				t.Errorf("events\n got %s\nwant %s", formatEvents(got), formatEvents(tt.want))
			}
		})
	}
}

// chunkReader returns exactly one chunk per Read call.
type chunkReader struct{ chunks []string }

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(c.chunks) == 0 {
		return 0, io.EOF
	}
	n := copy(p, c.chunks[0])
	c.chunks[0] = c.chunks[0][n:]
	if c.chunks[0] == "" {
		c.chunks = c.chunks[1:]
	}
	return n, nil
}

// A CR at the end of the available input ends the line at once: Next must
// not wait for the next byte to see whether it is an LF.
func TestReaderCRDoesNotWaitForLF(t *testing.T) {
	pr, pw := io.Pipe()
	defer pr.Close()
	r := NewReader(pr, 0)
	go pw.Write([]byte("data: a\r\r"))
	ev, err := nextWithin(t, r, 5*time.Second)
	if err != nil || string(ev.Data) != "a" {
		t.Fatalf("Next = %q, %v; want \"a\", nil", ev.Data, err)
	}
	go func() {
		pw.Write([]byte("\ndata: b\n\n"))
		pw.Close()
	}()
	ev, err = nextWithin(t, r, 5*time.Second)
	if err != nil || string(ev.Data) != "b" {
		t.Fatalf("Next = %q, %v; want \"b\", nil", ev.Data, err)
	}
	if _, err := nextWithin(t, r, 5*time.Second); err != io.EOF {
		t.Fatalf("Next error = %v, want io.EOF", err)
	}
}

func nextWithin(t *testing.T, r *Reader, d time.Duration) (Event, error) {
	t.Helper()
	type result struct {
		ev  Event
		err error
	}
	ch := make(chan result, 1)
	go func() {
		ev, err := r.Next()
		ch <- result{ev, err}
	}()
	select {
	case res := <-ch:
		return res.ev, res.err
	case <-time.After(d):
		t.Fatal("Next blocked")
		return Event{}, nil
	}
}

func TestReaderReadError(t *testing.T) {
	boom := errors.New("boom")
	src := io.MultiReader(strings.NewReader("data: a\n\ndata: b"), iotest.ErrReader(boom))
	r := NewReader(src, 0)
	got, err := readAll(r)
	if !errors.Is(err, boom) {
		t.Fatalf("error = %v, want %v", err, boom)
	}
	if want := []Event{{Data: []byte("a"), HasData: true}}; !eventsEqual(got, want) {
		t.Fatalf("events = %s, want %s", formatEvents(got), formatEvents(want))
	}
	if _, err := r.Next(); !errors.Is(err, boom) {
		t.Fatalf("error is not sticky: %v", err)
	}
}

func TestReaderStickyTooLarge(t *testing.T) {
	r := NewReader(strings.NewReader("data: 0123456789\n\ndata: a\n\n"), 5)
	for i := range 3 {
		if _, err := r.Next(); !errors.Is(err, ErrEventTooLarge) {
			t.Fatalf("call %d: error = %v, want ErrEventTooLarge", i, err)
		}
	}
}

func TestReaderNoProgress(t *testing.T) {
	r := NewReader(zeroReader{}, 0)
	if _, err := r.Next(); !errors.Is(err, io.ErrNoProgress) {
		t.Fatalf("error = %v, want io.ErrNoProgress", err)
	}
}

type zeroReader struct{}

func (zeroReader) Read([]byte) (int, error) { return 0, nil }

// Data returned by Next must stay valid after later calls.
func TestReaderDataNotAliased(t *testing.T) {
	r := NewReader(strings.NewReader("data: first\n\ndata: second\n\n"), 0)
	a, err := r.Next()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	if string(a.Data) != "first" {
		t.Fatalf("first event's data changed to %q", a.Data)
	}
}

func TestReaderManyEvents(t *testing.T) {
	endings := []string{"\n", "\r\n", "\r"}
	var in strings.Builder
	var want []Event
	for i := range 5000 {
		eol := endings[i%len(endings)]
		ev := Event{ID: fmt.Sprint(i), HasID: true, HasData: true,
			Data: []byte(fmt.Sprintf(`{"n":%d}`, i) + strings.Repeat("y", i%300))}
		if i%7 == 0 {
			ev.Type = "message"
		}
		in.WriteString("id: " + ev.ID + eol)
		if ev.Type != "" {
			in.WriteString("event: " + ev.Type + eol)
		}
		in.WriteString("data: " + string(ev.Data) + eol)
		if i%5 == 0 {
			in.WriteString(": keep-alive" + eol + eol)
		}
		in.WriteString(eol)
		want = append(want, ev)
	}
	for name, src := range map[string]io.Reader{
		"whole":   strings.NewReader(in.String()),
		"onebyte": iotest.OneByteReader(strings.NewReader(in.String())),
		"half":    iotest.HalfReader(strings.NewReader(in.String())),
		"split":   &splitReader{data: []byte(in.String()), cuts: primes(len(in.String()))},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := readAll(NewReader(src, 0))
			if err != io.EOF {
				t.Fatalf("error = %v, want io.EOF", err)
			}
			if len(got) != len(want) {
				t.Fatalf("got %d events, want %d", len(got), len(want))
			}
			for i := range got {
				if !eventEqual(got[i], want[i]) {
					t.Fatalf("event %d = %s, want %s", i, formatEvents(got[i:i+1]), formatEvents(want[i:i+1]))
				}
			}
		})
	}
}

// primes returns increasing cut offsets with irregular gaps below n.
func primes(n int) []int {
	var cuts []int
	for off, step := 0, 1; off < n; step = step*7%1013 + 1 {
		off += step
		cuts = append(cuts, off)
	}
	return cuts
}

// A large event makes the buffers grow; afterwards the Reader keeps working
// and returns to small buffers.
func TestReaderLargeEventThenSmall(t *testing.T) {
	large := strings.Repeat("z", 1<<20)
	in := "data: " + large + "\n\ndata: small\n\n"
	r := NewReader(iotest.HalfReader(strings.NewReader(in)), 2<<20)
	got, err := readAll(r)
	if err != io.EOF {
		t.Fatalf("error = %v", err)
	}
	if len(got) != 2 || string(got[0].Data) != large || string(got[1].Data) != "small" {
		t.Fatalf("unexpected events (count %d)", len(got))
	}
}

// TestReaderLongLineInTinyReads: a line arriving a byte at a time is
// scanned once, not once per read (which took a hostile upstream's 15 MiB
// event several seconds of CPU in 4 KiB reads, and would take hours in
// single bytes); the event comes out whole.
func TestReaderLongLineInTinyReads(t *testing.T) {
	payload := strings.Repeat("[", 1<<20)
	r := NewReader(iotest.OneByteReader(strings.NewReader("data: "+payload+"\r\n\r\n")), 2<<20)
	ev, err := r.Next()
	if err != nil || string(ev.Data) != payload {
		t.Fatalf("got %d bytes, %v; want the %d-byte line", len(ev.Data), err, len(payload))
	}
}

func BenchmarkReaderLongLine(b *testing.B) {
	stream := "data: " + strings.Repeat("[", 4<<20) + "\n\n"
	b.SetBytes(int64(len(stream)))
	for b.Loop() {
		r := NewReader(iotest.HalfReader(strings.NewReader(stream)), 8<<20)
		if _, err := r.Next(); err != nil {
			b.Fatal(err)
		}
	}
}
