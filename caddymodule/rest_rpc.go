package caddymodule

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/tidwall/gjson"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
)

// This file makes the REST face's internal modern requests: built and
// served by the handler's own dispatch as the other faces' are
// (innerRequest), into a recording ResponseWriter (the saga's), and read
// back.

// restClientInfo names the gateway as the REST face's modern client.
var restClientInfo = sagaInfo{Name: "caddy-mcp-gateway-rest", Version: "1"}

// restMeta is the _meta of every internal request.
var restMeta = sagaMeta{ProtocolVersion: translate.ModernVersion, ClientInfo: restClientInfo}

// restListParams are a list request's params.
type restListParams struct {
	Cursor string   `json:"cursor,omitempty"`
	Meta   sagaMeta `json:"_meta"`
}

// restFailure is an internal request that got no JSON-RPC answer: the
// gateway's HTTP status for it and why (safe to show: no upstream
// address).
type restFailure struct {
	status int
	detail string
}

// restRPC makes the modern request method with params through the
// handler's dispatch, with the client's request r as the model (its
// principal, its headers) and ctx as its life; name is the Mcp-Name
// header's value ("" for none). It returns the HTTP status and the
// JSON-RPC response (with a result or an error), or a failure. With
// progress, the progress notifications of the answer go there as they
// come.
func (h *Handler) restRPC(ctx context.Context, r *http.Request, method, name string, params any, progress *restProgress) (int, gjson.Result, *restFailure) {
	rec := &progressRecorder{sagaRecorder: sagaRecorder{header: make(http.Header)}}
	if progress != nil {
		rec.onProgress = progress.set
	}
	if _, failed := h.innerRequest(ctx, r, method, name, params, h.dispatch, rec); failed != 0 {
		return 0, gjson.Result{}, &restFailure{failed, "the upstream request failed (the gateway's log says why)"}
	}
	answer, ok := rec.response()
	if !ok {
		if ctx.Err() != nil {
			return 0, gjson.Result{}, &restFailure{http.StatusServiceUnavailable, "the request was stopped"}
		}
		return 0, gjson.Result{}, &restFailure{http.StatusBadGateway, "the upstream gave no answer"}
	}
	return rec.statusCode(), answer, nil
}

// restErrorStatus maps a JSON-RPC error answered to an internal request
// (with the HTTP status it came with) onto the face's HTTP status.
func restErrorStatus(status int, e gjson.Result) int {
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

// restError is the `error` of a call or a problem's detail from a
// JSON-RPC error object.
type restError struct {
	Code    int64           `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}
