package caddymodule

import (
	"bytes"
	"mime"
	"net/http"

	"github.com/tidwall/gjson"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/caddymodule/face"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/federate"
)

// taskIDWriter puts the taskIds of a server's answer in the block's
// namespace (federate.WrapTaskID): a CreateTaskResult's or DetailedTask's
// (result.taskId) and a notifications/tasks' (params.taskId), in a JSON
// answer (held whole, bounded by face.MaxAnswer) or in an SSE stream
// (rewritten line by line as it passes: a message is one data line, as
// every MCP SDK and the gateway write them).
type taskIDWriter struct {
	http.ResponseWriter
	server federate.ServerName
	mode   int    // 0 not known yet, 1 SSE, -1 JSON
	held   []byte // JSON: the answer so far; SSE: a line not ended yet
	failed bool   // JSON larger than face.MaxAnswer: passed on as it is
	// asIs: the answer is the block's already, passed on as it is (the
	// owner instance's, to the block's request relayed there).
	asIs bool
}

func (w *taskIDWriter) WriteHeader(status int) {
	if w.asIs {
		w.ResponseWriter.WriteHeader(status)
		return
	}
	w.decide()
	if w.mode < 0 {
		w.Header().Del("Content-Length") // the ids grow
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *taskIDWriter) decide() {
	if w.mode != 0 {
		return
	}
	w.mode = -1
	if mt, _, _ := mime.ParseMediaType(w.Header().Get("Content-Type")); mt == "text/event-stream" {
		w.mode = 1
	}
}

func (w *taskIDWriter) Write(b []byte) (int, error) {
	if w.asIs {
		return w.ResponseWriter.Write(b)
	}
	w.decide()
	if w.mode < 0 {
		if w.failed || len(w.held)+len(b) > face.MaxAnswer {
			if !w.failed {
				w.failed = true
				if _, err := w.ResponseWriter.Write(w.held); err != nil {
					return 0, err
				}
				w.held = nil
			}
			return w.ResponseWriter.Write(b)
		}
		w.held = append(w.held, b...)
		return len(b), nil
	}
	w.held = append(w.held, b...)
	var out []byte
	_ = eachLine(&w.held, func(l []byte) error {
		out = append(out, w.line(l)...)
		return nil
	})
	if len(w.held) > face.MaxAnswer {
		out, w.held = append(out, w.held...), nil
	}
	if len(out) > 0 {
		if _, err := w.ResponseWriter.Write(out); err != nil {
			return 0, err
		}
	}
	return len(b), nil
}

// line rewrites one SSE line (with its end).
func (w *taskIDWriter) line(l []byte) []byte {
	msg, ok := sseData(l)
	if !ok || !bytes.Contains(msg, []byte(`"taskId"`)) {
		return l
	}
	out := append([]byte("data: "), w.message(msg)...)
	return append(out, l[len(bytes.TrimRight(l, "\r\n")):]...)
}

// message rewrites one JSON-RPC message.
func (w *taskIDWriter) message(msg []byte) []byte {
	if jsonrpc.ValidJSON(msg) != nil {
		return msg
	}
	for _, path := range []string{"result.taskId", "params.taskId"} {
		if id := gjson.GetBytes(msg, path); id.Type == gjson.String {
			if out, err := federate.SetString(msg, path, federate.WrapTaskID(w.server, id.Str)); err == nil {
				return out
			}
		}
	}
	return msg
}

// finish writes a held JSON answer, its taskId rewritten.
func (w *taskIDWriter) finish() {
	if w.mode < 0 && !w.failed && len(w.held) > 0 {
		_, _ = w.ResponseWriter.Write(w.message(bytes.TrimSpace(w.held)))
	}
	if w.mode > 0 && len(w.held) > 0 {
		_, _ = w.ResponseWriter.Write(w.held)
	}
	w.held = nil
}

// Flush passes a flush on (SSE: the lines written so far are out).
func (w *taskIDWriter) Flush() {
	if w.mode > 0 || w.asIs {
		_ = http.NewResponseController(w.ResponseWriter).Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (w *taskIDWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
