package legacy

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"sync"
	"syscall"
	"time"
)

// Doer sends an HTTP request and returns its response: an *http.Client,
// or a ConnClient.
type Doer interface {
	Do(*http.Request) (*http.Response, error)
}

// ConnOptions configure a ConnClient. The zero value of each field takes
// the documented default.
type ConnOptions struct {
	// DialTimeout bounds connecting to an upstream, with the default
	// dialer (Dial nil). Default 5s.
	DialTimeout time.Duration
	// Dial, if set, opens the TCP connections (for https upstreams, the
	// connection the TLS handshake then runs on) instead of a net.Dialer
	// with DialTimeout: for example the dialer of a configured transport,
	// with its own timeout, resolvers and local address. Its errors should
	// be *net.OpError with Op "dial" for a connection never made (see
	// Refused).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// TLSHandshakeTimeout bounds the TLS handshake with an https upstream.
	// Default 10s.
	TLSHandshakeTimeout time.Duration
	// TLSConfig is the base TLS configuration for https upstreams (nil:
	// the system's roots). ServerName is set per upstream.
	TLSConfig *tls.Config
	// MaxIdlePerHost bounds the idle connections kept per upstream.
	// Default 128.
	MaxIdlePerHost int
	// IdleTimeout closes connections idle for longer. Default 90s.
	IdleTimeout time.Duration
	// BufferSize is each connection's read buffer. Default 512 bytes: it
	// holds response headers and chunk sizes, while the bodies' readers
	// (an SSE reader, a JSON decoder) read past it into their own buffers.
	BufferSize int
	// MaxHeaderBytes bounds a response's status line and headers.
	// Default 1 MiB.
	MaxHeaderBytes int
	// Spares is how many idle connections per upstream the client may
	// dial ahead, in the background, to replace connections closed with
	// their answer unfinished (see spare.go). 0: none; capped at
	// MaxIdlePerHost.
	Spares int
}

func (o ConnOptions) withDefaults() ConnOptions {
	if o.DialTimeout <= 0 {
		o.DialTimeout = 5 * time.Second
	}
	if o.TLSHandshakeTimeout <= 0 {
		o.TLSHandshakeTimeout = 10 * time.Second
	}
	if o.MaxIdlePerHost <= 0 {
		o.MaxIdlePerHost = 128
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = 90 * time.Second
	}
	if o.BufferSize <= 0 {
		o.BufferSize = 512
	}
	if o.MaxHeaderBytes <= 0 {
		o.MaxHeaderBytes = 1 << 20
	}
	o.Spares = min(max(o.Spares, 0), o.MaxIdlePerHost)
	return o
}

// ConnClient is an HTTP/1.1 client for the upstream sessions of the forward
// bridge (and the built-in client of forwarding between instances). It
// writes each request and reads its answer on the calling goroutine, with
// keep-alive connections it pools per upstream.
//
// net/http's Transport keeps two goroutines of its own per connection (a
// reader and a writer), for as long as an answer is open. A parked call
// keeps two answers open for minutes — its call stream and its session's
// GET stream — so through the Transport it costs six goroutines, through a
// ConnClient two: the ones reading the streams. Requests also skip the
// hand-offs between those goroutines.
//
// It does not follow redirects, use proxies from the environment, negotiate
// HTTP/2 or ask for compression: an MCP upstream needs none of them.
type ConnClient struct {
	opts ConnOptions

	mu      sync.Mutex
	idle    map[string][]*conn // by scheme and address, most recently used last
	dialing map[string]int     // spares being dialed, by key
	gen     uint64             // CloseIdleConnections calls: a spare dialed across one is not kept
}

// NewConnClient returns a client with no connections yet.
func NewConnClient(opts ConnOptions) *ConnClient {
	return &ConnClient{opts: opts.withDefaults(), idle: make(map[string][]*conn), dialing: make(map[string]int)}
}

// CloseIdleConnections closes the pooled idle connections; answers still
// being read keep theirs.
func (c *ConnClient) CloseIdleConnections() {
	c.mu.Lock()
	all := c.idle
	c.idle = make(map[string][]*conn)
	c.gen++
	c.mu.Unlock()
	for _, list := range all {
		for _, pc := range list {
			pc.nc.Close()
		}
	}
}

// RoundTrip implements http.RoundTripper with Do, so that an http.Client or
// an httputil.ReverseProxy can send through a ConnClient.
func (c *ConnClient) RoundTrip(req *http.Request) (*http.Response, error) { return c.Do(req) }

// Do sends req and returns the response once its headers have arrived. The
// caller must close the body; a body read to its end returns the
// connection to the pool. Cancelling req's context closes the connection,
// which ends a body being read. req is not modified.
func (c *ConnClient) Do(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
		return nil, fmt.Errorf("unsupported protocol scheme %q", req.URL.Scheme)
	}
	addr := hostPort(req)
	key := req.URL.Scheme + "://" + addr
	for attempt := 0; ; attempt++ {
		pc, err := c.get(req.Context(), key, req.URL.Scheme, addr, req.URL.Hostname())
		if err != nil {
			return nil, err
		}
		resp, err := pc.roundTrip(req)
		if err == nil {
			return resp, nil
		}
		// A reused connection that failed before the upstream answered a
		// byte: most likely closed by the upstream just as it was taken.
		// A request that may be sent twice is sent once more, on a new
		// connection; others (a tool call the upstream may have started)
		// fail, as with net/http.
		var stale staleError
		if attempt > 0 || !pc.reused || !errors.As(err, &stale) || !replayable(req) || req.Context().Err() != nil {
			return nil, err
		}
		if req.GetBody != nil {
			again := *req
			if again.Body, err = req.GetBody(); err != nil {
				return nil, err
			}
			req = &again
		}
	}
}

type replayableKey struct{}

// Replayable marks a Session request made with the returned context as
// safe to send twice (a JSON-RPC response or notification). The session
// gives such a request an Idempotency-Key header with no value, which is
// never written to the wire: by it both ConnClient and net/http's
// Transport send the request once more when a reused connection fails
// before any answer.
func Replayable(ctx context.Context) context.Context {
	return context.WithValue(ctx, replayableKey{}, true)
}

// idempotencyKey is the header by which net/http's Transport, and so
// ConnClient, tells a request it may send twice.
const idempotencyKey = "Idempotency-Key"

// replayable reports whether req may be sent again: an idempotent method,
// or an Idempotency-Key header; and a body that can be read again.
func replayable(req *http.Request) bool {
	if req.Body != nil && req.Body != http.NoBody && req.GetBody == nil {
		return false
	}
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodDelete:
		return true
	}
	_, marked := req.Header[idempotencyKey]
	return marked
}

// get returns an idle connection to key that still looks open, or dials a
// new one.
func (c *ConnClient) get(ctx context.Context, key, scheme, addr, host string) (*conn, error) {
	now := time.Now()
	for {
		c.mu.Lock()
		list := c.idle[key]
		if len(list) == 0 {
			c.mu.Unlock()
			break
		}
		pc := list[len(list)-1]
		list[len(list)-1] = nil
		c.idle[key] = list[:len(list)-1]
		c.mu.Unlock()
		if now.Sub(pc.idleSince) < c.opts.IdleTimeout && pc.reusable() {
			pc.reused = true
			return pc, nil
		}
		pc.nc.Close()
	}
	return c.dial(ctx, key, scheme, addr, host)
}

func (c *ConnClient) dial(ctx context.Context, key, scheme, addr, host string) (*conn, error) {
	dial := c.opts.Dial
	if dial == nil {
		dial = (&net.Dialer{Timeout: c.opts.DialTimeout, KeepAlive: 30 * time.Second}).DialContext
	}
	nc, err := dial(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	raw := nc
	if scheme == "https" {
		cfg := &tls.Config{}
		if c.opts.TLSConfig != nil {
			cfg = c.opts.TLSConfig.Clone()
		}
		if cfg.ServerName == "" {
			cfg.ServerName = host
		}
		cfg.NextProtos = []string{"http/1.1"}
		tc := tls.Client(nc, cfg)
		hctx, cancel := context.WithTimeout(ctx, c.opts.TLSHandshakeTimeout)
		err := tc.HandshakeContext(hctx)
		cancel()
		if err != nil {
			nc.Close()
			return nil, fmt.Errorf("TLS handshake with %s: %w", addr, err)
		}
		nc = tc
	}
	pc := &conn{client: c, key: key, scheme: scheme, addr: addr, host: host, nc: nc, raw: raw, tls: scheme == "https"}
	if sc, ok := raw.(syscall.Conn); ok && canPeek && scheme != "https" {
		pc.rc, _ = sc.SyscallConn()
	}
	pc.lim = limitedConn{Conn: nc, n: -1}
	pc.br = bufio.NewReaderSize(&pc.lim, c.opts.BufferSize)
	return pc, nil
}

// put returns a connection whose answer was read to its end to the pool,
// and closes the pool's connections of that upstream idle for too long.
func (c *ConnClient) put(pc *conn) {
	now := time.Now()
	pc.idleSince, pc.reused = now, false
	var expired []*conn
	key := pc.key
	c.mu.Lock()
	list := c.idle[key]
	for len(list) > 0 && now.Sub(list[0].idleSince) >= c.opts.IdleTimeout {
		expired = append(expired, list[0])
		list[0] = nil
		list = list[1:]
	}
	if len(list) < c.opts.MaxIdlePerHost {
		list, pc = append(list, pc), nil
	}
	c.idle[key] = list
	c.mu.Unlock()
	if pc != nil {
		pc.nc.Close()
	}
	for _, e := range expired {
		e.nc.Close()
	}
}

// conn is one upstream connection, used by one request at a time.
type conn struct {
	client    *ConnClient
	key       string
	scheme    string // of the upstream, to dial a spare (see spare.go)
	addr      string
	host      string
	nc        net.Conn // what requests are written to (TLS, or raw)
	raw       net.Conn // the TCP connection
	tls       bool
	lim       limitedConn
	br        *bufio.Reader
	rc        syscall.RawConn // of raw, over plain TCP where canPeek; else nil (see body.CanWait)
	reused    bool            // taken from the pool for this request
	idleSince time.Time
}

// staleError is a failure on a reused connection before the upstream sent
// a byte of its answer.
type staleError struct{ err error }

func (e staleError) Error() string { return e.err.Error() }
func (e staleError) Unwrap() error { return e.err }

var writerPool = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 1<<10) }}

// roundTrip writes req and reads the response's headers. On failure the
// connection is closed.
func (pc *conn) roundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	stop := context.AfterFunc(ctx, func() { pc.nc.Close() })
	fail := func(err error, read bool) (*http.Response, error) {
		stop()
		pc.nc.Close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if !read && pc.reused {
			return nil, staleError{err}
		}
		return nil, err
	}
	bw := writerPool.Get().(*bufio.Writer)
	bw.Reset(pc.nc)
	err := req.Write(bw)
	if err == nil {
		err = bw.Flush()
	}
	bw.Reset(nil)
	writerPool.Put(bw)
	if err != nil {
		return fail(err, false)
	}
	trace := httptrace.ContextClientTrace(ctx)
	if trace != nil && trace.WroteRequest != nil {
		trace.WroteRequest(httptrace.WroteRequestInfo{})
	}
	pc.lim.n, pc.lim.read = int64(pc.client.opts.MaxHeaderBytes), 0
	if trace != nil && trace.GotFirstResponseByte != nil {
		if _, err := pc.br.Peek(1); err == nil {
			trace.GotFirstResponseByte()
		}
	}
	resp, err := http.ReadResponse(pc.br, req)
	for err == nil && resp.StatusCode >= 100 && resp.StatusCode < 200 && resp.StatusCode != http.StatusSwitchingProtocols {
		resp, err = http.ReadResponse(pc.br, req) // skip informational answers
	}
	read := pc.lim.read > 0
	pc.lim.n = -1
	if err != nil {
		if errors.Is(err, errHeaderTooLarge) {
			err = fmt.Errorf("upstream response headers exceed %d bytes", pc.client.opts.MaxHeaderBytes)
		}
		return fail(err, read)
	}
	reuse := !resp.Close && resp.ProtoAtLeast(1, 1)
	if resp.Body == http.NoBody {
		// Nothing more to read (a 202, a 204): the connection is free now.
		pc.release(stop, reuse)
		return resp, nil
	}
	resp.Body = &body{rc: resp.Body, pc: pc, ctx: ctx, stop: stop, reuse: reuse}
	return resp, nil
}

// reusable reports whether an idle connection still looks open: nothing
// left unread, and (over plain TCP) no end of stream from the upstream.
func (pc *conn) reusable() bool {
	if pc.br.Buffered() > 0 {
		return false
	}
	if pc.tls {
		// TLS records (session tickets) may be waiting: only a request
		// tells. A failure before any answer is retried (staleError).
		return true
	}
	return peerOpen(pc.raw)
}

// body is a response body being read on a ConnClient connection.
type body struct {
	rc    io.ReadCloser
	pc    *conn
	ctx   context.Context
	stop  func() bool // detaches the connection from ctx
	reuse bool        // the connection may carry another request after the end

	waited bool // WaitReadable has just waited (only the reading goroutine uses it)

	mu      sync.Mutex
	reading bool
	done    bool // the end was read, or Close or Detach called: the connection is no longer the body's
}

var errBodyClosed = errors.New("body closed")

func (b *body) Read(p []byte) (int, error) {
	b.mu.Lock()
	if b.done {
		b.mu.Unlock()
		return 0, errBodyClosed
	}
	b.reading = true
	b.mu.Unlock()
	n, err := b.rc.Read(p)
	b.mu.Lock()
	b.reading = false
	closed := b.done
	if err != nil {
		b.done = true
	}
	b.mu.Unlock()
	switch {
	case err == nil || closed:
		// Close ran meanwhile, and released the connection.
	case errors.Is(err, io.EOF):
		b.release(b.reuse)
	default:
		b.release(false)
		if cerr := b.ctx.Err(); cerr != nil {
			err = cerr
		}
	}
	return n, err
}

// WaitReadable blocks until the connection has something to read (or its
// end, or it is closed); it returns at once where it cannot tell (see
// CanWait) or when the connection's buffer holds bytes. It reads nothing.
//
// A reader that waits here rather than in Read (see WouldBlock) waits with
// a shallow stack: a wait deep in the read path (the chunked body, the
// buffered connection, the SSE reader) holds a stack of 8 KiB, and a
// parked call holds two such waits for minutes.
func (b *body) WaitReadable() {
	if !b.CanWait() {
		return
	}
	b.mu.Lock()
	if b.done || b.reading {
		b.mu.Unlock()
		return
	}
	// As for a Read: Close now closes the connection, which ends the
	// wait, rather than reading from it.
	b.reading = true
	b.mu.Unlock()
	if b.pc.br.Buffered() == 0 {
		b.pc.rc.Read(readable) // an error (closed, deadline) ends the wait too
	}
	b.waited = true
	b.mu.Lock()
	b.reading = false
	b.mu.Unlock()
}

// readable is a RawConn.Read callback: true (done) when the socket has
// bytes or its end, false (wait for it) when a read would block.
func readable(fd uintptr) bool { return !peekOpen(fd) }

// WouldBlock reports whether a Read now would wait for the upstream: the
// connection's buffer is empty and so is the socket. It reports false
// where it cannot tell (see CanWait), once the answer is over, and on the
// first call after WaitReadable (which has just looked).
func (b *body) WouldBlock() bool {
	if !b.CanWait() {
		return false
	}
	if b.waited {
		b.waited = false
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.done || b.pc.br.Buffered() > 0 {
		return false
	}
	open := false
	if err := b.pc.rc.Control(func(fd uintptr) { open = peekOpen(fd) }); err != nil {
		return false
	}
	return open
}

// CanWait reports whether WaitReadable can wait and WouldBlock can tell: a
// plain TCP connection on a system where the socket can be peeked at.
func (b *body) CanWait() bool { return b.pc.rc != nil }

// Close releases the connection: back to the pool when the rest of the
// answer has already been received, closed otherwise. A Read blocked in
// another goroutine returns at once.
func (b *body) Close() error {
	b.mu.Lock()
	if b.done {
		b.mu.Unlock()
		return nil
	}
	b.done = true
	reading := b.reading
	b.mu.Unlock()
	reuse := !reading && b.reuse && b.drain(time.Now())
	b.release(reuse)
	if !reuse && b.reuse {
		// A keep-alive connection let go mid-answer (a parked call's
		// stream): the next request would have to dial.
		b.pc.client.spare(b.pc)
	}
	return nil
}

// Detach prepares ending the answer early, once the caller has what it
// needs (the final message of an SSE stream, which the upstream ends right
// after): from now on neither the request's context nor Close touches the
// connection, and the caller must call DrainWithin. It reports false when
// the connection cannot serve another request anyway (it is then closed).
func (b *body) Detach() bool {
	b.mu.Lock()
	if b.done || b.reading {
		b.mu.Unlock()
		return false
	}
	b.done = true
	b.mu.Unlock()
	if !b.reuse || !b.stop() {
		b.release(false)
		return false
	}
	return true
}

// DrainWithin reads the rest of a detached answer for up to d, then
// returns the connection to the pool if the end came, or closes it.
func (b *body) DrainWithin(d time.Duration) {
	if b.drain(time.Now().Add(d)) {
		b.pc.client.put(b.pc)
		return
	}
	b.pc.nc.Close()
}

// drain reads the rest of the answer until deadline and reports whether
// its end came; a deadline already past reads only what is buffered.
func (b *body) drain(deadline time.Time) bool {
	if err := b.pc.nc.SetReadDeadline(deadline); err != nil {
		return false
	}
	var buf [512]byte
	for total := 0; total < 64<<10; {
		n, err := b.rc.Read(buf[:])
		total += n
		if errors.Is(err, io.EOF) {
			return b.pc.nc.SetReadDeadline(time.Time{}) == nil
		}
		if err != nil {
			return false
		}
	}
	return false
}

func (b *body) release(reuse bool) { b.pc.release(b.stop, reuse) }

// release ends the connection's use by a request: back to the pool if it
// may carry another and the request's context has not closed it (stop
// detaches it from the context), closed otherwise.
func (pc *conn) release(stop func() bool, reuse bool) {
	if reuse && stop() {
		pc.client.put(pc)
		return
	}
	stop()
	pc.nc.Close()
}

// limitedConn bounds the bytes read while n ≥ 0 (the response headers), and
// counts them.
type limitedConn struct {
	net.Conn
	n    int64 // < 0: no bound
	read int64
}

var errHeaderTooLarge = errors.New("response headers too large")

func (l *limitedConn) Read(p []byte) (int, error) {
	if l.n == 0 {
		return 0, errHeaderTooLarge
	}
	if l.n > 0 && int64(len(p)) > l.n {
		p = p[:l.n]
	}
	n, err := l.Conn.Read(p)
	l.read += int64(n)
	if l.n > 0 {
		l.n -= int64(n)
	}
	return n, err
}

// hostPort is req's upstream address with its port.
func hostPort(req *http.Request) string {
	host, port := req.URL.Hostname(), req.URL.Port()
	if port == "" {
		port = "80"
		if req.URL.Scheme == "https" {
			port = "443"
		}
	}
	return net.JoinHostPort(host, port)
}

// peerOpen reports whether a TCP connection has received neither data nor
// the peer's end of stream, without blocking.
func peerOpen(nc net.Conn) bool {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return true
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	open := true
	if err := rc.Read(func(fd uintptr) bool {
		open = peekOpen(fd)
		return true
	}); err != nil {
		return false
	}
	return open
}
