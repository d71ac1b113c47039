// TEMPORARY: the in-process client the multi-turn face still uses until
// it moves under caddymodule/face (which has its own).
package caddymodule

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/caddymodule/face"
	"io"
	"mime"
	"net/http"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/tidwall/gjson"
	"go.uber.org/zap"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/sse"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/seal"
)

// This file makes a saga's tool call: a modern tools/call (or its retry)
// built by the gateway and served by its own dispatch into a recording
// ResponseWriter, and the answer mapped onto the saga's.

// sagaCall is one tool call of a saga: the first (no responses, no state)
// or a retry. The multi-turn face makes its calls of it.
type sagaCall struct {
	name      string
	args      []byte
	responses map[string]json.RawMessage
	state     string
}

// innerCallParams are an internal tools/call's params, built from structs
// (the JSON rule); Meta is the face's _meta.
type innerCallParams struct {
	Name           string                     `json:"name"`
	Arguments      json.RawMessage            `json:"arguments,omitempty"`
	InputResponses map[string]json.RawMessage `json:"inputResponses,omitempty"`
	RequestState   string                     `json:"requestState,omitempty"`
	Meta           any                        `json:"_meta"`
}

// callParams are the params of the tools/call that makes (or retries) c,
// with meta as their _meta.
func (c sagaCall) callParams(meta any) innerCallParams {
	p := innerCallParams{Name: c.name, InputResponses: c.responses, RequestState: c.state, Meta: meta}
	if len(c.args) > 0 {
		p.Arguments = c.args
	}
	return p
}

// sagaCallID is the id of the internal tools/call.
var sagaCallID = json.RawMessage(`1`)

// innerServe serves an internal request: h.dispatch, or a cell the caller
// chose.
type innerServe func(w http.ResponseWriter, in *http.Request, body *[]byte) error

// innerToolCall makes a modern tools/call of the tool name with params,
// built by the gateway on r's behalf (r's principal, authorization and
// origin; none of its MCP headers), served by serve into a recording
// ResponseWriter. It returns the HTTP status and the JSON-RPC response to
// it. The saga and multi-turn SSE faces make their calls so.
func (h *Handler) innerToolCall(r *http.Request, name string, params any, serve innerServe) (int, gjson.Result, *jsonrpc.RPCError) {
	rec := &sagaRecorder{header: make(http.Header)}
	in, failed := h.innerRequest(r.Context(), r, "tools/call", name, params, serve, rec)
	if failed != 0 {
		return 0, gjson.Result{}, jsonrpc.Errorf(failed, jsonrpc.InternalError, "Internal error: the tool call failed (HTTP %d; the gateway's log says why)", failed)
	}
	inner, outer := routeOf(in), routeOf(r)
	outer.cell, outer.up, outer.owner = inner.cell, inner.up, inner.owner
	answer, ok := rec.response()
	if !ok {
		return 0, gjson.Result{}, jsonrpc.Errorf(http.StatusBadGateway, jsonrpc.InternalError,
			"Internal error: the tool call got no JSON-RPC response (HTTP %d)", rec.statusCode())
	}
	return rec.statusCode(), answer, nil
}

// innerRequest makes the modern request method with params, built by the
// gateway on r's behalf (r's principal, authorization and origin; none of
// its MCP, conditional or encoding headers), with ctx as its life and name
// as its Mcp-Name ("" for none), served by serve into rec. It returns the
// request served, or, when it could not be served, the HTTP status to
// report: why is logged, not returned (its text may name an upstream).
func (h *Handler) innerRequest(ctx context.Context, r *http.Request, method, name string, params any, serve innerServe, rec http.ResponseWriter) (*http.Request, int) {
	body, err := jsonrpc.Marshal(jsonrpc.NewRequest(sagaCallID, method, params))
	if err != nil {
		h.logger.Debug("internal request not encoded", zap.String("method", method), zap.Error(err))
		return nil, http.StatusInternalServerError
	}
	in, _ := withRoute(r.Clone(ctx))
	in.Method = http.MethodPost
	in.Body = io.NopCloser(bytes.NewReader(body))
	in.ContentLength = int64(len(body))
	for _, hdr := range []string{seal.ForwardedHeader, "Mcp-Session-Id", "Last-Event-ID", translate.HeaderMethod, translate.HeaderName,
		"If-Match", "If-None-Match", "Idempotency-Key", "Expect", "Content-Encoding"} {
		in.Header.Del(hdr)
	}
	in.Header.Set("Content-Type", "application/json")
	in.Header.Set("Accept", "application/json, text/event-stream")
	in.Header.Set(translate.HeaderProtocolVersion, translate.ModernVersion)
	in.Header.Set(translate.HeaderMethod, method)
	if name != "" {
		in.Header.Set(translate.HeaderName, headerValue(name))
	}
	var seen []byte
	if err := serve(rec, in, &seen); err != nil {
		h.logger.Debug("internal request failed", zap.String("method", method), zap.Error(err))
		status := http.StatusBadGateway
		if herr := (caddyhttp.HandlerError{}); errors.As(err, &herr) && herr.StatusCode != 0 {
			status = herr.StatusCode
		}
		return nil, status
	}
	return in, 0
}

// sagaRecorder is the ResponseWriter of a saga's internal tool call.
type sagaRecorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (rec *sagaRecorder) Header() http.Header { return rec.header }

func (rec *sagaRecorder) WriteHeader(status int) {
	if rec.status == 0 {
		rec.status = status
	}
}

// maxSagaAnswer bounds what a saga's tool call may answer, notifications
// included: beyond it the write fails, as to a client gone away.
const maxSagaAnswer = 64 << 20

// errSagaAnswerTooLarge fails a write beyond maxSagaAnswer.
var errSagaAnswerTooLarge = errors.New("the tool call's answer is larger than a saga holds (64 MiB)")

func (rec *sagaRecorder) Write(b []byte) (int, error) {
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	if rec.body.Len()+len(b) > maxSagaAnswer {
		return 0, errSagaAnswerTooLarge
	}
	return rec.body.Write(b)
}

// Flush is a no-op: the answer is read once the call has ended.
func (rec *sagaRecorder) Flush() {}

func (rec *sagaRecorder) statusCode() int {
	if rec.status == 0 {
		return http.StatusOK
	}
	return rec.status
}

// response finds the JSON-RPC response to the internal call in the
// recorded answer: the JSON body, or the event of an SSE stream carrying
// it (the notifications before it are dropped: a saga has no stream).
func (rec *sagaRecorder) response() (gjson.Result, bool) {
	isResponse := func(b []byte) (gjson.Result, bool) {
		if jsonrpc.ValidJSON(b) != nil {
			return gjson.Result{}, false
		}
		m := gjson.ParseBytes(b)
		ok := m.IsObject() && m.Get("id").Raw == string(sagaCallID) && (m.Get("result").IsObject() || m.Get("error").IsObject())
		return m, ok
	}
	mt, _, _ := mime.ParseMediaType(rec.header.Get("Content-Type"))
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

// TEMPORARY (the multi-turn face moves to caddymodule/face/... next):
// what it still shares with the faces that moved.

// rootsNone answers a roots/list with no roots.
var rootsNone = face.RootsNone

// stepKind is the input kind of method (0 for none).
func stepKind(method string) byte { return byte(face.KindOf(method)) }

// refusedStep is a sampling step the client completed with an error.
type refusedStep struct {
	id, message string
}

// samplingRefused is the result of a call ended by a sampling step's
// error.
func samplingRefused(r *refusedStep) face.Refusal { return face.SamplingRefused(r.id, r.message) }

// elicitDeclined answers an elicitation the client answered with an error.
var elicitDeclined = face.ElicitDeclined

// stepMethod is the input method of a kind.
func stepMethod(kind byte) string { return face.Kind(kind).Method() }
