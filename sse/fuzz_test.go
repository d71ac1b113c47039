package sse

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// FuzzReader checks, for arbitrary input and size limits, that the Reader
// never panics, returns only the documented errors, respects the limit, does
// not depend on how the input is split into reads, and that everything it
// returns survives a Writer/Reader round trip unchanged.
func FuzzReader(f *testing.F) {
	seeds := []string{
		"",
		"data: hello\n\n",
		"id: 1\nevent: message\ndata: {\"jsonrpc\":\"2.0\"}\n\n",
		"id: 7\ndata:\n\n",
		"retry: 3000\n\n",
		"event: ping\n\n",
		"id\n\n",
		"data\ndata\n\n",
		": keep-alive\n\n",
		"\xEF\xBB\xBFdata: bom\r\n\r\n",
		"data: a\rdata: b\r\r",
		"data: a\r\r\ndata: b\n\r",
		"data:  two spaces\n\n",
		"id: a\x00b\ndata: x\n\n",
		"retry: 10a\n\nretry: 99999999999999999999999\n\n",
		"data: unterminated",
		"data: a\n\ndata: b\n",
		"foo: bar\nDATA: x\n\n",
		"event: \x00\nid: \xff\ndata: \xfe\n\n",
		strings.Repeat("data: 0123456789\n", 40) + "\n",
	}
	for i, s := range seeds {
		f.Add([]byte(s), uint16(i*97))
	}
	f.Fuzz(func(t *testing.T, in []byte, limit uint16) {
		max := 1 + int(limit)%2048

		evs, err := readAll(NewReader(bytes.NewReader(in), max))
		if err != io.EOF && err != io.ErrUnexpectedEOF && !errors.Is(err, ErrEventTooLarge) {
			t.Fatalf("unexpected error %v", err)
		}
		for i, ev := range evs {
			if size := len(ev.ID) + len(ev.Type) + len(ev.Data); size > max {
				t.Fatalf("event %d has size %d over limit %d", i, size, max)
			}
			if !ev.HasID && !ev.HasData && !ev.HasRetry && ev.Type == "" {
				t.Fatalf("event %d is empty", i)
			}
			if strings.ContainsAny(ev.ID, "\r\n\x00") || strings.ContainsAny(ev.Type, "\r\n") ||
				bytes.IndexByte(ev.Data, '\r') >= 0 || (ev.Retry < 0) || (!ev.HasData && ev.Data != nil) {
				t.Fatalf("event %d is malformed: %s", i, formatEvents(evs[i:i+1]))
			}
		}

		// The result must not depend on read boundaries.
		for name, src := range map[string]io.Reader{
			"onebyte": iotest.OneByteReader(bytes.NewReader(in)),
			"half":    iotest.HalfReader(bytes.NewReader(in)),
		} {
			evs2, err2 := readAll(NewReader(src, max))
			if !sameError(err, err2) || !eventsEqual(evs, evs2) {
				t.Fatalf("%s reads differ:\n got %s, %v\nwant %s, %v", name, formatEvents(evs2), err2, formatEvents(evs), err)
			}
		}

		// Round trip through the Writer.
		rec := newRecorder()
		w := NewWriter(rec)
		for _, ev := range evs {
			if err := w.WriteEvent(ev); err != nil {
				t.Fatalf("WriteEvent(%s): %v", formatEvents([]Event{ev}), err)
			}
		}
		back, err := readAll(NewReader(strings.NewReader(rec.String()), 0))
		if err != io.EOF {
			t.Fatalf("re-read error %v", err)
		}
		if !eventsEqual(evs, back) {
			t.Fatalf("round trip differs:\n got %s\nwant %s", formatEvents(back), formatEvents(evs))
		}
	})
}

func sameError(a, b error) bool {
	return a == b || (errors.Is(a, ErrEventTooLarge) && errors.Is(b, ErrEventTooLarge))
}

// FuzzWriter checks that any event the Writer accepts reads back unchanged,
// apart from CR line breaks in data becoming LF, and that it rejects exactly
// the values it cannot encode.
func FuzzWriter(f *testing.F) {
	f.Add("1", true, "message", []byte("hello"), true, 0, false)
	f.Add("", true, "", []byte(nil), true, 3000, true)
	f.Add("a\nb", true, "t\r", []byte("x\r\ny\rz\n"), false, -1, true)
	f.Add(" x", false, " y", []byte(" z\n\n"), true, 5, false)
	f.Fuzz(func(t *testing.T, id string, hasID bool, typ string, data []byte, hasData bool, retry int, hasRetry bool) {
		ev := Event{ID: id, HasID: hasID, Type: typ, Data: data, HasData: hasData, Retry: retry, HasRetry: hasRetry}
		invalid := (hasID && strings.ContainsAny(id, "\r\n\x00")) || strings.ContainsAny(typ, "\r\n") || (hasRetry && retry < 0)
		rec := newRecorder()
		err := NewWriter(rec).WriteEvent(ev)
		if invalid {
			if !errors.Is(err, ErrInvalidField) || rec.String() != "" {
				t.Fatalf("invalid event: error %v, wrote %q", err, rec.String())
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		got, err := readAll(NewReader(strings.NewReader(rec.String()), 0))
		if err != io.EOF {
			t.Fatalf("read error %v", err)
		}
		want := Event{Type: typ, HasData: hasData || len(data) > 0, HasID: hasID, HasRetry: hasRetry}
		if hasID {
			want.ID = id
		}
		if hasRetry {
			want.Retry = retry
		}
		norm := bytes.ReplaceAll(data, []byte("\r\n"), []byte("\n"))
		want.Data = bytes.ReplaceAll(norm, []byte("\r"), []byte("\n"))
		var wantEvs []Event
		if want.HasID || want.HasData || want.HasRetry || want.Type != "" {
			wantEvs = []Event{want}
		}
		if !eventsEqual(got, wantEvs) {
			t.Fatalf("wrote %q\n got %s\nwant %s", rec.String(), formatEvents(got), formatEvents(wantEvs))
		}
	})
}
