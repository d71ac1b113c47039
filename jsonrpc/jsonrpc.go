package jsonrpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/tidwall/gjson"
)

// JSON-RPC 2.0 and MCP error codes used by the gateway.
const (
	// ParseError means the body is not valid JSON.
	ParseError = -32700
	// InvalidRequest means the body is JSON but not a valid JSON-RPC 2.0
	// message (wrong shape, batch, bad id, missing jsonrpc or method, ...).
	InvalidRequest = -32600
	// MethodNotFound means the method is unknown or not offered. On modern
	// Streamable HTTP it goes with HTTP 404.
	MethodNotFound = -32601
	// InvalidParams means the params are invalid, including a modern
	// request whose params._meta lacks a required field.
	InvalidParams = -32602
	// InternalError is an unexpected failure inside the receiver.
	InternalError = -32603
	// HeaderMismatch (2026-07-28) means an MCP request header is missing,
	// malformed, or does not match the body. It goes with HTTP 400.
	HeaderMismatch = -32020
	// MissingRequiredClientCapability (2026-07-28) means the request needs a
	// client capability that its _meta did not declare. It goes with HTTP 400.
	MissingRequiredClientCapability = -32021
	// UnsupportedProtocolVersion (2026-07-28) means the requested protocol
	// version is not served. It goes with HTTP 400 and data
	// {"supported":[...],"requested":"..."}.
	UnsupportedProtocolVersion = -32022
)

// RPCError is an error to report to an MCP client. It carries the HTTP
// status of the reply and the JSON-RPC error object to put in its body.
// A Code of 0 means the condition has no JSON-RPC error (for example 405 for
// GET on a modern-only endpoint); the caller then answers with the status
// alone.
//
// Message and Data reach the client; Cause never does (see
// translate.UpstreamFailure): an upstream's address and the transport's words about
// it are for the logs only.
type RPCError struct {
	// HTTPStatus is the status code of the HTTP reply, e.g. 400.
	HTTPStatus int
	// Code is the JSON-RPC error code, e.g. HeaderMismatch, or 0.
	Code int
	// Message is the short human-readable error message.
	Message string
	// Data is the optional error.data member; nil omits it.
	Data any
	// Cause, if set, is the failure behind the error, for the logs: it
	// may name an upstream's address. ErrorResponse never writes it.
	Cause error
}

// Error implements the error interface: the message, then the cause (for
// logs, never for a client).
func (e *RPCError) Error() string {
	var s string
	if e.Code == 0 {
		s = fmt.Sprintf("translate: %s (HTTP %d)", e.Message, e.HTTPStatus)
	} else {
		s = fmt.Sprintf("translate: %s (JSON-RPC %d, HTTP %d)", e.Message, e.Code, e.HTTPStatus)
	}
	if e.Cause != nil {
		s += ": " + e.Cause.Error()
	}
	return s
}

// Unwrap returns the cause.
func (e *RPCError) Unwrap() error { return e.Cause }

// Detail is the message with its cause, for the logs (CallReport.Reason).
func (e *RPCError) Detail() string {
	if e.Cause == nil {
		return e.Message
	}
	return e.Message + ": " + e.Cause.Error()
}

// UnsupportedVersionData is the error.data of an UnsupportedProtocolVersion
// error: the versions the gateway serves and the one the client asked for.
type UnsupportedVersionData struct {
	// Supported lists the protocol versions that are served.
	Supported []string `json:"supported"`
	// Requested is the protocol version the request carried.
	Requested string `json:"requested"`
}

// NewMethodNotFound returns the error a modern Streamable HTTP endpoint
// answers for a method it does not implement: HTTP 404 with JSON-RPC -32601.
func NewMethodNotFound(method string) *RPCError {
	return &RPCError{
		HTTPStatus: http.StatusNotFound,
		Code:       MethodNotFound,
		Message:    "Method not found: " + Clip(method),
	}
}

// Errorf builds an *RPCError with a formatted message.
func Errorf(status, code int, format string, args ...any) *RPCError {
	return &RPCError{HTTPStatus: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

// defaultMessage is used when an RPCError has no Message.
func defaultMessage(code int) string {
	switch code {
	case ParseError:
		return "Parse error"
	case InvalidRequest:
		return "Invalid Request"
	case MethodNotFound:
		return "Method not found"
	case InvalidParams:
		return "Invalid params"
	case HeaderMismatch:
		return "Header mismatch"
	case MissingRequiredClientCapability:
		return "Missing required client capability"
	case UnsupportedProtocolVersion:
		return "Unsupported protocol version"
	default:
		return "Internal error"
	}
}

// errorObject is the JSON-RPC error member.
type errorObject struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data,omitempty"`
}

// ErrorResponse returns a JSON-RPC 2.0 error response body for e. The id
// is copied verbatim (surrounding whitespace removed); when it is absent or
// not a single valid JSON value, the response carries "id":null. A nil e is
// reported as an InternalError, and a Data value that cannot be marshalled is
// dropped rather than failing.
func ErrorResponse(id json.RawMessage, e *RPCError) []byte {
	if e == nil {
		e = &RPCError{HTTPStatus: http.StatusInternalServerError, Code: InternalError}
	}
	code := e.Code
	if code == 0 {
		code = InternalError
	}
	obj := errorObject{Code: code, Message: e.Message, Data: e.Data}
	if obj.Message == "" {
		obj.Message = defaultMessage(code)
	}
	errJSON, err := json.Marshal(obj)
	if err != nil {
		obj.Data = nil
		errJSON, _ = json.Marshal(obj) // cannot fail: only an int and a string remain
	}

	id = bytes.TrimSpace(id)
	if len(id) == 0 || ValidJSON(id) != nil {
		id = json.RawMessage("null")
	}
	out := make([]byte, 0, len(`{"jsonrpc":"2.0","id":,"error":}`)+len(id)+len(errJSON))
	out = append(out, `{"jsonrpc":"2.0","id":`...)
	out = append(out, id...)
	out = append(out, `,"error":`...)
	out = append(out, errJSON...)
	return append(out, '}')
}

// Peek checks that body is a single JSON-RPC 2.0 message and returns its
// envelope (a Message, the model every package shares) without
// unmarshalling the rest. The rules are:
//
//   - the body must be valid JSON nested at most MaxJSONDepth levels
//     deep (else ParseError, whose message names the limit), a single object (a
//     batch array or a scalar is InvalidRequest), with "jsonrpc":"2.0" and no
//     duplicate member names;
//   - a request has a non-empty string method and an id that is a string or
//     a number (null, booleans, objects and arrays are rejected);
//   - a notification has a method and no id member;
//   - a response has no method and exactly one of result or error; a result
//     response needs a string or number id, an error response may have a
//     null or absent id (JSON-RPC 2.0 §5, MCP JSONRPCErrorResponse), and its
//     error must be an object with a numeric code and a string message;
//   - params, when present, must be an object or an array.
//
// Every error is an *RPCError with HTTPStatus 400. On error the returned
// Message still carries the id (when it is a string or number) and the
// method (when it is a string), so the caller can echo the id.
func Peek(body []byte) (Message, error) {
	msg := Message{Raw: body}
	if err := ValidJSON(body); err != nil {
		if errors.Is(err, ErrJSONTooDeep) {
			return msg, Errorf(http.StatusBadRequest, ParseError, "Parse error: %v", err)
		}
		return msg, Errorf(http.StatusBadRequest, ParseError, "Parse error: body is not valid JSON")
	}
	root := gjson.ParseBytes(body)
	if root.IsArray() {
		return msg, Errorf(http.StatusBadRequest, InvalidRequest, "Invalid Request: JSON-RPC batches are not supported")
	}
	if !root.IsObject() {
		return msg, Errorf(http.StatusBadRequest, InvalidRequest, "Invalid Request: message must be a JSON object")
	}
	var vals [6]gjson.Result
	dup := ScanMembers(root, peekMembers[:], vals[:])
	id, method, jsonrpc, result, errMember, params := vals[0], vals[1], vals[2], vals[3], vals[4], vals[5]
	hasID, hasMethod, hasResult, hasError := id.Exists(), method.Exists(), result.Exists(), errMember.Exists()
	if isIDType(id) {
		msg.ID = json.RawMessage(id.Raw)
	}
	if method.Type == gjson.String {
		// A clone: a substring would keep gjson's copy of the whole body
		// alive as long as the method's name (a parked call keeps it).
		msg.Method = strings.Clone(method.Str)
	}
	if dup != "" {
		return msg, Errorf(http.StatusBadRequest, InvalidRequest, "Invalid Request: duplicate member %q", Clip(dup))
	}
	if v := jsonrpc; v.Type != gjson.String || v.Str != "2.0" {
		return msg, Errorf(http.StatusBadRequest, InvalidRequest, `Invalid Request: "jsonrpc" must be "2.0"`)
	}

	if hasMethod {
		if method.Type != gjson.String || method.Str == "" {
			return msg, Errorf(http.StatusBadRequest, InvalidRequest, `Invalid Request: "method" must be a non-empty string`)
		}
		if hasResult || hasError {
			return msg, Errorf(http.StatusBadRequest, InvalidRequest, `Invalid Request: a request must not carry "result" or "error"`)
		}
		if p := params; p.Exists() && !p.IsObject() && !p.IsArray() {
			return msg, Errorf(http.StatusBadRequest, InvalidRequest, `Invalid Request: "params" must be an object or an array`)
		}
		if !hasID {
			msg.Kind = KindNotification
			return msg, nil
		}
		if !isIDType(id) {
			return msg, Errorf(http.StatusBadRequest, InvalidRequest, `Invalid Request: "id" must be a string or a number`)
		}
		msg.Kind = KindRequest
		return msg, nil
	}

	switch {
	case !hasResult && !hasError:
		return msg, Errorf(http.StatusBadRequest, InvalidRequest, `Invalid Request: missing "method"`)
	case hasResult && hasError:
		return msg, Errorf(http.StatusBadRequest, InvalidRequest, `Invalid Request: a response must not carry both "result" and "error"`)
	case hasResult:
		if !isIDType(id) {
			return msg, Errorf(http.StatusBadRequest, InvalidRequest, `Invalid Request: a result response needs a string or number "id"`)
		}
	default:
		if hasID && !isIDType(id) && id.Type != gjson.Null {
			return msg, Errorf(http.StatusBadRequest, InvalidRequest, `Invalid Request: "id" must be a string, a number or null`)
		}
		if !errMember.IsObject() {
			return msg, Errorf(http.StatusBadRequest, InvalidRequest, `Invalid Request: "error" must be an object`)
		}
		if errMember.Get("code").Type != gjson.Number || errMember.Get("message").Type != gjson.String {
			return msg, Errorf(http.StatusBadRequest, InvalidRequest, `Invalid Request: "error" needs a numeric "code" and a string "message"`)
		}
		if hasID && id.Type == gjson.Null {
			msg.ID = json.RawMessage("null")
		}
	}
	msg.Kind = KindResponse
	return msg, nil
}

// isIDType reports whether r is a valid MCP RequestId: a string or a number.
func isIDType(r gjson.Result) bool {
	return r.Type == gjson.String || r.Type == gjson.Number
}

// ScanMembers walks the JSON object obj once. The value of each member
// named in names goes to the same index of vals (absent members stay the
// zero Result, whose Exists is false), and the first repeated member name is
// returned ("" if none): parsers disagree on which duplicate wins (gjson
// keeps the first, encoding/json and JSON.parse the last), so a gateway that
// validates one value while the upstream acts on another must refuse such
// messages. Small objects are checked for repeats without allocating.
func ScanMembers(obj gjson.Result, names []string, vals []gjson.Result) (dup string) {
	var seen nameSet
	obj.ForEach(func(k, v gjson.Result) bool {
		if !seen.add(k.Str) {
			dup = k.Str
			return false
		}
		for i, name := range names {
			if name == k.Str {
				vals[i] = v
			}
		}
		return true
	})
	return dup
}

// nameSet holds the member names of one JSON object seen so far, to find a
// repeated one. The first 16 need no allocation.
type nameSet struct {
	small [16]string
	n     int
	large map[string]struct{} // once there are more than len(small)
}

// add adds name and reports whether it was new.
func (s *nameSet) add(name string) bool {
	if s.large == nil {
		for _, seen := range s.small[:s.n] {
			if seen == name {
				return false
			}
		}
		if s.n < len(s.small) {
			s.small[s.n] = name
			s.n++
			return true
		}
		s.large = make(map[string]struct{}, 2*len(s.small))
		for _, seen := range s.small {
			s.large[seen] = struct{}{}
		}
	}
	if _, ok := s.large[name]; ok {
		return false
	}
	s.large[name] = struct{}{}
	return true
}

// peekMembers are the envelope members Peek reads, in the order of its vals.
var peekMembers = [6]string{"id", "method", "jsonrpc", "result", "error", "params"}

// Clip shortens a client-supplied value before it is quoted in an error
// message, so that error bodies stay small.
func Clip(s string) string {
	const limit = 128
	if len(s) <= limit {
		return s
	}
	return s[:limit] + "..."
}
