package caddymodule

import (
	"bytes"
	"encoding/json"
	"mime"
	"sync"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
	"github.com/tidwall/gjson"
)

// This file carries a running call's progress to its record: the
// internal tools/call asks for progress (a progressToken in its _meta),
// the recorder of its answer watches the SSE stream for
// notifications/progress as they come, and the run keeps the last one,
// which each lease renewal writes into the record (the call resource's
// `progress`).

// restProgressToken is the progressToken of every internal tools/call:
// one call per internal request, so no two share it.
const restProgressToken = "rest"

// restCallMeta is the _meta of an internal tools/call.
type restCallMeta struct {
	sagaMeta
	ProgressToken string `json:"progressToken"`
}

// restToolCallMeta is that _meta: asking for progress.
var restToolCallMeta = restCallMeta{sagaMeta: restMeta, ProgressToken: restProgressToken}

// restProgress holds the last progress of a run.
type restProgress struct {
	mu   sync.Mutex
	last json.RawMessage
}

func (p *restProgress) set(params []byte) {
	p.mu.Lock()
	p.last = append(json.RawMessage(nil), params...)
	p.mu.Unlock()
}

func (p *restProgress) get() json.RawMessage {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.last
}

// progressRecorder is a sagaRecorder that also hands each progress
// notification of an SSE answer to onProgress, as it is written.
type progressRecorder struct {
	sagaRecorder
	onProgress func(params []byte)
	scanned    int // bytes of body looked at for whole events
	sse        int // 0 unknown, 1 an SSE answer, -1 not
}

func (rec *progressRecorder) Write(b []byte) (int, error) {
	n, err := rec.sagaRecorder.Write(b)
	if rec.sse == 0 {
		rec.sse = -1
		if mt, _, _ := mime.ParseMediaType(rec.header.Get("Content-Type")); mt == "text/event-stream" {
			rec.sse = 1
		}
	}
	if rec.sse == 1 && rec.onProgress != nil {
		rec.scan()
	}
	return n, err
}

// scan reads the whole events written since the last scan.
func (rec *progressRecorder) scan() {
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
func (rec *progressRecorder) event(ev []byte) {
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
