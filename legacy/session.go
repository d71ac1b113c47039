package legacy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tidwall/gjson"
	"go.opentelemetry.io/otel/trace"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/traces"
)

// UpstreamSessionID is the Mcp-Session-Id an upstream server minted. It never
// leaves the gateway in clear.
type UpstreamSessionID string

// ProtocolVersion is the legacy protocol version the gateway offers upstream
// when it opens sessions of its own.
const ProtocolVersion = "2025-11-25"

// ErrSessionGone means the upstream no longer knows the session (404): it
// must be initialized again.
var ErrSessionGone = errors.New("upstream session not found")

// inboxSize is how many messages of a session's GET stream wait for the
// call holding the session before the stream is read no further (the
// upstream then waits). Servers send little there; every session holds it.
const inboxSize = 4

// maxResponse bounds a single JSON answer from an upstream.
const maxResponse = 16 << 20

// Session is a legacy MCP session the gateway opened upstream on behalf of
// stateless clients. Its methods are safe for concurrent use.
type Session struct {
	// URL is the upstream endpoint.
	URL string
	// ID is the upstream's session id ("" if it keeps none).
	ID UpstreamSessionID
	// Version is the negotiated protocol version.
	Version string
	// InitResult is the raw InitializeResult. Read only: sessions whose
	// upstream answered alike share it (internInit).
	InitResult []byte

	client Doer
	header http.Header // sent with every request (e.g. Authorization)
	nextID atomic.Int64

	// inbox receives the messages of the session's standalone GET stream.
	inbox      chan jsonrpc.Message
	listening  chan struct{} // closed once the upstream answers the GET stream's request (or it is given up)
	stopListen context.CancelFunc
	listenDone chan struct{} // closed when the GET stream's last reader returned
	streamLost chan struct{} // closed when the GET stream, once open, could not be opened again
	// relisten: the session had a GET stream that Detach stopped and
	// dropped (with its inbox); Relisten opens it again, or leaves it to
	// the next Listen for a session opened without one (listenAtOpen).
	relisten     bool
	listenAtOpen bool
	closeOnce    sync.Once

	lastUsed atomic.Int64 // unix nanoseconds
	uses     atomic.Int64 // leases released (Pool.Release)

	// buffer is how many messages each call of the session holds unread
	// (0: DefaultCallBuffer); the pool sets it on every lease (LeaseLimits).
	buffer atomic.Int32
}

func (s *Session) callBuffer() int {
	if n := s.buffer.Load(); n > 0 {
		return int(n)
	}
	return DefaultCallBuffer
}

// Open initializes a new upstream session with the given client
// capabilities (raw JSON object) and client info, and, with listen, opens
// its standalone GET stream (if the upstream has one). header is sent with
// every request, but for its W3C trace context: each POST sends the one
// its context carries (translate/traces), not the session opener's.
func Open(ctx context.Context, client Doer, url string, header http.Header, caps, clientInfo []byte, listen bool) (*Session, error) {
	s := &Session{URL: url, client: client, header: traces.WithoutTraceContext(header), inbox: make(chan jsonrpc.Message, inboxSize), listening: make(chan struct{})}
	if len(caps) == 0 {
		caps = []byte("{}")
	}
	if len(clientInfo) == 0 {
		clientInfo = []byte(`{"name":"caddy-mcp-gateway","version":"1"}`)
	}
	params := fmt.Appendf(nil, `{"protocolVersion":%s,"capabilities":%s,"clientInfo":%s}`, jsonrpc.Quote(ProtocolVersion), caps, clientInfo)
	// A session the upstream opens twice is left unused: initialize may be
	// sent again on a fresh connection when a reused one was closed.
	c, err := s.Call(Replayable(ctx), "initialize", params)
	if err != nil {
		return nil, fmt.Errorf("initializing upstream session: %w", err)
	}
	defer c.Close()
	s.ID = UpstreamSessionID(c.upstreamSession)
	msg, err := c.Final()
	if err != nil {
		return nil, fmt.Errorf("initializing upstream session: %w", err)
	}
	result := gjson.GetBytes(msg.Raw, "result")
	if !result.Exists() {
		return nil, fmt.Errorf("initializing upstream session: %s", gjson.GetBytes(msg.Raw, "error").Raw)
	}
	s.InitResult = internInit(result.Raw)
	// A clone: a substring would keep the whole answer (GetBytes's copy)
	// alive as long as the session.
	s.Version = strings.Clone(result.Get("protocolVersion").String())
	if err := s.Notify(ctx, "notifications/initialized", nil); err != nil {
		return nil, err
	}
	s.touch()
	if !listen {
		close(s.listening) // nothing will reach the inbox until Listen
		return s, nil
	}
	s.listenAtOpen = true
	s.startListening()
	return s, nil
}

// Listen opens the session's standalone GET stream if it has none open —
// one opened without (Open's listen false), or whose stream Detach stopped
// — with a new inbox, and waits up to wait for its request to be sent
// upstream, so that what the upstream sends there from then on reaches the
// Inbox. The stream stays until Detach, Relisten or Close. The caller must
// hold the session alone (no call of it running).
func (s *Session) Listen(wait time.Duration) {
	if s.stopListen != nil {
		return
	}
	s.relisten = false
	s.startListening()
	select {
	case <-s.listening:
	case <-time.After(wait):
	}
}

// startListening starts reading the GET stream into a new inbox.
func (s *Session) startListening() {
	ctx, cancel := context.WithCancel(context.Background())
	l := &listener{inbox: make(chan jsonrpc.Message, inboxSize), listening: make(chan struct{}), done: make(chan struct{}), lost: make(chan struct{})}
	s.inbox, s.stopListen, s.listening, s.listenDone, s.streamLost = l.inbox, cancel, l.listening, l.done, l.lost
	go s.listen(ctx, l)
}

// Inbox delivers the requests and notifications the upstream sends on the
// session's standalone GET stream. It is never closed.
func (s *Session) Inbox() <-chan jsonrpc.Message { return s.inbox }

// Listening is closed once the upstream has answered the request of the
// session's GET stream (or it has none): what the upstream sends there
// after that reaches the Inbox.
func (s *Session) Listening() <-chan struct{} { return s.listening }

// StreamLost is closed when the session's standalone GET stream, once
// open, ended and could not be opened again: the upstream could not be
// reached, or refused the stream (404: it forgot the session, e.g. it
// restarted). The session still asks for its stream again after that, as
// it does after every end of it, and StreamLost stays closed if a later
// request opens it: StreamLost is for whoever holds the session for its
// stream alone (a subscription), for which the upstream is gone. A session without a stream (or whose stream Detach dropped)
// has a nil channel, never ready.
func (s *Session) StreamLost() <-chan struct{} { return s.streamLost }

// listener is one standalone GET stream's own: the inbox it fills, its
// Listening channel, done, closed when the last goroutine reading it
// returns, and lost (StreamLost). Its goroutines hold these, not the
// session's fields, which Detach, Relisten and Listen replace; opened is
// only touched by them, one at a time.
type listener struct {
	inbox                 chan jsonrpc.Message
	listening, done, lost chan struct{}
	opened                bool // the upstream answered the stream's request with 200 once
}

// failed records that a request of the GET stream failed or was refused:
// the stream is lost if it was open before and the session is not
// closing (ctx).
func (l *listener) failed(ctx context.Context) {
	if !l.opened || ctx.Err() != nil {
		return
	}
	select {
	case <-l.lost:
	default:
		close(l.lost)
	}
}

// listen reads the standalone GET stream into l's inbox until the session
// closes. An upstream without one (405) is fine. l.done is closed when the
// last goroutine reading the stream (this one, or the one it handed the
// stream to) returns.
func (s *Session) listen(ctx context.Context, l *listener) {
	var once sync.Once
	signal := func() { once.Do(func() { close(l.listening) }) }
	trace := &httptrace.ClientTrace{GotFirstResponseByte: signal}
	handed := s.listenFrom(ctx, httptrace.WithClientTrace(ctx, trace), 100*time.Millisecond, l)
	signal()
	if !handed {
		close(l.done)
	}
}

// listenFrom requests the GET stream (with the context rctx) and reads it,
// again after backoff when it ends, until ctx is done. It returns early,
// reporting true, when readInbox hands the stream to another goroutine,
// which goes on (and closes done in the end).
func (s *Session) listenFrom(ctx, rctx context.Context, backoff time.Duration, l *listener) (handed bool) {
	for ; ctx.Err() == nil; backoff = min(2*backoff, 5*time.Second) {
		req, err := http.NewRequestWithContext(rctx, http.MethodGet, s.URL, nil)
		if err != nil {
			return false
		}
		s.setHeaders(req.Header)
		req.Header.Set("Accept", "text/event-stream")
		resp, err := s.client.Do(req)
		if err == nil && resp.StatusCode == http.StatusConflict {
			// The upstream still holds the session's previous GET
			// stream (Relisten right after Detach: it has not seen
			// the connection close yet): again after backoff.
			resp.Body.Close()
		} else if err == nil {
			if resp.StatusCode != http.StatusOK {
				resp.Body.Close()
				l.failed(ctx)
				return false // no standalone stream, or the session is gone
			}
			l.opened = true
			// The reader keeps the body only: the request and the
			// headers (a kilobyte or so) need not live as long as the
			// stream.
			body, rd := resp.Body, NewMessageReader(resp, maxResponse)
			rd.YieldWhenIdle()
			if s.readInbox(ctx, rctx, body, rd, backoff, l) {
				return true
			}
			body.Close()
		} else {
			l.failed(ctx)
		}
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
		}
	}
	return false
}

// readInbox reads the GET stream's messages into the inbox until the stream
// ends. It reads on the listening goroutine itself: a session waiting
// between calls (or under a parked call) costs one goroutine for this
// stream, not two. When the next message has not arrived (Next returns
// ErrWouldBlock), it hands the stream to a new goroutine that waits for one
// (awaitInbox), as Call.readStream does, and reports true.
func (s *Session) readInbox(ctx, rctx context.Context, body io.Closer, rd *MessageReader, backoff time.Duration, l *listener) (handed bool) {
	if !rd.IsStream() {
		return false
	}
	for {
		m, err := rd.Next()
		if err == ErrWouldBlock {
			go s.awaitInbox(ctx, rctx, body, rd, backoff, l)
			return true
		}
		if err != nil {
			return false
		}
		select {
		case l.inbox <- m:
		case <-ctx.Done():
			return false
		}
	}
}

// awaitInbox waits for the GET stream's next bytes and reads on; once the
// stream ends, it requests it again as listenFrom does. It closes done
// when it returns, unless it handed the stream on again.
func (s *Session) awaitInbox(ctx, rctx context.Context, body io.Closer, rd *MessageReader, backoff time.Duration, l *listener) {
	rd.WaitReadable()
	if s.readInbox(ctx, rctx, body, rd, backoff, l) {
		return
	}
	body.Close()
	select {
	case <-time.After(backoff):
	case <-ctx.Done():
	}
	if !s.listenFrom(ctx, rctx, min(2*backoff, 5*time.Second), l) {
		close(l.done)
	}
}

func (s *Session) touch() { s.lastUsed.Store(time.Now().UnixNano()) }

// LastUsed is when the session last carried a request.
func (s *Session) LastUsed() time.Time { return time.Unix(0, s.lastUsed.Load()) }

func (s *Session) setHeaders(h http.Header) {
	for k, v := range s.header {
		h[k] = v
	}
	if s.ID != "" {
		h.Set("Mcp-Session-Id", string(s.ID))
	}
	if s.Version != "" {
		h.Set("MCP-Protocol-Version", s.Version)
	}
}

// NewRequestID mints a JSON-RPC id for a request of the gateway's, unique
// within the session.
func (s *Session) NewRequestID() json.RawMessage {
	return json.RawMessage(jsonrpc.Quote("gw-" + strconv.FormatInt(s.nextID.Add(1), 10)))
}

// Call sends a request and returns its answer as a stream of messages. It
// returns once the upstream has answered with its headers (some servers send
// them only with their first message).
func (s *Session) Call(ctx context.Context, method string, params []byte) (*Call, error) {
	return s.CallWithID(ctx, s.NewRequestID(), method, params)
}

// CallWithID is Call with an id from NewRequestID, so that the caller can
// cancel the request (notifications/cancelled) before Call returns.
func (s *Session) CallWithID(ctx context.Context, id json.RawMessage, method string, params []byte) (*Call, error) {
	ctx, cancel := context.WithCancel(ctx)
	body := fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"method":%s`, id, jsonrpc.Quote(method))
	if len(params) > 0 {
		body = append(append(body, `,"params":`...), params...)
	}
	body = append(body, '}')
	resp, err := s.post(ctx, body)
	return s.answered(ctx, cancel, id, resp, err)
}

// CallWithin is CallWithID for a call the caller may stop waiting on
// (a task the gateway hosts): if the upstream has not answered with its
// headers within wait (go-sdk servers send them only with their first
// message), it returns the call at once, and the headers, when they come,
// start its messages; an error then ends Messages (Err says why). One
// goroutine posts the request and, once the caller stopped waiting, goes on
// as the call's reader: a held task costs no goroutine more.
func (s *Session) CallWithin(ctx context.Context, id json.RawMessage, method string, params []byte, wait time.Duration) (*Call, error) {
	ctx, cancel := context.WithCancel(ctx)
	body := fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"method":%s`, id, jsonrpc.Quote(method))
	if len(params) > 0 {
		body = append(append(body, `,"params":`...), params...)
	}
	body = append(body, '}')
	type posted struct {
		resp *http.Response
		err  error
	}
	var (
		mu   sync.Mutex
		late *Call // set, under mu, once the caller stopped waiting
	)
	got := make(chan posted, 1)
	go func() {
		resp, err := s.post(ctx, body)
		mu.Lock()
		c := late
		if c == nil {
			got <- posted{resp, err} // the caller takes it
			mu.Unlock()
			return
		}
		mu.Unlock()
		if err := checkAnswer(s, resp, err); err != nil {
			cancel()
			c.err = err
			c.finished()
			return
		}
		c.bodyMu.Lock()
		c.resp, c.body = resp, resp.Body
		closed := c.closed
		c.bodyMu.Unlock()
		if closed {
			c.body.Close()
		}
		c.read()
	}()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case p := <-got:
		return s.answered(ctx, cancel, id, p.resp, p.err)
	case <-timer.C:
	}
	mu.Lock()
	select {
	case p := <-got: // it came as the wait ended
		mu.Unlock()
		return s.answered(ctx, cancel, id, p.resp, p.err)
	default:
	}
	c := &Call{ID: id, session: s, ctx: ctx, cancel: cancel}
	c.prepare(s.callBuffer())
	late = c
	mu.Unlock()
	return c, nil
}

// answered checks the upstream's answer to a call's POST and starts
// reading it.
func (s *Session) answered(ctx context.Context, cancel context.CancelFunc, id json.RawMessage, resp *http.Response, err error) (*Call, error) {
	if err = checkAnswer(s, resp, err); err != nil {
		cancel()
		return nil, err
	}
	c := &Call{ID: id, resp: resp, session: s, ctx: ctx, cancel: cancel, upstreamSession: resp.Header.Get("Mcp-Session-Id")}
	c.start(s.callBuffer())
	return c, nil
}

// checkAnswer says why the upstream's answer to a call's POST (or the
// POST's err) is no answer; the body of such an answer is closed.
func checkAnswer(s *Session, resp *http.Response, err error) error {
	switch {
	case err != nil:
		return err
	case resp.StatusCode == http.StatusNotFound && s.ID != "":
		resp.Body.Close()
		return ErrSessionGone
	case resp.StatusCode == http.StatusNotFound && !isJSON(resp):
		resp.Body.Close()
		return fmt.Errorf("upstream answered %s: %w", resp.Status, errNotFound)
	case resp.StatusCode/100 != 2 && !isJSON(resp):
		resp.Body.Close()
		return fmt.Errorf("upstream answered %s", resp.Status)
	}
	return nil
}

// errNotFound is a 404 without a JSON-RPC message to a request outside any
// upstream session (an initialize, a modern server's stateless request):
// most often an upstream URL without the MCP endpoint's path.
var errNotFound = errors.New("no MCP endpoint at this URL: check the MCP endpoint's path in the upstream URL (such as /mcp)")

// Respond POSTs the client's answer to a request the upstream made: result
// or errObj (raw JSON) under the upstream's request id.
func (s *Session) Respond(ctx context.Context, id json.RawMessage, result, errObj []byte) error {
	body := fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,`, id)
	if errObj != nil {
		body = append(append(body, `"error":`...), errObj...)
	} else {
		body = append(append(body, `"result":`...), result...)
	}
	body = append(body, '}')
	return s.postAccepted(ctx, body)
}

// Notify POSTs a notification.
func (s *Session) Notify(ctx context.Context, method string, params []byte) error {
	body := fmt.Appendf(nil, `{"jsonrpc":"2.0","method":%s`, jsonrpc.Quote(method))
	if len(params) > 0 {
		body = append(append(body, `,"params":`...), params...)
	}
	body = append(body, '}')
	return s.postAccepted(ctx, body)
}

func (s *Session) postAccepted(ctx context.Context, body []byte) error {
	// A response or a notification may reach the upstream twice (an
	// answer to an id already answered, or a second notification, is
	// ignored); a request may not.
	resp, err := s.post(Replayable(ctx), body)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxResponse))
	resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound && s.ID != "":
		return ErrSessionGone
	case resp.StatusCode/100 != 2:
		return fmt.Errorf("upstream answered %s", resp.Status)
	}
	return nil
}

func (s *Session) post(ctx context.Context, body []byte) (*http.Response, error) {
	ctx, span := traces.Start(ctx, "POST", trace.SpanKindClient) // tracing on: traced.go
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL, bytes.NewReader(body))
	if err != nil {
		traces.End(span, "request")
		return nil, err
	}
	s.setHeaders(req.Header)
	traces.Inject(ctx, req.Header) // this exchange's: the session's header has none
	if marked, _ := ctx.Value(replayableKey{}).(bool); marked {
		req.Header[idempotencyKey] = nil
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	s.touch()
	resp, err := s.client.Do(req)
	if span != nil {
		s.endSpan(span, body, resp, err)
	}
	return resp, err
}

// closeTimeout bounds a DELETE when Close's context has no deadline: an
// upstream may hold it until its running requests return (go-sdk waits for
// a tool blocked on a question nobody will answer).
const closeTimeout = 10 * time.Second

// Close ends the session upstream (DELETE) and stops its GET stream.
func (s *Session) Close(ctx context.Context) {
	s.closeOnce.Do(func() {
		if s.stopListen != nil {
			s.stopListen()
		}
		if s.ID == "" {
			return
		}
		if _, ok := ctx.Deadline(); !ok {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, closeTimeout)
			defer cancel()
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodDelete, s.URL, nil)
		if err != nil {
			return
		}
		s.setHeaders(req.Header)
		if resp, err := s.client.Do(req); err == nil {
			resp.Body.Close()
		}
	})
}
