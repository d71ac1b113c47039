package caddymodule

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"strconv"

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
// or a retry. The REST and multi-turn faces make theirs of it too.
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

// sagaClientInfo names the gateway as the saga's modern client.
var sagaClientInfo = sagaInfo{Name: "caddy-mcp-gateway-saga", Version: "1"}

// sagaMeta is the _meta of the saga's internal requests.
type sagaMeta struct {
	ProtocolVersion    string   `json:"io.modelcontextprotocol/protocolVersion"`
	ClientCapabilities sagaCaps `json:"io.modelcontextprotocol/clientCapabilities"`
	ClientInfo         sagaInfo `json:"io.modelcontextprotocol/clientInfo"`
}

// sagaCaps are the capabilities the gateway declares for a saga client:
// its steps (elicitation, sampling), and roots, which the saga has no
// step for: the gateway answers a roots/list itself with an empty list
// (rootsNone), so that a tool that lists roots goes on rather than
// failing on a client without the capability.
type sagaCaps struct {
	Elicitation struct{} `json:"elicitation"`
	Sampling    struct{} `json:"sampling"`
	Roots       struct{} `json:"roots"`
}

type sagaInfo struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// sagaResponse is the saga's JSON-RPC answer.
type sagaResponse struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  any             `json:"result,omitempty"`
	Error   json.RawMessage `json:"error,omitempty"`
}

// sagaCallID is the id of the internal tools/call.
var sagaCallID = json.RawMessage(`1`)

// runSaga makes call, then answers the saga: the tool's result, a
// suspension, or the error. A round that asks only for roots is answered
// at once, with another retry (at most max_rounds times).
func (h *Handler) runSaga(w http.ResponseWriter, r *http.Request, id json.RawMessage, call sagaCall) error {
	for range max(h.Parking.MaxRounds, 1) {
		status, answer, rerr := h.sagaToolCall(r, call)
		if rerr != nil {
			return writeRPCError(w, id, rerr)
		}
		if e := answer.Get("error"); e.Exists() {
			return writeSagaAnswer(w, status, sagaResponse{JSONRPC: "2.0", ID: id, Error: json.RawMessage(e.Raw)})
		}
		result := answer.Get("result")
		if result.Get("resultType").String() != "input_required" {
			return writeSagaResult(w, id, json.RawMessage(result.Raw))
		}
		steps, shown, rerr := suspensionSteps(result)
		if rerr != nil {
			return writeRPCError(w, id, rerr)
		}
		state := result.Get("requestState").String()
		if len(shown) == 0 {
			// Roots only (or a bare requestState): nothing to ask.
			call.responses, call.state = nil, state
			if len(steps) > 0 {
				call.responses = make(map[string]json.RawMessage, len(steps))
				for _, s := range steps {
					call.responses[s.ID] = rootsNone
				}
			}
			continue
		}
		token, err := h.newSagaToken(r, call, state, steps)
		if err != nil {
			msg := "Internal error: the call's state does not fit in a sagaToken"
			if !errors.Is(err, seal.ErrSagaTooLarge) {
				msg = "Internal error: the sagaToken could not be made"
			}
			return writeRPCError(w, id, jsonrpc.Errorf(http.StatusBadGateway, jsonrpc.InternalError, "%s", msg))
		}
		return writeSagaResult(w, id, sagaSuspended{State: "suspended", SagaToken: token, Steps: shown})
	}
	return writeRPCError(w, id, jsonrpc.Errorf(http.StatusBadGateway, jsonrpc.InternalError,
		"Internal error: the tool asked for roots more than max_rounds times in a row"))
}

// sagaToolCall serves call through the handler's own dispatch and returns
// the HTTP status and the JSON-RPC response to it.
func (h *Handler) sagaToolCall(r *http.Request, call sagaCall) (int, gjson.Result, *jsonrpc.RPCError) {
	params := call.callParams(sagaMeta{ProtocolVersion: translate.ModernVersion, ClientInfo: sagaClientInfo})
	return h.innerToolCall(r, call.name, params, h.dispatch)
}

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

// headerValue encodes v for an Mcp-Name header: as is when it is visible
// ASCII (and space), else as a Base64 sentinel.
func headerValue(v string) string {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < 0x20 || c > 0x7e || (c == ' ' && (i == 0 || i == len(v)-1)) {
			return translate.SentinelPrefix + base64.StdEncoding.EncodeToString([]byte(v)) + translate.SentinelSuffix
		}
	}
	return v
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

// writeSagaResult answers the saga with result.
func writeSagaResult(w http.ResponseWriter, id json.RawMessage, result any) error {
	return writeSagaAnswer(w, http.StatusOK, sagaResponse{JSONRPC: "2.0", ID: id, Result: result})
}

// writeSagaAnswer writes resp with status.
func writeSagaAnswer(w http.ResponseWriter, status int, resp sagaResponse) error {
	b, err := jsonrpc.Marshal(resp)
	if err != nil {
		return writeRPCError(w, resp.ID, jsonrpc.Errorf(http.StatusInternalServerError, jsonrpc.InternalError, "Internal error: %v", err))
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
	return nil
}
