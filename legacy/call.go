package legacy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
)

// maxResumes bounds how often a broken call stream is resumed.
const maxResumes = 3

// Call is the answer to one upstream request: the messages of a JSON or SSE
// response, ending with the response to the request. A broken SSE stream is
// resumed with GET and Last-Event-ID when the upstream numbered its events.
// One goroutine reads the answer into a small buffer, so a caller may stop
// reading for a while (a parked call) without losing messages.
type Call struct {
	// ID is the JSON-RPC id the gateway gave the request.
	ID json.RawMessage

	session *Session
	resp    *http.Response // its Request and Header are dropped once read starts
	bodyMu  sync.Mutex
	body    io.ReadCloser // the live stream (resumption replaces it)
	closed  bool          // Close ran (under bodyMu)
	ctx     context.Context
	cancel  context.CancelFunc
	ch      chan jsonrpc.Message
	after   string // the Last-Event-ID a reopened stream (Reopen) started after
	done    chan struct{}
	err     error
	once    sync.Once

	// upstreamSession is the answer's Mcp-Session-Id header (initialize).
	upstreamSession string

	endMu sync.Mutex
	ended bool   // the reader is done and ch closed
	onEnd func() // see OnFailure

	// While the holder does not read (Park), messages are kept aside
	// rather than in ch: a parked call costs only what it receives.
	limit  int // the call buffer: messages held while parked
	mu     sync.Mutex
	parked bool
	aside  []jsonrpc.Message
	wake   chan struct{} // the holder parked or unparked: a waiting send looks again
	// stir, while the call lingers (Linger), runs once when anything
	// happens on its stream.
	stir func()

	// primed is the id of the stream's last event while no message has
	// come (a priming event's: see Primed); delivered, once one has.
	primed    atomic.Pointer[string]
	delivered atomic.Bool
	onPrimed  atomic.Pointer[func()]
}

// OnPrimed runs f once, on its own goroutine, when Primed first has an id
// to give (at once if it has one already).
func (c *Call) OnPrimed(f func()) {
	c.onPrimed.Store(&f)
	if c.Primed() != "" {
		c.firePrimed()
	}
}

func (c *Call) firePrimed() {
	if f := c.onPrimed.Swap(nil); f != nil {
		go (*f)()
	}
}

// Primed is the id of the last event the call's stream carried before any
// message — the priming event a resumable upstream sends first (2025-11-25)
// — once the reader has read it and found nothing more: what to resume
// after (Session.Reopen) to get every message of the call. "" once a
// message has come (its After says where it stands), or while none was
// seen.
func (c *Call) Primed() string {
	if p := c.primed.Load(); p != nil && !c.delivered.Load() {
		return *p
	}
	return ""
}

// readAhead is how many messages wait in Messages() for a holder that reads.
const readAhead = 4

// DefaultCallBuffer is how many messages a call holds while nobody reads it
// on a session no lease gave a buffer (LeaseLimits.CallBuffer): one opened
// with Open, which still needs one. It is also the default of the gateway's
// max_buffered_notifications, which forward.DefaultOptions takes
// from here and the gateway passes on every lease.
const DefaultCallBuffer = 32

// ErrBacklog ends a call that nobody reads (Park) when a notification
// finds its buffer full: the upstream sent more than the buffer holds while
// the call was parked.
var ErrBacklog = errors.New("too many unread messages from the upstream")

func (c *Call) start(buffer int) {
	if c.ctx == nil {
		c.ctx, c.cancel = context.WithCancel(context.Background())
	}
	c.body = c.resp.Body
	c.prepare(buffer)
	go c.read()
}

// prepare makes the call's channels, before its answer is read.
func (c *Call) prepare(buffer int) {
	c.limit = buffer
	c.ch = make(chan jsonrpc.Message, min(buffer, readAhead))
	c.wake = make(chan struct{}, 1)
	c.done = make(chan struct{})
}

// Messages delivers the messages of the answer; it is closed after the
// response to the request, or when the answer ends early (then Err says
// why).
func (c *Call) Messages() <-chan jsonrpc.Message { return c.ch }

// Err reports why Messages closed before the response, once it is closed.
func (c *Call) Err() error { return c.err }

// Next returns the next message, or the error that ended the answer
// (io.EOF after the response).
func (c *Call) Next() (jsonrpc.Message, error) {
	m, ok := <-c.ch
	if !ok {
		if c.err != nil {
			return jsonrpc.Message{}, c.err
		}
		return jsonrpc.Message{}, io.EOF
	}
	return m, nil
}

// Final skips to the response to the request.
func (c *Call) Final() (jsonrpc.Message, error) {
	for {
		m, err := c.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return jsonrpc.Message{}, err
		}
		if c.isFinal(m) {
			return m, nil
		}
	}
}

func (c *Call) isFinal(m jsonrpc.Message) bool {
	return c.ID != nil && m.Kind == jsonrpc.KindResponse && bytes.Equal(m.ID, c.ID)
}

// Close stops reading the answer and releases its connection. It does not
// tell the upstream anything.
func (c *Call) Close() {
	c.once.Do(func() {
		close(c.done)
		if c.cancel != nil {
			c.cancel()
		}
		c.bodyMu.Lock()
		c.closed = true
		if c.body != nil { // nil until a CallWithin's headers came
			c.body.Close()
		}
		c.bodyMu.Unlock()
	})
}

// send queues m for the holder. While the holder reads, it waits for room
// (backpressure on the upstream). While the call is parked, m is kept aside,
// up to the call buffer (counting what already waits in Messages()); beyond
// it a notification ends the call with ErrBacklog, and a request or a
// response waits for the holder to read again.
func (c *Call) send(m jsonrpc.Message) bool {
	for {
		c.mu.Lock()
		if c.parked {
			if len(c.aside)+len(c.ch) < c.limit {
				c.aside = append(c.aside, m)
				c.mu.Unlock()
				c.stirred()
				return true
			}
			if m.Kind == jsonrpc.KindNotification {
				c.err = fmt.Errorf("%w: %d messages waiting", ErrBacklog, c.limit)
				c.mu.Unlock()
				return false
			}
			c.mu.Unlock()
			select {
			case <-c.wake:
				continue
			case <-c.done:
				return false
			}
		}
		c.mu.Unlock()
		select {
		case c.ch <- m:
			return true
		case <-c.done:
			return false
		case <-c.wake:
			// The holder parked: look again.
		}
	}
}

// Park tells the call that its holder stops reading it (a parked call):
// what the upstream sends meanwhile is kept aside, bounded (see send).
func (c *Call) Park() {
	c.mu.Lock()
	c.parked = true
	c.mu.Unlock()
	c.signal()
}

// Linger parks the call (Park) for a holder that is about to let go of
// it, and may come back to it only while its stream stays quiet: the
// first message that arrives, or the stream's end or break (which is then
// not resumed), runs stir once, on a goroutine of its own. Unpark stops
// that.
func (c *Call) Linger(stir func()) {
	c.mu.Lock()
	c.parked, c.stir = true, stir
	c.mu.Unlock()
	c.signal()
}

// stirred runs the call's stir function, if it lingers, once.
func (c *Call) stirred() bool {
	c.mu.Lock()
	f := c.stir
	c.stir = nil
	c.mu.Unlock()
	if f != nil {
		go f()
	}
	return f != nil
}

// Unpark tells the call that its holder reads it again, and returns the
// messages that arrived before, oldest first: the holder handles them
// before those of Messages(). After the answer ended, Messages() is closed.
func (c *Call) Unpark() []jsonrpc.Message {
	c.mu.Lock()
	var held []jsonrpc.Message
	for range len(c.ch) {
		m, ok := <-c.ch // never blocks: only send fills ch, and not while parked
		if !ok {
			break
		}
		held = append(held, m)
	}
	held = append(held, c.aside...)
	c.parked, c.aside, c.stir = false, nil, nil
	c.mu.Unlock()
	c.signal()
	return held
}

// Held is how many messages wait for the holder: kept aside while parked,
// or in Messages().
func (c *Call) Held() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.aside) + len(c.ch)
}

func (c *Call) signal() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// OnFailure sets f to run once the answer has ended with an error (Err
// is set): the upstream stream broke for good, or ErrBacklog. It runs on the
// call's reader goroutine, or at once if the answer already failed. It lets
// a holder that is not reading (a parked call) learn that the call is over.
func (c *Call) OnFailure(f func()) {
	c.endMu.Lock()
	ended := c.ended
	if !ended {
		c.onEnd = f
	}
	c.endMu.Unlock()
	if ended && c.err != nil {
		f()
	}
}

func (c *Call) read() {
	// The request (its headers, URL and body: the call's arguments) and
	// the answer's headers need not live as long as the answer, which a
	// parked call holds for minutes.
	rd := NewMessageReader(c.resp, maxResponse)
	rd.lastID = c.after // a reopened stream that breaks at once resumes from there
	c.resp.Request, c.resp.Header = nil, nil
	if !rd.IsStream() {
		c.readJSON(rd)
		c.finished()
		return
	}
	rd.YieldWhenIdle()
	if !c.readStream(rd, c.resp.Body, 0) {
		c.finished()
	}
}

// finished closes the messages and tells OnFailure's function.
func (c *Call) finished() {
	close(c.ch)
	c.endMu.Lock()
	c.ended = true
	f := c.onEnd
	c.onEnd = nil
	c.endMu.Unlock()
	if f != nil && c.err != nil {
		f()
	}
}

func (c *Call) readJSON(rd *MessageReader) {
	defer c.resp.Body.Close()
	m, err := rd.Next()
	switch {
	case err != nil:
		c.err = err
	case m.Kind == jsonrpc.KindInvalid:
		c.err = fmt.Errorf("upstream answered %s with no JSON-RPC message", c.resp.Status)
	default:
		c.send(m)
	}
}

// readStream reads an SSE answer, resuming it when it breaks. When the
// next message has not arrived (Next returns ErrWouldBlock), it hands the
// stream to a new goroutine that waits for it (awaitStream) and returns:
// the goroutine that waits, for minutes under a parked call, then holds
// the smallest stack the runtime gives, rather than the one this goroutine
// grew reading and handling messages (8 KiB; it would shrink only at a
// garbage collection, and only to 4). It reports whether it handed the
// stream on; if not, the answer is over and the caller calls finished.
func (c *Call) readStream(rd *MessageReader, body io.ReadCloser, resumes int) (handed bool) {
	for ; ; resumes++ {
		for {
			m, err := rd.Next()
			if err == ErrWouldBlock {
				if id := rd.LastEventID(); id != "" && !c.delivered.Load() {
					c.primed.Store(&id)
					c.firePrimed()
				}
				go c.awaitStream(rd, body, resumes)
				return true
			}
			if err != nil {
				body.Close()
				if rd, body = c.resumeStream(rd, err, resumes); rd == nil {
					return false
				}
				break
			}
			c.delivered.Store(true)
			if c.isFinal(m) {
				c.sendFinal(m, body)
				return false
			}
			if !c.send(m) {
				return false
			}
		}
	}
}

// awaitStream waits for the stream's next bytes, then reads on.
func (c *Call) awaitStream(rd *MessageReader, body io.ReadCloser, resumes int) {
	rd.WaitReadable()
	if !c.readStream(rd, body, resumes) {
		c.finished()
	}
}

// resumeStream reopens a stream that broke with err, after the upstream's
// retry delay, or sets Err and returns nil. A stream that sent JSON nested
// too deeply is not resumed: the upstream would only send it again.
func (c *Call) resumeStream(rd *MessageReader, err error, resumes int) (*MessageReader, io.ReadCloser) {
	select {
	case <-c.done:
		return nil, nil
	default:
	}
	lastID := rd.LastEventID()
	// A lingering call's stream is not resumed: its holder lets go of it,
	// and whoever reopens it (another gateway instance, perhaps) does.
	if c.stirred() || lastID == "" || resumes >= maxResumes || errors.Is(err, jsonrpc.ErrJSONTooDeep) {
		if errors.Is(err, io.EOF) && c.ID != nil {
			err = io.ErrUnexpectedEOF
		}
		c.err = fmt.Errorf("upstream stream ended: %w", err)
		return nil, nil
	}
	retry := 500 * time.Millisecond
	if ms, ok := rd.Retry(); ok {
		retry = time.Duration(ms) * time.Millisecond
	}
	select {
	case <-time.After(min(retry, 5*time.Second)):
	case <-c.done:
		return nil, nil
	}
	resp, err := c.resume(lastID)
	if err != nil {
		c.err = fmt.Errorf("resuming upstream stream: %w", err)
		return nil, nil
	}
	next := NewMessageReader(resp, maxResponse)
	next.YieldWhenIdle()
	next.lastID, next.retry, next.hasRetry = lastID, rd.retry, rd.hasRetry
	return next, resp.Body
}

// drainer is a body that can end early without losing its connection
// (ConnClient's).
type drainer interface {
	Detach() bool
	DrainWithin(time.Duration)
}

// sendFinal queues the response to the request. The upstream ends the
// stream right after it: the rest is read here (the reader goroutine has
// nothing else to do) so that the connection serves the next request,
// instead of being closed by Close.
func (c *Call) sendFinal(m jsonrpc.Message, body io.ReadCloser) {
	d, ok := body.(drainer)
	ok = ok && d.Detach()
	c.send(m)
	if ok {
		d.DrainWithin(time.Second)
	}
}

// resume reopens the stream after lastID with GET + Last-Event-ID.
func (c *Call) resume(lastID string) (*http.Response, error) {
	resp, err := c.session.getAfter(c.ctx, lastID)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("upstream answered %s", resp.Status)
	}
	c.bodyMu.Lock()
	defer c.bodyMu.Unlock()
	select {
	case <-c.done:
		resp.Body.Close()
		return nil, errors.New("call closed")
	default:
	}
	c.body = resp.Body // so that Close closes the live stream
	return resp, nil
}

func isJSON(resp *http.Response) bool {
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	return mt == "application/json" || mt == "text/event-stream"
}
