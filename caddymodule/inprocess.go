package caddymodule

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
)

// inProcess is an http.RoundTripper that serves each request with serve,
// in this process, instead of sending it: the reverse bridge of a
// federated block reaches the block's merged modern endpoint through it
// (federation.go). The answer streams: its body is a pipe the handler
// writes into as it goes (a write waits until the reader took the bytes
// before), so an SSE answer reaches the bridge event by event. Closing the
// body, or cancelling the request's context, makes the handler's next
// write fail, as a client gone away does.
type inProcess struct {
	serve func(w http.ResponseWriter, r *http.Request)
}

func (t inProcess) RoundTrip(r *http.Request) (*http.Response, error) {
	pr, pw := io.Pipe()
	w := &pipeWriter{header: make(http.Header), pw: pw, ready: make(chan struct{})}
	go func() {
		defer func() {
			if p := recover(); p != nil {
				if p != http.ErrAbortHandler {
					pw.CloseWithError(fmt.Errorf("in-process request: %v", p))
				} else {
					pw.CloseWithError(errAborted)
				}
			}
			w.commit(http.StatusOK)
			pw.Close()
		}()
		t.serve(w, r)
	}()
	select {
	case <-w.ready:
	case <-r.Context().Done():
		pr.CloseWithError(r.Context().Err())
		return nil, r.Context().Err()
	}
	return &http.Response{
		Status: fmt.Sprintf("%d %s", w.status, http.StatusText(w.status)), StatusCode: w.status,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: w.sent, Body: pr, ContentLength: -1, Request: r,
	}, nil
}

// errAborted ends the body of an answer its handler aborted midway.
var errAborted = errors.New("in-process request: the answer was aborted")

// pipeWriter is the ResponseWriter of an in-process request.
type pipeWriter struct {
	header http.Header
	sent   http.Header // the header at WriteHeader: what the response carries
	pw     *io.PipeWriter
	once   sync.Once
	ready  chan struct{} // closed at WriteHeader
	status int
}

func (w *pipeWriter) Header() http.Header { return w.header }

func (w *pipeWriter) WriteHeader(status int) { w.commit(status) }

// commit fixes the status and header once, and lets RoundTrip return.
func (w *pipeWriter) commit(status int) {
	w.once.Do(func() {
		w.status, w.sent = status, w.header.Clone()
		close(w.ready)
	})
}

func (w *pipeWriter) Write(b []byte) (int, error) {
	w.commit(http.StatusOK)
	return w.pw.Write(b)
}

// Flush commits the header: the bytes themselves go to the reader at
// once, with every write.
func (w *pipeWriter) Flush() { w.commit(http.StatusOK) }
