package sse

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"sync"
)

// DefaultMaxEventBytes is the event size limit used by [NewReader] when it is
// given a limit of zero or less.
const DefaultMaxEventBytes = 4 << 20

// readBufSize is the initial (and resting) size of a Reader's read buffer.
// Small MCP messages (a question, a short result) fit; a larger event grows
// the buffer by doubling, and it shrinks back afterwards. It is small
// because a gateway holds a Reader on every open stream, idle and parked
// ones included.
const readBufSize = 512

// keepDataCap is the largest data buffer a Reader keeps between events; a
// larger one, left by a large event, is released after dispatch.
const keepDataCap = 64 << 10

// ErrWouldBlock is returned by [Reader.Next] when the Reader needs more
// input and the function given to [Reader.YieldWhen] says that reading it
// would block. It is not terminal: the Reader keeps what it has read, and
// a later Next goes on.
var ErrWouldBlock = errors.New("sse: no input yet")

// ErrEventTooLarge is returned by [Reader.Next] when a single line, or the
// accumulated ID, type and data of one event, exceeds the Reader's limit.
var ErrEventTooLarge = errors.New("sse: event too large")

// Event is one dispatched SSE event.
type Event struct {
	// ID is the value of the event's own "id" field; HasID reports whether
	// one was present. An empty ID with HasID set is meaningful: it tells the
	// client to reset its last event ID. The Reader does not carry IDs over
	// from earlier events.
	ID    string
	HasID bool

	// Type is the "event" field. The empty string means the default type,
	// "message".
	Type string

	// Data is the event's data lines joined with "\n", without a trailing
	// newline. HasData reports whether at least one "data" field was present;
	// an MCP priming event, for instance, is "id: X" with an empty "data:".
	// Data may be nil when HasData is set and the data is empty.
	Data    []byte
	HasData bool

	// Retry is the "retry" field, the reconnection time in milliseconds. It
	// is valid only if HasRetry is set.
	Retry    int
	HasRetry bool
}

// Reader parses a text/event-stream into [Event] values.
//
// Lines may end in CRLF, LF or a lone CR, in any mix, and may be split across
// reads at any byte. A UTF-8 byte order mark at the very start is skipped.
// Memory use is bounded by the limit given to [NewReader].
//
// A Reader is not safe for concurrent use.
type Reader struct {
	src io.Reader
	max int

	buf     []byte // read buffer; buf[rpos:wpos] is unread
	rpos    int
	wpos    int
	scanned int   // how much of buf[rpos:wpos] is known to hold no CR or LF
	srcErr  error // error from src, reported once buf holds no complete line
	err     error // terminal error, returned by every later Next

	wouldBlock func() bool // see YieldWhen

	bomDone bool // the start of the stream has been checked for a BOM
	skipLF  bool // the last line ended in CR at the end of buf; drop a leading LF

	// Current block.
	inBlock  bool // a non-comment line was seen since the last blank line
	id       string
	hasID    bool
	typ      string
	lastType string // previous type, reused to avoid allocating per event
	data     []byte // data lines, each followed by "\n"
	hasData  bool
	retry    int
	hasRetry bool
}

// NewReader returns a Reader that parses r. No single line, and no single
// event (its ID, type and data together), may exceed maxEventBytes bytes;
// maxEventBytes <= 0 selects [DefaultMaxEventBytes].
func NewReader(r io.Reader, maxEventBytes int) *Reader {
	if maxEventBytes <= 0 {
		maxEventBytes = DefaultMaxEventBytes
	}
	return &Reader{
		src: r,
		max: maxEventBytes,
		buf: bufPool.Get().(*[readBufSize]byte)[:],
	}
}

// Next returns the next event. It blocks until an event is complete (its
// terminating blank line has been read) or the stream ends.
//
// A block is dispatched when any of id, event, data or retry was set in it;
// blocks of comments or unknown fields only are skipped.
//
// At the end of the stream Next returns io.EOF if the stream ended on an
// event boundary, and io.ErrUnexpectedEOF if it ended inside an event: after
// a field line (even an ignored one) or in the middle of a non-comment line,
// without the terminating blank line. As the WHATWG rules require, that
// incomplete event is discarded, never returned.
//
// If a line or an event exceeds the limit, Next returns an error matching
// [ErrEventTooLarge]. Read errors from the underlying reader are returned
// unchanged, once the events read before them have been returned. After any
// error the Reader is finished and every later call returns the same error.
func (r *Reader) Next() (Event, error) {
	if r.err != nil {
		return Event{}, r.err
	}
	for {
		line, err := r.readLine()
		if err == ErrWouldBlock {
			return Event{}, err
		}
		if err != nil {
			r.fail(err)
			return Event{}, r.err
		}
		if len(line) == 0 {
			if r.hasID || r.hasData || r.hasRetry || r.typ != "" {
				return r.dispatch(), nil
			}
			r.inBlock = false
			continue
		}
		if line[0] == ':' {
			continue // comment
		}
		r.inBlock = true
		r.field(line)
		if r.eventSize() > r.max {
			r.fail(ErrEventTooLarge)
			return Event{}, r.err
		}
	}
}

// Idle reports whether Next must read from the source before it can
// return anything: no unread input is buffered, and neither the source nor
// the Reader has reported an error. A caller may then wait for the source
// to have input (see legacy's MessageReader.WaitReadable) before calling
// Next.
func (r *Reader) Idle() bool {
	return r.rpos == r.wpos && r.srcErr == nil && r.err == nil
}

// YieldWhen makes Next return [ErrWouldBlock], rather than read, when it
// needs more input and wouldBlock reports true: a caller that waits for
// input elsewhere (with a shallower stack, say) then calls Next again.
// wouldBlock must report true only when a read of the source would block.
func (r *Reader) YieldWhen(wouldBlock func() bool) { r.wouldBlock = wouldBlock }

// bufPool holds the read buffers of idle Readers (see Release).
var bufPool = sync.Pool{New: func() any { return new([readBufSize]byte) }}

// Release lends the Reader's read buffer back to a pool while it is Idle
// and at its resting size; the next read takes one again. A caller about
// to wait long for input (a parked call's stream) calls it, so that a
// waiting stream holds no buffer.
func (r *Reader) Release() {
	if !r.Idle() || len(r.buf) != readBufSize {
		return
	}
	bufPool.Put((*[readBufSize]byte)(r.buf))
	r.buf, r.rpos, r.wpos, r.scanned = nil, 0, 0, 0
}

// fail records the terminal error for err, translating end of stream.
func (r *Reader) fail(err error) {
	switch {
	case errors.Is(err, ErrEventTooLarge):
		r.err = fmt.Errorf("%w (limit %d bytes)", ErrEventTooLarge, r.max)
	case err == io.EOF:
		partial := r.buf[r.rpos:r.wpos]
		if r.inBlock || (len(partial) > 0 && partial[0] != ':') {
			r.err = io.ErrUnexpectedEOF
		} else {
			r.err = io.EOF
		}
	default:
		r.err = err
	}
	r.resetBlock()
	r.data = nil
	r.buf = nil
	r.rpos, r.wpos, r.scanned = 0, 0, 0
}

// field applies one non-empty, non-comment line to the current block.
func (r *Reader) field(line []byte) {
	name, value := line, []byte(nil)
	if i := bytes.IndexByte(line, ':'); i >= 0 {
		name, value = line[:i], line[i+1:]
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
	}
	switch string(name) {
	case "data":
		r.data = append(r.data, value...)
		r.data = append(r.data, '\n')
		r.hasData = true
	case "event":
		if string(value) == r.lastType {
			r.typ = r.lastType
		} else {
			r.typ = string(value)
		}
	case "id":
		if bytes.IndexByte(value, 0) < 0 {
			if string(value) != r.id {
				r.id = string(value)
			}
			r.hasID = true
		}
	case "retry":
		if n, ok := parseRetry(value); ok {
			r.retry, r.hasRetry = n, true
		}
	}
}

// parseRetry parses a retry value: one or more ASCII digits. Values too large
// for an int saturate at math.MaxInt.
func parseRetry(b []byte) (int, bool) {
	if len(b) == 0 {
		return 0, false
	}
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := int(c - '0')
		if n > (math.MaxInt-d)/10 {
			n = math.MaxInt
		} else if n != math.MaxInt {
			n = n*10 + d
		}
	}
	return n, true
}

// eventSize is the size the current event would have if dispatched now.
func (r *Reader) eventSize() int {
	n := len(r.id) + len(r.typ)
	if len(r.data) > 0 {
		n += len(r.data) - 1 // the final "\n" is stripped on dispatch
	}
	return n
}

// dispatch returns the current block as an Event and starts a new block.
func (r *Reader) dispatch() Event {
	ev := Event{
		ID:       r.id,
		HasID:    r.hasID,
		Type:     r.typ,
		HasData:  r.hasData,
		Retry:    r.retry,
		HasRetry: r.hasRetry,
	}
	if len(r.data) > 1 {
		ev.Data = bytes.Clone(r.data[:len(r.data)-1])
	}
	if r.typ != "" {
		r.lastType = r.typ
	}
	r.resetBlock()
	return ev
}

func (r *Reader) resetBlock() {
	r.inBlock = false
	r.id, r.hasID = "", false
	r.typ = ""
	r.hasData = false
	r.retry, r.hasRetry = 0, false
	if cap(r.data) > keepDataCap {
		r.data = nil
	} else {
		r.data = r.data[:0]
	}
}
