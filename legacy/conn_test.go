package legacy

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// countingServer is an httptest server that counts the connections it
// accepted.
func countingServer(t *testing.T, h http.HandlerFunc) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, &conns
}

// streamServer answers /x at once and any other path with an SSE stream
// held open until the client goes.
func streamServer(t *testing.T) (url string, conns func() int32) {
	srv, n := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/x" {
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	return srv.URL, n.Load
}

func post(t *testing.T, c *ConnClient, ctx context.Context, url, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("POST: %v", err)
	}
	return resp
}

func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("reading body: %v", err)
	}
	return string(b)
}

func TestConnClientReusesConnections(t *testing.T) {
	srv, conns := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		switch r.URL.Path {
		case "/accepted":
			w.WriteHeader(http.StatusAccepted)
		default:
			fmt.Fprintf(w, "echo %s", b)
		}
	})
	c := NewConnClient(ConnOptions{})
	for i := range 5 {
		if got := readAll(t, post(t, c, context.Background(), srv.URL, fmt.Sprint(i))); got != fmt.Sprint("echo ", i) {
			t.Fatalf("answer %q", got)
		}
		resp := post(t, c, context.Background(), srv.URL+"/accepted", "{}")
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("status %d", resp.StatusCode)
		}
		resp.Body.Close()
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("%d connections for 10 sequential requests, want 1", n)
	}
}

// An SSE answer whose caller stops after the final event (Detach, then
// DrainWithin) gives its connection back once the upstream ends the stream.
func TestConnClientDrainsEndedStream(t *testing.T) {
	srv, conns := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: one\n\n")
		w.(http.Flusher).Flush()
		time.Sleep(20 * time.Millisecond) // the end arrives after the event
	})
	c := NewConnClient(ConnOptions{})
	for range 3 {
		resp := post(t, c, context.Background(), srv.URL, "{}")
		buf := make([]byte, len("data: one\n\n"))
		if _, err := io.ReadFull(resp.Body, buf); err != nil {
			t.Fatal(err)
		}
		d := resp.Body.(drainer)
		if !d.Detach() {
			t.Fatal("Detach refused a keep-alive stream")
		}
		resp.Body.Close() // does nothing after Detach
		d.DrainWithin(time.Second)
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("%d connections, want 1", n)
	}
}

// Closing a body that is still open upstream closes its connection, also
// while another goroutine is blocked reading it.
func TestConnClientCloseOpenStream(t *testing.T) {
	url, conns := streamServer(t)
	c := NewConnClient(ConnOptions{})
	resp := post(t, c, context.Background(), url, "{}")
	readErr := make(chan error, 1)
	go func() {
		_, err := resp.Body.Read(make([]byte, 10))
		readErr <- err
	}()
	time.Sleep(20 * time.Millisecond)
	resp.Body.Close()
	select {
	case err := <-readErr:
		if err == nil {
			t.Fatal("Read returned no error after Close")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Read still blocked after Close")
	}
	readAll(t, post(t, c, context.Background(), url+"/x", "{}"))
	if n := conns(); n != 2 {
		t.Fatalf("%d connections, want 2 (the closed stream's is not reused)", n)
	}
}

func TestConnClientContextCancelsRead(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	srv, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		<-release
	})
	ctx, cancel := context.WithCancel(context.Background())
	resp := post(t, NewConnClient(ConnOptions{}), ctx, srv.URL, "{}")
	defer resp.Body.Close()
	time.AfterFunc(20*time.Millisecond, cancel)
	_, err := resp.Body.Read(make([]byte, 10))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Read error %v, want context.Canceled", err)
	}
}

// An idle connection the upstream has closed is not used again.
func TestConnClientSkipsClosedIdleConnection(t *testing.T) {
	srv, conns := countingServer(t, func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") })
	c := NewConnClient(ConnOptions{})
	readAll(t, post(t, c, context.Background(), srv.URL, "{}"))
	srv.CloseClientConnections()
	time.Sleep(20 * time.Millisecond)
	if got := readAll(t, post(t, c, context.Background(), srv.URL, "{}")); got != "ok" {
		t.Fatalf("answer %q", got)
	}
	if n := conns.Load(); n != 2 {
		t.Fatalf("%d connections, want 2", n)
	}
}

// A request that meets a reused connection closed before any answer (the
// upstream closed it as the request went out) is sent again, body and all,
// on a new connection — when it may be sent twice (an Idempotency-Key
// header, as net/http has it); a request the upstream may have started
// fails instead.
func TestConnClientResendsOnStaleConnection(t *testing.T) {
	for _, marked := range []bool{true, false} {
		t.Run(fmt.Sprint("replayable ", marked), func(t *testing.T) {
			url, bodies := closeSecondRequest(t)
			c := NewConnClient(ConnOptions{})
			readAll(t, post(t, c, context.Background(), url, "first"))
			req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader("second"))
			if marked {
				req.Header[idempotencyKey] = nil
			}
			resp, err := c.Do(req)
			if !marked {
				if err == nil {
					t.Fatal("a request that may not be sent twice was sent again")
				}
				if a, b := <-bodies, len(bodies); a != "first" || b != 0 {
					t.Fatalf("upstream got %q and %d more", a, b)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := readAll(t, resp); got != "ok" {
				t.Fatalf("answer %q", got)
			}
			if a, b := <-bodies, <-bodies; a != "first" || b != "second" {
				t.Fatalf("upstream got %q then %q", a, b)
			}
		})
	}
}

// A session's answers and notifications (Replayable) are sent again over
// such a connection by either of its clients, ConnClient and net/http's
// Transport, and the marker never reaches the upstream; its requests are
// not sent again.
func TestSessionResendsAnswersOnStaleConnection(t *testing.T) {
	clients := map[string]func() Doer{
		"ConnClient": func() Doer { return NewConnClient(ConnOptions{}) },
		"net/http": func() Doer {
			tr := &http.Transport{}
			t.Cleanup(tr.CloseIdleConnections)
			return &http.Client{Transport: tr}
		},
	}
	for name, client := range clients {
		t.Run(name, func(t *testing.T) {
			url, bodies := closeSecondRequest(t)
			s := &Session{URL: url, ID: "s1", client: client()}
			ctx := context.Background()
			if err := s.Notify(ctx, "first", nil); err != nil {
				t.Fatal(err)
			}
			if err := s.Respond(ctx, json.RawMessage(`7`), []byte(`{"action":"accept"}`), nil); err != nil {
				t.Fatalf("the answer was not sent again: %v", err)
			}
			if a, b := <-bodies, <-bodies; !strings.Contains(a, `"first"`) || !strings.Contains(b, `"id":7`) || strings.Contains(a+b, "idempotency") {
				t.Fatalf("upstream got %q then %q", a, b)
			}

			url, bodies = closeSecondRequest(t)
			s = &Session{URL: url, ID: "s1", client: client()}
			if err := s.Notify(ctx, "first", nil); err != nil {
				t.Fatal(err)
			}
			if resp, err := s.post(ctx, []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call"}`)); err == nil {
				resp.Body.Close()
				t.Fatal("a request was sent again")
			}
			if a, b := <-bodies, len(bodies); !strings.Contains(a, `"first"`) || b != 0 {
				t.Fatalf("upstream got %q and %d more", a, b)
			}
		})
	}
}

// closeSecondRequest is a raw HTTP/1.1 server whose first connection
// answers one request, then reads the second and closes without answering;
// later connections answer everything. It reports the bodies it answered,
// marked when a request carried an Idempotency-Key header.
func closeSecondRequest(t *testing.T) (string, <-chan string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	bodies := make(chan string, 4)
	go func() {
		for n := 0; ; n++ {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			go func(first bool) {
				defer nc.Close()
				br := bufio.NewReader(nc)
				for i := 0; ; i++ {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					b, _ := io.ReadAll(req.Body)
					if _, ok := req.Header[idempotencyKey]; ok {
						b = append(b, " +idempotency-key"...)
					}
					if first && i == 1 {
						return // the second request on the first connection: close, answer nothing
					}
					bodies <- string(b)
					fmt.Fprintf(nc, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
				}
			}(n == 0)
		}
	}()
	return "http://" + ln.Addr().String() + "/", bodies
}

func TestConnClientBoundsHeaders(t *testing.T) {
	srv, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Big", strings.Repeat("a", 4000))
		fmt.Fprint(w, "ok")
	})
	req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	_, err := NewConnClient(ConnOptions{MaxHeaderBytes: 1000}).Do(req)
	if err == nil || !strings.Contains(err.Error(), "exceed 1000 bytes") {
		t.Fatalf("error %v, want the header bound", err)
	}
}

func TestConnClientTLS(t *testing.T) {
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil {
			t.Error("not over TLS")
		}
		fmt.Fprint(w, "secret")
	}))
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			conns.Add(1)
		}
	}
	srv.StartTLS()
	defer srv.Close()
	cfg := srv.Client().Transport.(*http.Transport).TLSClientConfig
	c := NewConnClient(ConnOptions{TLSConfig: cfg})
	for range 3 {
		if got := readAll(t, post(t, c, context.Background(), srv.URL, "{}")); got != "secret" {
			t.Fatalf("answer %q", got)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("%d connections, want 1", n)
	}
	// Without the test CA the handshake fails, and says so.
	req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	if _, err := NewConnClient(ConnOptions{TLSConfig: &tls.Config{}}).Do(req); err == nil || !strings.Contains(err.Error(), "TLS handshake") {
		t.Fatalf("error %v, want a TLS handshake failure", err)
	}
}

// The client speaks HTTP/1.1 chunked requests too (a body of unknown
// length).
func TestConnClientChunkedRequest(t *testing.T) {
	srv, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Write(bytes.ToUpper(b))
	})
	req, _ := http.NewRequest(http.MethodPost, srv.URL, io.MultiReader(strings.NewReader("ab"), strings.NewReader("cd")))
	resp, err := NewConnClient(ConnOptions{}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, resp); got != "ABCD" {
		t.Fatalf("answer %q", got)
	}
}

// TestConnClientRoundTripper: as an http.Client's transport, a ConnClient
// tells a client trace of the answer's first byte (a "100 Continue"
// included, which it skips), and leaves the request as it was.
func TestConnClientRoundTripper(t *testing.T) {
	srv, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body) // answers 100 Continue to an Expect
		fmt.Fprintf(w, "got %s", b)
	})
	c := NewConnClient(ConnOptions{})
	defer c.CloseIdleConnections()
	first := 0
	ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{GotFirstResponseByte: func() { first++ }})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, strings.NewReader("hi"))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Expect", "100-continue")
	body := req.Body
	resp, err := (&http.Client{Transport: c}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, resp); resp.StatusCode != http.StatusOK || got != "got hi" {
		t.Fatalf("%d %q", resp.StatusCode, got)
	}
	if first != 1 || req.Body != body {
		t.Fatalf("first byte told %d times (want 1); request body replaced: %v", first, req.Body != body)
	}
}
