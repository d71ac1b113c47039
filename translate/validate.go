package translate

import (
	"errors"
	"net/http"
	"slices"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
	"github.com/tidwall/gjson"
)

// ModernRequest is a modern (2026-07-28) message that passed ValidateModern.
type ModernRequest struct {
	// Message is the JSON-RPC envelope (id, method, kind).
	jsonrpc.Message
	// ProtocolVersion is the validated protocol version (header and _meta
	// agree on it, and it is supported).
	ProtocolVersion string
	// Name is params.name (tools/call, prompts/get), params.uri
	// (resources/read) or params.taskId (tasks/get, tasks/update,
	// tasks/cancel), already checked against the Mcp-Name header; "" for
	// other methods.
	Name string
	// ClientCapabilities is the raw JSON object of the client's
	// capabilities for this request; nil for a notification without them.
	ClientCapabilities []byte
	// LogLevel is the requested logging level, or "" when the client did
	// not opt in to notifications/message.
	LogLevel string
}

// LogLevels are the 2026-07-28 LoggingLevel values (RFC 5424 severities).
var LogLevels = []string{"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"}

// ValidateModern runs the validation ladder for a POST that ClassifyRequest
// put in the modern era. httpMethod is the HTTP method, h the request
// headers, body the request body, and supported the protocol versions the
// gateway serves (nil or empty means []string{ModernVersion}). The rungs are
// checked in this order, which the MCP conformance suite depends on; the
// first failure is returned:
//
//  1. HTTP method not POST: status 405 and no JSON-RPC code (Code 0); the
//     caller should set "Allow: POST".
//  2. JSON-RPC shape (see Peek): -32700 or -32600, status 400.
//  3. A JSON-RPC response (clients must not POST responses): -32600, status
//     400.
//  4. MCP-Protocol-Version header missing, empty or repeated: -32020,
//     status 400.
//  5. Request envelope: params._meta must be an object with a string
//     MetaProtocolVersion and an object MetaClientCapabilities, else
//     -32602, status 400. This rung precedes the version rungs: with a
//     valid header and incomplete _meta the answer is -32602, not -32020.
//  6. Header version differs from the _meta version: -32020, status 400 (a
//     mismatch beats an unsupported version).
//  7. Version not in supported: -32022, status 400, with Data an
//     UnsupportedVersionData{Supported, Requested}.
//  8. MetaLogLevel present but not a LoggingLevel string: -32602, status
//     400.
//  9. Mcp-Method missing, repeated or different from the body method
//     (values compare case-sensitively after trimming whitespace): -32020,
//     status 400.
//  10. For tools/call and prompts/get (params.name), resources/read
//     (params.uri) and the Tasks extension's tasks/get, tasks/update and
//     tasks/cancel (params.taskId): the body value must be a string (else -32602, status
//     400), and Mcp-Name must be present, single, decodable by
//     DecodeHeaderValue and equal to it (else -32020, status 400).
//
// Mcp-Param-* headers are not validated here (that needs the tool's input
// schema); callers must forward them. Method existence is not checked
// either; see RemovedMethod and NewMethodNotFound.
//
// Notifications follow the same ladder with the rules of the 2026-07-28
// schema, where NotificationParams._meta is optional and has no required
// keys: _meta may be absent; a MetaProtocolVersion in it must be a string
// equal to the header; MetaClientCapabilities, if present, must be an
// object; Mcp-Method is checked only when sent (the transport leaves header
// requirements for notification POSTs undefined). The header is still
// required, since every POST must carry MCP-Protocol-Version.
//
// On failure the returned *ModernRequest is non-nil whenever the body was
// parsed far enough to know its id, so that the caller can answer with
// ErrorResponse(req.ID, err); it must not be used for anything else. Every
// error has HTTPStatus 400 or 405.
func ValidateModern(httpMethod string, h http.Header, body []byte, supported []string) (*ModernRequest, *jsonrpc.RPCError) {
	if httpMethod != http.MethodPost {
		return nil, &jsonrpc.RPCError{HTTPStatus: http.StatusMethodNotAllowed, Message: "Method Not Allowed: the MCP endpoint accepts only POST"}
	}
	msg, err := jsonrpc.Peek(body)
	req := &ModernRequest{Message: msg}
	if err != nil {
		var re *jsonrpc.RPCError
		if !errors.As(err, &re) {
			re = jsonrpc.Errorf(http.StatusBadRequest, jsonrpc.InvalidRequest, "Invalid Request: %v", err)
		}
		return req, re
	}
	if msg.Kind == jsonrpc.KindResponse {
		return req, jsonrpc.Errorf(http.StatusBadRequest, jsonrpc.InvalidRequest, "Invalid Request: clients must not send JSON-RPC responses")
	}
	hv, _, e := singleHeader(h, HeaderProtocolVersion, true)
	if e != nil {
		return req, e
	}
	env, e := readEnvelope(body, msg)
	if e != nil {
		return req, e
	}
	if env.hasVersion && env.version != hv {
		return req, jsonrpc.Errorf(http.StatusBadRequest, jsonrpc.HeaderMismatch,
			"Header mismatch: %s header value %q does not match _meta %s %q", HeaderProtocolVersion, jsonrpc.Clip(hv), MetaProtocolVersion, jsonrpc.Clip(env.version))
	}
	if len(supported) == 0 {
		supported = []string{ModernVersion}
	}
	if !slices.Contains(supported, hv) {
		return req, &jsonrpc.RPCError{
			HTTPStatus: http.StatusBadRequest,
			Code:       jsonrpc.UnsupportedProtocolVersion,
			Message:    "Unsupported protocol version",
			Data:       jsonrpc.UnsupportedVersionData{Supported: slices.Clone(supported), Requested: hv},
		}
	}
	if env.hasLogLevel && !slices.Contains(LogLevels, env.logLevel) {
		return req, jsonrpc.Errorf(http.StatusBadRequest, jsonrpc.InvalidParams, "Invalid params: _meta %s must be one of %v", MetaLogLevel, LogLevels)
	}
	if e := checkStandardHeaders(h, msg, env.name); e != nil {
		return req, e
	}
	req.ProtocolVersion = hv
	req.Name = env.name
	req.ClientCapabilities = env.caps
	req.LogLevel = env.logLevel
	return req, nil
}

// envelope holds what ValidateModern reads from params.
type envelope struct {
	version     string
	hasVersion  bool
	caps        []byte
	logLevel    string
	hasLogLevel bool
	name        string
}

// readEnvelope checks params and params._meta of the request or
// notification msg that Peek parsed from body (rung 5 and the body half of
// rung 10) and extracts their fields. Members are looked up by their
// unescaped names, exactly as Peek found them.
func readEnvelope(body []byte, msg jsonrpc.Message) (envelope, *jsonrpc.RPCError) {
	var env envelope
	isRequest := msg.Kind == jsonrpc.KindRequest
	invalid := func(format string, args ...any) (envelope, *jsonrpc.RPCError) {
		return env, jsonrpc.Errorf(http.StatusBadRequest, jsonrpc.InvalidParams, "Invalid params: "+format, args...)
	}

	var top [1]gjson.Result
	jsonrpc.ScanMembers(gjson.ParseBytes(body), []string{"params"}, top[:]) // jsonrpc.Peek rejected duplicates
	params := top[0]
	if !params.Exists() && !isRequest {
		return env, nil
	}
	if !params.IsObject() {
		if isRequest {
			return invalid("missing params._meta")
		}
		return invalid("params must be an object")
	}
	// The member that names the request's target (tools/call's name, …),
	// looked up in the same pass as _meta.
	field := NameSourceField(msg.Method)
	var pv [2]gjson.Result
	if dup := jsonrpc.ScanMembers(params, []string{"_meta", field}, pv[:]); dup != "" {
		return invalid("duplicate member %q in params", jsonrpc.Clip(dup))
	}
	meta := pv[0]
	if !meta.Exists() {
		if isRequest {
			return invalid("missing params._meta")
		}
		return env, nil
	}
	if !meta.IsObject() {
		return invalid("params._meta must be an object")
	}
	var mv [3]gjson.Result
	if dup := jsonrpc.ScanMembers(meta, []string{MetaProtocolVersion, MetaClientCapabilities, MetaLogLevel}, mv[:]); dup != "" {
		return invalid("duplicate member %q in params._meta", jsonrpc.Clip(dup))
	}

	if v := mv[0]; v.Exists() {
		if v.Type != gjson.String {
			return invalid("_meta %s must be a string", MetaProtocolVersion)
		}
		env.version, env.hasVersion = v.Str, true
	} else if isRequest {
		return invalid("missing _meta %s", MetaProtocolVersion)
	}
	if v := mv[1]; v.Exists() {
		if !v.IsObject() {
			return invalid("_meta %s must be an object", MetaClientCapabilities)
		}
		env.caps = []byte(v.Raw)
	} else if isRequest {
		return invalid("missing _meta %s", MetaClientCapabilities)
	}
	if v := mv[2]; v.Exists() {
		env.hasLogLevel = true
		if v.Type == gjson.String {
			env.logLevel = v.Str
		}
	}

	if field != "" && isRequest {
		v := pv[1]
		if v.Type != gjson.String {
			return invalid("params.%s must be a string", field)
		}
		env.name = v.Str
	}
	return env, nil
}

// RemovedMethod reports whether method is a legacy (2025-11-25) method that
// the 2026-07-28 protocol removed, so that a modern request for it must not
// be forwarded to a legacy upstream. For requests, a modern endpoint answers
// them like any unknown method, with NewMethodNotFound (HTTP 404, -32601),
// which the conformance suite checks for the first five. The list is:
//
//   - requests removed from the core protocol (changelog 2026-07-28, major
//     changes 2, 4, 5): initialize, ping, logging/setLevel,
//     resources/subscribe, resources/unsubscribe;
//   - requests of the 2025-11-25 experimental tasks that the Tasks
//     extension dropped (major change 6): tasks/list, tasks/result;
//   - notifications removed from the core protocol: notifications/initialized,
//     notifications/roots/list_changed and notifications/elicitation/complete
//     (minor change 11). Notifications get no JSON-RPC reply; a caller
//     may accept and drop them (202) or refuse them with a 4xx.
//
// Methods that moved to the Tasks extension with new semantics (tasks/get,
// tasks/cancel) and the server-to-client requests that MRTR now embeds in
// results (sampling/createMessage, elicitation/create, roots/list) are not
// listed.
func RemovedMethod(method string) bool {
	switch method {
	case "initialize", "ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe",
		"tasks/list", "tasks/result",
		"notifications/initialized", "notifications/roots/list_changed", "notifications/elicitation/complete":
		return true
	}
	return false
}
