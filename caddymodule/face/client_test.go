package face

import (
	"net/http"
	"testing"
)

// newRecorder is a Recorder whose answer has the Content-Type ct.
func newRecorder(ct string) *Recorder {
	rec := &Recorder{}
	if ct != "" {
		rec.Header().Set("Content-Type", ct)
	}
	return rec
}

// TestRecorder: the response to the internal call is found in a JSON
// answer and in an SSE stream after notifications; anything else is none.
func TestRecorder(t *testing.T) {
	rec := newRecorder("text/event-stream")
	_, _ = rec.Write([]byte("event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{}}\n\n" +
		"id: 7\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"content\":[]}}\n\n"))
	if m, ok := rec.Response(); !ok || !m.Get("result").IsObject() {
		t.Fatalf("SSE: %v %v", m, ok)
	}
	rec = newRecorder("application/json")
	rec.WriteHeader(http.StatusBadRequest)
	_, _ = rec.Write([]byte(`{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"no"}}`))
	if m, ok := rec.Response(); !ok || rec.StatusCode() != http.StatusBadRequest || m.Get("error.code").Int() != -32602 {
		t.Fatalf("JSON error: %v %v", m, ok)
	}
	for _, body := range []string{``, `{"jsonrpc":"2.0","id":2,"result":{}}`, `not json`, `{"jsonrpc":"2.0","id":1,"result":5}`} {
		rec = newRecorder("")
		_, _ = rec.Write([]byte(body))
		if _, ok := rec.Response(); ok {
			t.Errorf("%q taken as the response", body)
		}
	}
}
