package translate

import (
	"encoding/json"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
)

// The JSON-RPC error types and the splice editor moved to package jsonrpc.
// These aliases remain only for translate/forward's task files, which are
// being rewritten separately; new code uses jsonrpc directly.

// RPCError is jsonrpc.RPCError.
//
// Deprecated: use jsonrpc.RPCError.
type RPCError = jsonrpc.RPCError

// Splice is jsonrpc.Splice.
//
// Deprecated: use jsonrpc.Splice.
type Splice = jsonrpc.Splice

// JSON-RPC error codes, as in jsonrpc.
//
// Deprecated: use jsonrpc.InvalidParams, jsonrpc.InternalError and
// jsonrpc.MissingRequiredClientCapability.
const (
	InvalidParams                   = jsonrpc.InvalidParams
	InternalError                   = jsonrpc.InternalError
	MissingRequiredClientCapability = jsonrpc.MissingRequiredClientCapability
)

// ErrorResponse is jsonrpc.ErrorResponse.
//
// Deprecated: use jsonrpc.ErrorResponse.
func ErrorResponse(id json.RawMessage, e *RPCError) []byte { return jsonrpc.ErrorResponse(id, e) }

// Clip is jsonrpc.Clip.
//
// Deprecated: use jsonrpc.Clip.
func Clip(s string) string { return jsonrpc.Clip(s) }

// Members is jsonrpc.Members.
//
// Deprecated: use jsonrpc.Members.
func Members(obj string) ([]jsonrpc.Member, string) { return jsonrpc.Members(obj) }

// ObjectHas is jsonrpc.ObjectHas.
//
// Deprecated: use jsonrpc.ObjectHas.
func ObjectHas(obj, name string) bool { return jsonrpc.ObjectHas(obj, name) }

// RemoveMembers is jsonrpc.RemoveMembers.
//
// Deprecated: use jsonrpc.RemoveMembers.
func RemoveMembers(obj string, names ...string) string { return jsonrpc.RemoveMembers(obj, names...) }

// ApplySplices is jsonrpc.ApplySplices.
//
// Deprecated: use jsonrpc.ApplySplices.
func ApplySplices(src string, sp []Splice) []byte { return jsonrpc.ApplySplices(src, sp) }

// AppendMembers is jsonrpc.AppendMembers.
//
// Deprecated: use jsonrpc.AppendMembers.
func AppendMembers(obj string, ms []jsonrpc.Member, add []string) Splice {
	return jsonrpc.AppendMembers(obj, ms, add)
}

// AppendMember is jsonrpc.AppendMember.
//
// Deprecated: use jsonrpc.AppendMember.
func AppendMember(b []byte, key, val string) []byte { return jsonrpc.AppendMember(b, key, val) }
