package caddymodule

import (
	"net/http"
	"time"
)

// deadlineWriter bounds each write to the client by timeout (write_timeout),
// so that a client that stops reading fails the write instead of blocking it
// for good. Event streams get the same from sse.Writer.WriteTimeout.
type deadlineWriter struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
}

func newDeadlineWriter(w http.ResponseWriter, timeout time.Duration) deadlineWriter {
	return deadlineWriter{w: w, rc: http.NewResponseController(w), timeout: timeout}
}

func (d deadlineWriter) Write(p []byte) (int, error) {
	if d.timeout > 0 && d.rc.SetWriteDeadline(time.Now().Add(d.timeout)) == nil {
		defer func() { _ = d.rc.SetWriteDeadline(time.Time{}) }()
	}
	return d.w.Write(p)
}
