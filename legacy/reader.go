package legacy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/sse"
)

// MessageReader reads the JSON-RPC messages of one HTTP answer of an MCP
// server, whichever form it takes: a JSON body holding one message, or an
// SSE stream of them. The forward bridge's calls, the sessions' GET streams,
// the reverse bridge's upstream requests and the era probe all read their
// answers with it.
type MessageReader struct {
	status int
	body   io.Reader
	max    int
	events *sse.Reader // nil for a JSON answer
	read   bool        // the JSON answer was returned

	lastID   string
	retry    int
	hasRetry bool
}

// NewMessageReader reads resp's body. No JSON answer, and no single event,
// may exceed maxBytes.
func NewMessageReader(resp *http.Response, maxBytes int) *MessageReader {
	r := &MessageReader{status: resp.StatusCode, body: resp.Body, max: maxBytes}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt == "text/event-stream" {
		r.events = sse.NewReader(resp.Body, maxBytes)
	}
	return r
}

// IsStream reports whether the answer is an SSE stream.
func (r *MessageReader) IsStream() bool { return r.events != nil }

// Next returns the next message, or io.EOF after the last. A JSON answer
// that is not a JSON object is an error naming the HTTP status; in a stream,
// events without a JSON-RPC message (priming events, anything unparsable)
// are skipped. A stream that breaks returns the read error, wrapped. A JSON
// answer or an event nested deeper than MaxJSONDepth is an error wrapping
// ErrJSONTooDeep, after which the answer must be abandoned.
func (r *MessageReader) Next() (jsonrpc.Message, error) {
	if r.events == nil {
		return r.nextJSON()
	}
	for {
		after := r.lastID
		ev, err := r.events.Next()
		if err == sse.ErrWouldBlock {
			return jsonrpc.Message{}, err
		}
		if err != nil {
			return jsonrpc.Message{}, streamError(err)
		}
		if ev.HasID {
			r.lastID = ev.ID
		}
		if ev.HasRetry {
			r.retry, r.hasRetry = ev.Retry, true
		}
		if m, err := eventMessage(ev.Data); m.Kind != jsonrpc.KindInvalid || err != nil {
			m.After = after
			return m, err
		}
	}
}

// ErrWouldBlock is returned by Next, after YieldWhenIdle, when the next
// message has not arrived: nothing is buffered and the connection has no
// bytes. Next may be called again (after WaitReadable, say).
var ErrWouldBlock = sse.ErrWouldBlock

// YieldWhenIdle makes Next return ErrWouldBlock rather than wait for the
// upstream, when the body can tell (a ConnClient's, over plain TCP). A
// goroutine that reads a long-lived stream then waits with WaitReadable, on
// a fresh goroutine (see Call.readStream): a parked call has two such
// streams.
func (r *MessageReader) YieldWhenIdle() {
	if w, ok := r.body.(waiter); ok && r.events != nil && w.CanWait() {
		r.events.YieldWhen(w.WouldBlock)
	}
}

// WaitReadable waits until the connection has bytes for the stream (or its
// end), when the body can tell, holding no read buffer meanwhile. It reads
// nothing: Next still returns what comes, or the end.
func (r *MessageReader) WaitReadable() {
	if w, ok := r.body.(waiter); ok && r.events != nil && w.CanWait() {
		r.events.Release()
		w.WaitReadable()
	}
}

// waiter is a body that can wait for its connection (ConnClient's).
type waiter interface {
	CanWait() bool
	WouldBlock() bool
	WaitReadable()
}

// eventMessage returns the message of an event's data: KindInvalid for
// anything that is not one (to skip), and an error for JSON nested deeper
// than MaxJSONDepth, which ends the stream: it is no priming event but an
// upstream gone wrong, and the request it answers must fail rather than
// wait.
func eventMessage(data []byte) (jsonrpc.Message, error) {
	data = bytes.TrimSpace(data)
	switch err := jsonrpc.ValidJSON(data); {
	case errors.Is(err, jsonrpc.ErrJSONTooDeep):
		return jsonrpc.Message{}, fmt.Errorf("the upstream sent an event of %w", err)
	case err != nil:
		return jsonrpc.Message{}, nil
	}
	return jsonrpc.Classify(data), nil
}

// streamError is the error that ended an event stream. A function of its
// own, like nextJSON, so that Next's frame stays small: a goroutine
// waiting in it for the next event then fits a small stack (a parked call
// has two waiting).
func streamError(err error) error {
	if errors.Is(err, io.EOF) {
		return io.EOF
	}
	return fmt.Errorf("reading the upstream event stream: %w", err)
}

// nextJSON returns the message of a JSON answer.
func (r *MessageReader) nextJSON() (jsonrpc.Message, error) {
	if r.read {
		return jsonrpc.Message{}, io.EOF
	}
	r.read = true
	b, err := io.ReadAll(io.LimitReader(r.body, int64(r.max)+1))
	if err != nil {
		return jsonrpc.Message{}, fmt.Errorf("reading the upstream answer: %w", err)
	}
	b = bytes.TrimSpace(b)
	if len(b) > r.max || len(b) == 0 || b[0] != '{' {
		if r.status == http.StatusNotFound {
			return jsonrpc.Message{}, fmt.Errorf("the upstream answered HTTP 404 without a JSON-RPC message: %w", errNotFound)
		}
		return jsonrpc.Message{}, fmt.Errorf("the upstream answered HTTP %d without a JSON-RPC message", r.status)
	}
	if err := jsonrpc.ValidJSON(b); err != nil {
		if errors.Is(err, jsonrpc.ErrJSONTooDeep) {
			return jsonrpc.Message{}, fmt.Errorf("the upstream answered HTTP %d with %w", r.status, err)
		}
		return jsonrpc.Message{}, fmt.Errorf("the upstream answered HTTP %d without a JSON-RPC message", r.status)
	}
	return jsonrpc.Classify(b), nil
}

// LastEventID is the id of the stream's last event that had one ("" if
// none): where a broken stream resumes.
func (r *MessageReader) LastEventID() string { return r.lastID }

// Retry is the stream's last retry hint in milliseconds, if it sent one.
func (r *MessageReader) Retry() (int, bool) { return r.retry, r.hasRetry }
