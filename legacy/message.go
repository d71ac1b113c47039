package legacy

import "github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"

// The message envelope moved to package jsonrpc, which both eras build on.
// These aliases remain only for translate/forward's task files, which are
// being rewritten separately; new code uses jsonrpc directly.

// Message is jsonrpc.Message.
//
// Deprecated: use jsonrpc.Message.
type Message = jsonrpc.Message

// Kind is jsonrpc.Kind.
//
// Deprecated: use jsonrpc.Kind.
type Kind = jsonrpc.Kind

// Message kinds, as in jsonrpc.
//
// Deprecated: use jsonrpc.KindInvalid, jsonrpc.KindRequest,
// jsonrpc.KindNotification and jsonrpc.KindResponse.
const (
	KindInvalid      = jsonrpc.KindInvalid
	KindRequest      = jsonrpc.KindRequest
	KindNotification = jsonrpc.KindNotification
	KindResponse     = jsonrpc.KindResponse
)
