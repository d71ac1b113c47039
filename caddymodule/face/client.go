package face

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"mime"
	"net/http"

	"github.com/tidwall/gjson"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/sse"
)

// This file is the in-process client every face makes its modern
// requests with: the request served by the gateway into a Recorder, and
// its JSON-RPC response read back.

// RequestID is the JSON-RPC id of every internal request.
var RequestID = json.RawMessage(`1`)

// Answer is the JSON-RPC response to an internal request, and the HTTP
// status it came with.
type Answer struct {
	Status   int
	Response gjson.Result
	// Upstream is the URL of the upstream that served the request ("" when
	// none did: a refusal of the gateway's own).
	Upstream string
}

// Error is the response's error object, if any.
func (a Answer) Error() (gjson.Result, bool) {
	e := a.Response.Get("error")
	return e, e.Exists()
}

// Result is the response's result.
func (a Answer) Result() gjson.Result { return a.Response.Get("result") }

// InputRequired reports whether the result asks for input
// (resultType input_required).
func (a Answer) InputRequired() bool {
	return a.Result().Get("resultType").String() == "input_required"
}

// Failure is an internal request that got no JSON-RPC response: the
// HTTP status to report for it, and why (safe to show: no upstream
// address).
type Failure struct {
	Status int
	Detail string
}

func (f *Failure) Error() string { return f.Detail }

// Client makes a face's internal requests through its gateway.
type Client struct {
	GW Gateway
	// OnProgress, when set, gets the progress notifications of every
	// answer's stream as they come (the params of each).
	OnProgress func(params []byte)
}

// Do makes the internal request in on r's behalf, with ctx as its life,
// and returns its answer, or why there is none.
func (c Client) Do(ctx context.Context, r *http.Request, in Internal) (Answer, *Failure) {
	rec := &Recorder{onProgress: c.OnProgress}
	upstream, f := c.GW.Request(ctx, r, in, rec)
	if f != nil {
		return Answer{}, f
	}
	resp, ok := rec.Response()
	if !ok {
		if ctx.Err() != nil {
			return Answer{}, &Failure{http.StatusServiceUnavailable, "the request was stopped"}
		}
		return Answer{}, &Failure{http.StatusBadGateway, "the upstream gave no answer"}
	}
	return Answer{Status: rec.StatusCode(), Response: resp, Upstream: upstream}, nil
}

// MaxAnswer bounds what an internal request may answer, notifications
// included: beyond it the write fails, as to a client gone away.
const MaxAnswer = 64 << 20

// ErrAnswerTooLarge fails a write beyond MaxAnswer.
var ErrAnswerTooLarge = errors.New("the internal request's answer is larger than a face holds (64 MiB)")

// Recorder is the ResponseWriter of an internal request: it keeps the
// answer whole (bounded by MaxAnswer), and hands the progress
// notifications of an SSE answer to onProgress as they are written.
type Recorder struct {
	header     http.Header
	status     int
	body       bytes.Buffer
	onProgress func(params []byte)
	scanned    int // bytes of body looked at for whole events
	sse        int // 0 unknown, 1 an SSE answer, -1 not
}

// Header implements http.ResponseWriter.
func (rec *Recorder) Header() http.Header {
	if rec.header == nil {
		rec.header = make(http.Header)
	}
	return rec.header
}

// WriteHeader implements http.ResponseWriter.
func (rec *Recorder) WriteHeader(status int) {
	if rec.status == 0 {
		rec.status = status
	}
}

// Write implements http.ResponseWriter.
func (rec *Recorder) Write(b []byte) (int, error) {
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	if rec.body.Len()+len(b) > MaxAnswer {
		return 0, ErrAnswerTooLarge
	}
	n, err := rec.body.Write(b)
	if rec.sse == 0 {
		rec.sse = -1
		if mt, _, _ := mime.ParseMediaType(rec.Header().Get("Content-Type")); mt == "text/event-stream" {
			rec.sse = 1
		}
	}
	if rec.sse == 1 && rec.onProgress != nil {
		rec.scan()
	}
	return n, err
}

// Flush is a no-op: the answer is read once the request has ended.
func (rec *Recorder) Flush() {}

// StatusCode is the answer's HTTP status.
func (rec *Recorder) StatusCode() int {
	if rec.status == 0 {
		return http.StatusOK
	}
	return rec.status
}

// scan reads the whole events written since the last scan.
func (rec *Recorder) scan() {
	body := rec.body.Bytes()
	for {
		rest := body[rec.scanned:]
		end, sep := bytes.Index(rest, []byte("\n\n")), 2
		if i := bytes.Index(rest, []byte("\r\n\r\n")); i >= 0 && (end < 0 || i < end) {
			end, sep = i, 4
		}
		if end < 0 {
			return
		}
		rec.event(rest[:end])
		rec.scanned += end + sep
	}
}

// event handles one SSE event's lines: a progress notification's params
// go to onProgress.
func (rec *Recorder) event(ev []byte) {
	var data []byte
	for line := range bytes.SplitSeq(ev, []byte("\n")) {
		line = bytes.TrimSuffix(line, []byte("\r"))
		if v, ok := bytes.CutPrefix(line, []byte("data:")); ok {
			if len(data) > 0 {
				data = append(data, '\n')
			}
			data = append(data, bytes.TrimPrefix(v, []byte(" "))...)
		}
	}
	if len(data) == 0 || jsonrpc.ValidJSON(data) != nil {
		return
	}
	m := gjson.ParseBytes(data)
	if m.Get("method").String() == "notifications/progress" && m.Get("params").IsObject() {
		rec.onProgress([]byte(m.Get("params").Raw))
	}
}

// Response finds the JSON-RPC response to the internal request in the
// recorded answer: the JSON body, or the event of an SSE stream carrying
// it (the notifications before it are dropped).
func (rec *Recorder) Response() (gjson.Result, bool) {
	isResponse := func(b []byte) (gjson.Result, bool) {
		if jsonrpc.ValidJSON(b) != nil {
			return gjson.Result{}, false
		}
		m := gjson.ParseBytes(b)
		ok := m.IsObject() && m.Get("id").Raw == string(RequestID) && (m.Get("result").IsObject() || m.Get("error").IsObject())
		return m, ok
	}
	mt, _, _ := mime.ParseMediaType(rec.Header().Get("Content-Type"))
	if mt != "text/event-stream" {
		return isResponse(bytes.TrimSpace(rec.body.Bytes()))
	}
	sr := sse.NewReader(bytes.NewReader(rec.body.Bytes()), sse.DefaultMaxEventBytes)
	defer sr.Release()
	for {
		ev, err := sr.Next()
		if err != nil {
			return gjson.Result{}, false
		}
		if m, ok := isResponse(ev.Data); ok {
			return m, true
		}
	}
}

// StatusWriter remembers the status of the answer written through it, for
// the log line of a request.
type StatusWriter struct {
	http.ResponseWriter
	// Status is the answer's HTTP status (0 until one is written).
	Status int
}

// WriteHeader implements http.ResponseWriter.
func (w *StatusWriter) WriteHeader(code int) {
	if w.Status == 0 {
		w.Status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

// Write implements http.ResponseWriter.
func (w *StatusWriter) Write(b []byte) (int, error) {
	if w.Status == 0 {
		w.Status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the writer underneath (its
// Flush).
func (w *StatusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
