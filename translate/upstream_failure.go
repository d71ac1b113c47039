package translate

import (
	"context"
	"errors"
	"net/http"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/legacy"
)

// What a client is told when an upstream fails: a message in general terms.
// The upstream's address and the transport's words about it ("dial tcp
// 10.0.0.7:3001: connect: connection refused") are the operator's: they go
// in RPCError.Cause and Served.Cause, which the gateway logs and never sends.

// MsgUpstreamUnavailable is what a client reads when its upstream could not
// be reached or failed before answering, in every cell.
const MsgUpstreamUnavailable = "upstream MCP server unavailable"

// UpstreamFailure is the error a client gets for an upstream's failure:
// public says what happened, cause how (for the logs only).
func UpstreamFailure(public string, cause error) *jsonrpc.RPCError {
	return &jsonrpc.RPCError{HTTPStatus: http.StatusBadGateway, Code: jsonrpc.InternalError, Message: public, Cause: cause}
}

// UpstreamError is the error of a request whose upstream session could not
// be leased, or whose upstream request could not be sent.
func UpstreamError(err error) *jsonrpc.RPCError {
	switch {
	case errors.Is(err, legacy.ErrPoolFull):
		return &jsonrpc.RPCError{HTTPStatus: http.StatusServiceUnavailable, Code: jsonrpc.InternalError, Message: "too many upstream sessions; retry later"}
	case errors.Is(err, legacy.ErrPrincipalFull):
		return &jsonrpc.RPCError{HTTPStatus: http.StatusTooManyRequests, Code: jsonrpc.InternalError,
			Message: "too many upstream sessions for this principal (max_sessions_per_principal); retry when a call ends"}
	}
	return UpstreamFailure(MsgUpstreamUnavailable, err)
}

// Unopened reports whether err, from opening a new upstream session, left
// nothing behind on the upstream that matters: the connection was refused,
// or dropped before the upstream answered initialize (a session it may
// have opened is never used). The session can then be opened elsewhere.
func Unopened(ctx context.Context, err error) bool {
	return ctx.Err() == nil && (legacy.Refused(err) || legacy.Dropped(err))
}
