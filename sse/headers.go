package sse

import "net/http"

// SetHeaders sets the response headers of an event stream on h:
// Content-Type: text/event-stream, Cache-Control: no-cache, and
// X-Accel-Buffering: no (which stops nginx-style proxies from buffering).
// The caller still writes the status code.
func SetHeaders(h http.Header) {
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
}
