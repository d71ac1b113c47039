package rest

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"

	"github.com/tidwall/gjson"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/caddymodule/face"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
)

// This file makes the face's internal modern requests (face.Client), and
// maps their answers onto the face's: the _meta they carry, the HTTP
// status of a JSON-RPC error, a running call's progress.

// meta is the _meta of every internal request (clientInfo
// caddy-mcp-gateway-rest).
var meta = face.NewMeta("rest")

// progressToken is the progressToken of every internal tools/call: one
// call per internal request, so no two share it.
const progressToken = "rest"

// callMeta is the _meta of an internal tools/call: meta, asking for
// progress.
type callMeta struct {
	face.Meta
	ProgressToken string `json:"progressToken"`
}

// toolCallMeta is that _meta.
var toolCallMeta = callMeta{Meta: meta, ProgressToken: progressToken}

// listParams are a list request's params.
type listParams struct {
	Cursor string    `json:"cursor,omitempty"`
	Meta   face.Meta `json:"_meta"`
}

// rpc makes the modern request method with params through the gateway,
// with the client's request r as the model (its principal, its headers)
// and ctx as its life; name is the Mcp-Name header's value ("" for none).
// It returns the answer (a JSON-RPC response with a result or an error),
// or why there is none.
func (f *Face) rpc(ctx context.Context, r *http.Request, method, name string, params any) (face.Answer, *face.Failure) {
	return face.Client{GW: f.gw}.Do(ctx, r, face.Internal{Method: method, Name: name, Params: params})
}

// toolCall makes call (or its retry) as an internal tools/call asking
// for progress; with p, the progress notifications of the answer go
// there as they come. It returns the answer, or a *face.Failure.
func (f *Face) toolCall(ctx context.Context, r *http.Request, call face.ToolCall, p *progress) (face.Answer, error) {
	c := face.Client{GW: f.gw}
	if p != nil {
		c.OnProgress = p.set
	}
	in := call.Internal(toolCallMeta)
	// Carried over when this instance goes (carry.go): only where tasks
	// outlive their instance; otherwise hosting it as a task would cost
	// its records for nothing.
	in.Task = f.gw.Limits().DurableTasks
	a, fail := c.Do(ctx, r, in)
	if fail != nil {
		return a, fail
	}
	return a, nil
}

// errorStatus maps a JSON-RPC error answered to an internal request
// (with the HTTP status it came with) onto the face's HTTP status.
func errorStatus(status int, e gjson.Result) int {
	switch code := e.Get("code").Int(); {
	case status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable ||
		status == http.StatusGatewayTimeout || status == http.StatusRequestEntityTooLarge:
		return status
	case code == -32002 || code == jsonrpc.MethodNotFound:
		return http.StatusNotFound // resource not found; a server without the capability
	case code == jsonrpc.InvalidParams:
		return http.StatusBadRequest
	}
	return http.StatusBadGateway
}

// callError is the `error` of a call from a JSON-RPC error object.
type callError struct {
	Code    int64           `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// progress holds the last progress of a run: the internal tools/call
// asks for progress (a progressToken in its _meta), its answer's
// progress notifications come here as they are written (face.Client's
// OnProgress), and each lease renewal writes the last one into the record
// (the call resource's `progress`).
type progress struct {
	mu   sync.Mutex
	last json.RawMessage
}

func (p *progress) set(params []byte) {
	p.mu.Lock()
	p.last = append(json.RawMessage(nil), params...)
	p.mu.Unlock()
}

func (p *progress) get() json.RawMessage {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.last
}
