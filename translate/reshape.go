package translate

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
	"github.com/tidwall/gjson"
)

// This file turns legacy (2025-11-25) results and errors into modern
// (2026-07-28) ones for the forward bridge.
//
// Results are edited in place rather than decoded and re-encoded, by the
// JSON rule of package jsonrpc: the gateway reads members with gjson and
// splices new text into the original bytes with jsonrpc's editor. Members
// the gateway adds go at the end of their object; every value it does not
// edit, at any depth, is copied byte for byte (whitespace, key order,
// number spelling and string escapes included). Only an object from which a
// member is removed is re-written, compactly, at its own level; its member
// values are still copied verbatim.

// ErrUpstreamResult is wrapped by the errors of ReshapeResult and
// BuildDiscoverResult when the upstream result cannot be turned into a
// modern one: it is not a JSON object, it repeats a member name (parsers
// disagree on which copy wins), or it is a 2025 task result. The caller
// should answer the modern client with InternalError.
var ErrUpstreamResult = errors.New("translate: unusable upstream result")

// CacheScopePrivate and CacheScopePublic are the values of cacheScope.
const (
	CacheScopePrivate = "private"
	CacheScopePublic  = "public"
)

// ResourceNotFoundLegacy is the 2025-11-25 (and earlier) error code for an
// unknown resource; 2026-07-28 uses InvalidParams with data.uri instead.
const ResourceNotFoundLegacy = -32002

// URLElicitationRequired is the 2025-11-25 error code of
// URLElicitationRequiredError, removed in 2026-07-28 (see
// URLElicitationFromError).
const URLElicitationRequired = -32042

// CacheableMethod reports whether the 2026-07-28 result of method is a
// CacheableResult, which must carry ttlMs and cacheScope: server/discover,
// tools/list, prompts/list, resources/list, resources/templates/list and
// resources/read.
func CacheableMethod(method string) bool {
	switch method {
	case "server/discover", "tools/list", "prompts/list", "resources/list", "resources/templates/list", "resources/read":
		return true
	}
	return false
}

// ReshapeOptions says what the gateway adds to reshaped results.
type ReshapeOptions struct {
	// ServerInfo is the raw JSON Implementation object of the upstream
	// (its InitializeResult.serverInfo), put in result
	// _meta["io.modelcontextprotocol/serverInfo"]; nil adds nothing. It must
	// be a JSON object.
	ServerInfo []byte
	// TTLMs is the ttlMs put on cacheable results that lack a valid one.
	// It must not be negative. Default 0 (immediately stale).
	TTLMs int64
	// CacheScope is the cacheScope put on cacheable results that lack a
	// valid one: "private" or "public". Empty means "private".
	CacheScope string
}

// check validates o and returns the trimmed ServerInfo and the cache scope.
func (o ReshapeOptions) check() (serverInfo []byte, scope string, err error) {
	scope = o.CacheScope
	if scope == "" {
		scope = CacheScopePrivate
	}
	if scope != CacheScopePrivate && scope != CacheScopePublic {
		return nil, "", fmt.Errorf("translate: ReshapeOptions.CacheScope %q is not %q or %q", jsonrpc.Clip(o.CacheScope), CacheScopePrivate, CacheScopePublic)
	}
	if o.TTLMs < 0 {
		return nil, "", fmt.Errorf("translate: ReshapeOptions.TTLMs %d is negative", o.TTLMs)
	}
	if o.ServerInfo != nil {
		serverInfo = bytes.TrimSpace(o.ServerInfo)
		if jsonrpc.ValidJSON(serverInfo) != nil || len(serverInfo) == 0 || serverInfo[0] != '{' {
			return nil, "", errors.New("translate: ReshapeOptions.ServerInfo is not a JSON object")
		}
	}
	return serverInfo, scope, nil
}

// ReshapeResult turns the result object of a legacy JSON-RPC response to
// method into the result of a modern one:
//
//   - "resultType":"complete" is added when absent; a string resultType is
//     kept (a non-string one is replaced by "complete");
//   - on the CacheableMethod results whose resultType is "complete", ttlMs
//     (an integer >= 0) and cacheScope ("public" or "private") are added
//     from o when absent or invalid, and kept when valid;
//   - _meta["io.modelcontextprotocol/serverInfo"] is added from
//     o.ServerInfo when the result has none, keeping the other _meta keys (a
//     _meta that is not an object, which neither schema allows, is
//     replaced);
//   - on tools/list, each tool's "execution" member is removed: it is the
//     2025-11-25 ToolExecution (taskSupport for task-augmented tools/call),
//     absent from the 2026-07-28 Tool and from the Tasks extension
//     (schema/2025-11-25/schema.ts Tool.execution, schema/2026-07-28/schema.ts
//     Tool, ext-tasks schema/draft/schema.ts), and the gateway does not
//     bridge 2025 tasks;
//   - a tools/call result that is a 2025 CreateTaskResult (an object "task"
//     member and no "content") is refused with ErrUpstreamResult: the
//     gateway never asks a legacy upstream for a task, and the 2026 Tasks
//     extension's CreateTaskResult has another shape.
//
// Everything else is preserved byte for byte (see the file comment). The
// result must be a JSON object without repeated member names, else the
// error wraps ErrUpstreamResult; an invalid o is also an error. The same
// function can complete a result the gateway built itself, e.g.
// InputRequiredResult (no cache hints are added to input_required).
func ReshapeResult(method string, result []byte, o ReshapeOptions) ([]byte, error) {
	serverInfo, scope, err := o.check()
	if err != nil {
		return nil, err
	}
	src, ms, err := ParseObject(result)
	if err != nil {
		return nil, err
	}
	var (
		sp                            []jsonrpc.Splice
		rtIndex, ttlIndex, scopeIndex = -1, -1, -1
		hasMeta, hasTask, hasContent  bool
		complete                      = true // resultType is (or will be) "complete"
		serverInfoMember              string
	)
	if serverInfo != nil {
		serverInfoMember = jsonrpc.Quote(MetaServerInfo) + ":" + string(serverInfo)
	}
	for i, m := range ms {
		switch m.Name {
		case "resultType":
			rtIndex = i
			if m.Val.Type == gjson.String {
				complete = m.Val.Str == "complete"
			} else {
				sp = append(sp, jsonrpc.Splice{At: m.Val.Index, End: m.End(), Text: `"complete"`})
			}
		case "ttlMs":
			ttlIndex = i
		case "cacheScope":
			scopeIndex = i
		case "_meta":
			hasMeta = true
			if !m.Val.IsObject() {
				repl := "{}"
				if serverInfo != nil {
					repl = "{" + serverInfoMember + "}"
				}
				sp = append(sp, jsonrpc.Splice{At: m.Val.Index, End: m.End(), Text: repl})
			} else if serverInfo != nil {
				if at, text, ok := jsonrpc.InsertMember(m.Val.Raw, MetaServerInfo, serverInfoMember); ok {
					sp = append(sp, jsonrpc.Splice{At: m.Val.Index + at, End: m.Val.Index + at, Text: text})
				}
			}
		case "tools":
			if method == "tools/list" && m.Val.IsArray() {
				if repl, changed := removeFromElements(m.Val.Raw, "execution"); changed {
					sp = append(sp, jsonrpc.Splice{At: m.Val.Index, End: m.End(), Text: repl})
				}
			}
		case "task":
			hasTask = method == "tools/call" && m.Val.IsObject()
		case "content":
			hasContent = true
		}
	}
	if hasTask && !hasContent {
		return nil, fmt.Errorf("%w: tools/call returned a 2025-11-25 task result", ErrUpstreamResult)
	}
	var add []string
	if rtIndex < 0 {
		add = append(add, `"resultType":"complete"`)
	}
	if CacheableMethod(method) && complete {
		ttlText := strconv.FormatInt(o.TTLMs, 10)
		if ttlIndex < 0 {
			add = append(add, `"ttlMs":`+ttlText)
		} else if m := ms[ttlIndex]; !ValidTTL(m.Val) {
			sp = append(sp, jsonrpc.Splice{At: m.Val.Index, End: m.End(), Text: ttlText})
		}
		scopeText := jsonrpc.Quote(scope)
		if scopeIndex < 0 {
			add = append(add, `"cacheScope":`+scopeText)
		} else if m := ms[scopeIndex]; m.Val.Type != gjson.String || (m.Val.Str != CacheScopePrivate && m.Val.Str != CacheScopePublic) {
			sp = append(sp, jsonrpc.Splice{At: m.Val.Index, End: m.End(), Text: scopeText})
		}
	}
	if serverInfo != nil && !hasMeta {
		add = append(add, `"_meta":{`+serverInfoMember+`}`)
	}
	if len(add) > 0 {
		sp = append(sp, jsonrpc.AppendMembers(src, ms, add))
	}
	jsonrpc.SortSplices(sp)
	return jsonrpc.ApplySplices(src, sp), nil
}

// ValidTTL reports whether v is a valid ttlMs: an integer >= 0 that a
// float64 holds exactly.
func ValidTTL(v gjson.Result) bool {
	return v.Type == gjson.Number && v.Num >= 0 && v.Num <= 1<<53 && v.Num == math.Trunc(v.Num)
}

// ReshapeError maps the error object of a legacy JSON-RPC error response to
// the modern one and returns its code, so that the caller can choose the
// HTTP status. -32002 (resource not found, 2025-11-25) becomes -32602 with
// the same message and data, so data.uri is kept (modelcontextprotocol.io/specification/2026-07-28/server/resources,
// Error Handling). Every other error is returned
// unchanged, including -32042 (URLElicitationRequired), which the caller
// should first try to turn into input requests with URLElicitationFromError.
// An errObj that is not an object with an integer code and a string
// message, without repeated members, is replaced by an InternalError.
func ReshapeError(errObj []byte) (code int, out []byte) {
	src, ms, err := ParseObject(errObj)
	if err != nil {
		return MalformedUpstreamError()
	}
	codeIndex, hasMessage := -1, false
	for i, m := range ms {
		switch m.Name {
		case "code":
			codeIndex = i
		case "message":
			hasMessage = m.Val.Type == gjson.String
		}
	}
	if codeIndex < 0 || !hasMessage {
		return MalformedUpstreamError()
	}
	cv := ms[codeIndex].Val
	if cv.Type != gjson.Number || cv.Num != math.Trunc(cv.Num) || math.Abs(cv.Num) > 1<<53 {
		return MalformedUpstreamError()
	}
	code = int(cv.Num)
	if code == ResourceNotFoundLegacy {
		return jsonrpc.InvalidParams, jsonrpc.ApplySplices(src, []jsonrpc.Splice{{At: cv.Index, End: ms[codeIndex].End(), Text: strconv.Itoa(jsonrpc.InvalidParams)}})
	}
	return code, []byte(src)
}

// MalformedUpstreamError is the code and error object that stand for an
// upstream error object the gateway cannot pass on.
func MalformedUpstreamError() (int, []byte) {
	return jsonrpc.InternalError, []byte(`{"code":-32603,"message":"Internal error: malformed upstream error"}`)
}

// BuildDiscoverResult builds the result of a modern server/discover from the
// result of a legacy initialize ({protocolVersion, capabilities, serverInfo,
// instructions}), in the shape of the 2026-07-28 DiscoverResult:
// {"resultType":"complete","supportedVersions":[ModernVersion],
// "capabilities":...,"_meta":{...serverInfo},"instructions":...,
// "ttlMs":...,"cacheScope":...}.
//
// The capabilities are copied without the 2025-only "tasks" capability
// (absent from the 2026-07-28 ServerCapabilities; the Tasks extension is
// advertised under "extensions" instead). The serverInfo is o.ServerInfo
// when set, else the initialize result's serverInfo object. Other _meta keys
// of the initialize result are kept; its protocolVersion is dropped.
// instructions is copied when it is a string. A missing capabilities member
// becomes {}; a non-object one, a non-object result or repeated members are
// errors wrapping ErrUpstreamResult.
func BuildDiscoverResult(initResult []byte, o ReshapeOptions) ([]byte, error) {
	serverInfo, scope, err := o.check()
	if err != nil {
		return nil, err
	}
	_, ms, err := ParseObject(initResult)
	if err != nil {
		return nil, err
	}
	caps, meta, instructions := "{}", "", ""
	for _, m := range ms {
		switch m.Name {
		case "capabilities":
			if !m.Val.IsObject() {
				return nil, fmt.Errorf("%w: initialize result capabilities is not an object", ErrUpstreamResult)
			}
			caps = m.Val.Raw
			if jsonrpc.ObjectHas(caps, "tasks") {
				caps = jsonrpc.RemoveMembers(caps, "tasks")
			}
		case "serverInfo":
			if serverInfo == nil && m.Val.IsObject() {
				serverInfo = []byte(m.Val.Raw)
			}
		case "_meta":
			if m.Val.IsObject() {
				meta = m.Val.Raw
			}
		case "instructions":
			if m.Val.Type == gjson.String {
				instructions = m.Val.Raw
			}
		}
	}
	if serverInfo != nil {
		member := jsonrpc.Quote(MetaServerInfo) + ":" + string(serverInfo)
		if meta == "" {
			meta = "{" + member + "}"
		} else if at, text, ok := jsonrpc.InsertMember(meta, MetaServerInfo, member); ok {
			meta = meta[:at] + text + meta[at:]
		}
	}
	b := make([]byte, 0, 128+len(caps)+len(meta)+len(instructions))
	b = append(b, `{"resultType":"complete","supportedVersions":[`...)
	b = append(b, jsonrpc.Quote(ModernVersion)...)
	b = append(b, `],"capabilities":`...)
	b = append(b, caps...)
	if meta != "" {
		b = append(b, `,"_meta":`...)
		b = append(b, meta...)
	}
	if instructions != "" {
		b = append(b, `,"instructions":`...)
		b = append(b, instructions...)
	}
	b = append(b, `,"ttlMs":`...)
	b = strconv.AppendInt(b, o.TTLMs, 10)
	b = append(b, `,"cacheScope":`...)
	b = append(b, jsonrpc.Quote(scope)...)
	return append(b, '}'), nil
}

// ParseObject trims b and checks that it is a JSON object without repeated
// member names; errors wrap ErrUpstreamResult.
func ParseObject(b []byte) (string, []jsonrpc.Member, error) {
	src := string(bytes.TrimSpace(b))
	if len(src) == 0 || src[0] != '{' || jsonrpc.ValidJSONString(src) != nil {
		return "", nil, fmt.Errorf("%w: not a JSON object", ErrUpstreamResult)
	}
	ms, dup := jsonrpc.Members(src)
	if dup != "" {
		return "", nil, fmt.Errorf("%w: repeated member %q", ErrUpstreamResult, jsonrpc.Clip(dup))
	}
	return src, ms, nil
}

// removeFromElements removes the member name from every object element of
// the JSON array arr. It reports whether anything changed; untouched
// elements are copied verbatim.
func removeFromElements(arr, name string) (string, bool) {
	var sp []jsonrpc.Splice
	gjson.Parse(arr).ForEach(func(_, v gjson.Result) bool {
		if v.IsObject() && jsonrpc.ObjectHas(v.Raw, name) {
			sp = append(sp, jsonrpc.Splice{At: v.Index, End: v.Index + len(v.Raw), Text: jsonrpc.RemoveMembers(v.Raw, name)})
		}
		return true
	})
	if len(sp) == 0 {
		return arr, false
	}
	return string(jsonrpc.ApplySplices(arr, sp)), true
}
