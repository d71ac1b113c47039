package reverse

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
	"github.com/tidwall/gjson"
)

// This file turns modern (2026-07-28) results and errors into legacy
// (2025-11-25 and earlier) ones for the reverse bridge, builds a legacy
// InitializeResult from a DiscoverResult, and maps legacy client
// capabilities to modern ones.

// Versions lists the legacy protocol versions the reverse bridge
// negotiates with legacy clients, newest first.
var Versions = []string{"2025-11-25", "2025-06-18", "2025-03-26"}

// NegotiateLegacyVersion returns the version the gateway answers a legacy
// initialize with: the client's own when the gateway speaks it, else the
// newest it speaks (2025-11-25 lifecycle §Version Negotiation).
func NegotiateLegacyVersion(requested string) string {
	for _, v := range Versions {
		if v == requested {
			return v
		}
	}
	return Versions[0]
}

// ModernClientCapabilities maps the capabilities a legacy client declared at
// initialize to the ClientCapabilities object of a 2026-07-28 request
// _meta: experimental, sampling and elicitation are copied as they are;
// roots becomes {} (roots.listChanged has no meaning without sessions);
// tasks (2025 experimental tasks) and anything unknown are dropped. The
// result is compact JSON with sorted keys; caps that is not a JSON object
// gives {}.
func ModernClientCapabilities(caps []byte) []byte {
	c := gjson.ParseBytes(bytes.TrimSpace(caps))
	if !c.IsObject() {
		return []byte("{}")
	}
	object := func(name string) json.RawMessage {
		if v := c.Get(name); v.IsObject() {
			return json.RawMessage(v.Raw)
		}
		return nil
	}
	out := clientCapabilities{Elicitation: object("elicitation"), Experimental: object("experimental"), Sampling: object("sampling")}
	if c.Get("roots").IsObject() {
		out.Roots = json.RawMessage("{}")
	}
	b, err := json.Marshal(out)
	if err != nil { // a raw value that is not valid JSON: gjson accepted it, so never
		return []byte("{}")
	}
	return b
}

// clientCapabilities is the 2026-07-28 ClientCapabilities the reverse
// bridge declares upstream (its fields in name order, so that the JSON is
// sorted, as it has always been).
type clientCapabilities struct {
	Elicitation  json.RawMessage `json:"elicitation,omitempty"`
	Experimental json.RawMessage `json:"experimental,omitempty"`
	// Extensions is keyed by data (extension ids): see revDeclareTasks.
	Extensions map[string]json.RawMessage `json:"extensions,omitempty"`
	Roots      json.RawMessage            `json:"roots,omitempty"`
	Sampling   json.RawMessage            `json:"sampling,omitempty"`
}

// BuildInitializeResult builds the result of a legacy initialize from the
// result of the upstream's server/discover: the negotiated version, the
// capabilities (without the 2026-only extensions member, and without
// listChanged and resources.subscribe when notify is false: the gateway
// has no stream to deliver them on), serverInfo from result
// _meta["io.modelcontextprotocol/serverInfo"] (else a body serverInfo, else a
// placeholder, since 2025 requires one) and instructions when a string.
func BuildInitializeResult(version string, discover []byte, notify bool) ([]byte, error) {
	_, ms, err := translate.ParseObject(discover)
	if err != nil {
		return nil, err
	}
	caps, serverInfo, instructions := "{}", "", ""
	for _, m := range ms {
		switch m.Name {
		case "capabilities":
			if !m.Val.IsObject() {
				return nil, fmt.Errorf("%w: discover capabilities is not an object", translate.ErrUpstreamResult)
			}
			caps = legacyServerCapabilities(m.Val, notify)
		case "_meta":
			if si := m.Val.Get(gjson.Escape(translate.MetaServerInfo)); si.IsObject() {
				serverInfo = si.Raw
			}
		case "serverInfo":
			if serverInfo == "" && m.Val.IsObject() {
				serverInfo = m.Val.Raw
			}
		case "instructions":
			if m.Val.Type == gjson.String {
				instructions = m.Val.Raw
			}
		}
	}
	if serverInfo == "" {
		serverInfo = `{"name":"mcp-server","version":"unknown"}`
	}
	b := make([]byte, 0, 96+len(caps)+len(serverInfo)+len(instructions))
	b = append(b, `{"protocolVersion":`...)
	b = append(b, jsonrpc.Quote(version)...)
	b = append(b, `,"capabilities":`...)
	b = append(b, caps...)
	b = append(b, `,"serverInfo":`...)
	b = append(b, serverInfo...)
	if instructions != "" {
		b = append(b, `,"instructions":`...)
		b = append(b, instructions...)
	}
	return append(b, '}'), nil
}

// legacyServerCapabilities copies a 2026 ServerCapabilities object for a
// legacy client (see BuildInitializeResult).
func legacyServerCapabilities(caps gjson.Result, notify bool) string {
	out := caps.Raw
	if jsonrpc.ObjectHas(out, "extensions") {
		out = jsonrpc.RemoveMembers(out, "extensions")
	}
	if notify {
		return out
	}
	ms, _ := jsonrpc.Members(out)
	var sp []jsonrpc.Splice
	for _, m := range ms {
		if !m.Val.IsObject() {
			continue
		}
		drop := []string{"listChanged"}
		if m.Name == "resources" {
			drop = append(drop, "subscribe")
		}
		for _, d := range drop {
			if jsonrpc.ObjectHas(m.Val.Raw, d) {
				sp = append(sp, jsonrpc.Splice{At: m.Val.Index, End: m.End(), Text: jsonrpc.RemoveMembers(m.Val.Raw, drop...)})
				break
			}
		}
	}
	if len(sp) == 0 {
		return out
	}
	return string(jsonrpc.ApplySplices(out, sp))
}

// LegacyResult turns the result object of a modern response to method into
// a legacy one:
//
//   - resultType is removed (a legacy result has none; the caller must
//     already have handled "input_required" and refused anything other
//     than "complete");
//   - on tools/call, a structuredContent that is not a JSON object becomes
//     {"result":<value>} (2025-11-25 requires an object, SEP-2106);
//   - on tools/list, each tool's outputSchema whose root is not
//     {"type":"object",...} becomes {"type":"object","properties":
//     {"result":<schema>},"required":["result"]}, which matches the wrapped
//     structuredContent.
//   - on tools/list, each tool's execution.taskSupport is removed (the
//     gateway follows tasks for legacy clients, tasks.go).
//
// ttlMs, cacheScope and _meta (serverInfo) are kept: a 2025 Result allows
// extra members. Everything else is copied byte for byte. The result must be
// a JSON object without repeated members (else an error wrapping
// ErrUpstreamResult).
func LegacyResult(method string, result []byte) ([]byte, error) {
	src, ms, err := translate.ParseObject(result)
	if err != nil {
		return nil, err
	}
	b := make([]byte, 0, len(src)+64)
	b = append(b, '{')
	for _, m := range ms {
		val := m.Val.Raw
		switch {
		case m.Name == "resultType":
			continue
		case method == "tools/call" && m.Name == "structuredContent" && !m.Val.IsObject():
			val = `{"result":` + val + `}`
		case method == "tools/list" && m.Name == "tools" && m.Val.IsArray():
			val = revDropTaskSupport(wrapOutputSchemas(val))
		}
		b = jsonrpc.AppendMember(b, m.Key, val)
	}
	return append(b, '}'), nil
}

// wrapOutputSchemas wraps the non-object outputSchema of every tool in the
// JSON array tools.
func wrapOutputSchemas(tools string) string {
	var sp []jsonrpc.Splice
	gjson.Parse(tools).ForEach(func(_, tool gjson.Result) bool {
		if !tool.IsObject() {
			return true
		}
		tool.ForEach(func(k, v gjson.Result) bool {
			if k.Str != "outputSchema" {
				return true
			}
			if t := v.Get("type"); v.IsObject() && t.Type == gjson.String && t.Str == "object" {
				return false
			}
			// Nested indexes are relative to the whole array.
			sp = append(sp, jsonrpc.Splice{At: v.Index, End: v.Index + len(v.Raw),
				Text: `{"type":"object","properties":{"result":` + v.Raw + `},"required":["result"]}`})
			return false
		})
		return true
	})
	if len(sp) == 0 {
		return tools
	}
	jsonrpc.SortSplices(sp)
	return string(jsonrpc.ApplySplices(tools, sp))
}

// LegacyError maps the error object of a modern error response to method
// for a legacy client, so that it carries a code the client's revision
// defines (message and data unchanged):
//
//   - -32021 (MissingRequiredClientCapability, defined only from 2026-07-28)
//     becomes -32600 (Invalid Request), the code 2025-11-25 gives a request
//     that lacks what the receiver requires of its sender (a request
//     without the task augmentation a receiver requires, the
//     specification's basic/utilities/tasks page, Error Handling); data.requiredCapabilities stays;
//   - on resources/read, -32602 with a data.uri (the 2026 resource-not-found)
//     becomes -32002, the code 2025 clients recognize.
//
// Everything else is returned unchanged.
func LegacyError(method string, errObj []byte) []byte {
	code := gjson.GetBytes(errObj, "code")
	missingCap := code.Type == gjson.Number && code.Num == jsonrpc.MissingRequiredClientCapability
	if method != "resources/read" && !missingCap {
		return errObj
	}
	src, ms, err := translate.ParseObject(errObj)
	if err != nil {
		return errObj
	}
	codeAt := -1
	hasURI := false
	for i, m := range ms {
		switch m.Name {
		case "code":
			if m.Val.Type == gjson.Number && (m.Val.Num == jsonrpc.InvalidParams || m.Val.Num == jsonrpc.MissingRequiredClientCapability) {
				codeAt = i
			}
		case "data":
			hasURI = m.Val.IsObject() && m.Val.Get("uri").Type == gjson.String
		}
	}
	if codeAt < 0 {
		return errObj
	}
	m := ms[codeAt]
	switch {
	case m.Val.Num == jsonrpc.MissingRequiredClientCapability:
		return jsonrpc.ApplySplices(src, []jsonrpc.Splice{{At: m.Val.Index, End: m.End(), Text: strconv.Itoa(jsonrpc.InvalidRequest)}})
	case method == "resources/read" && hasURI:
		return jsonrpc.ApplySplices(src, []jsonrpc.Splice{{At: m.Val.Index, End: m.End(), Text: strconv.Itoa(translate.ResourceNotFoundLegacy)}})
	}
	return errObj
}

// LegacyFailure is how the reverse bridge reports a call it could not
// complete (rounds exhausted, a capability the client lacks, an answer
// that failed) to a legacy client: tools/call gets a tool result with
// isError (the 2025 idiom, so the model sees the reason); other methods a
// JSON-RPC InternalError. Exactly one of result and errObj is non-nil.
func LegacyFailure(method, message string) (result, errObj []byte) {
	msg, _ := json.Marshal(message) // a string always marshals
	if method == "tools/call" {
		return []byte(`{"content":[{"type":"text","text":` + string(msg) + `}],"isError":true}`), nil
	}
	return nil, []byte(`{"code":-32603,"message":` + string(msg) + `}`)
}

// EncodeHeaderValue encodes v for an Mcp-Name or Mcp-Param-* header
// (SEP-2243): values of visible ASCII and inner spaces are sent as they
// are; a value with any other byte (non-ASCII, a control character, a
// tab), with leading or trailing whitespace, or that itself looks like the
// Base64 sentinel is sent as =?base64?<standard Base64 of its UTF-8>?=.
// DecodeHeaderValue reverses it.
func EncodeHeaderValue(v string) string {
	plain := v == "" || v[0] != ' ' && v[len(v)-1] != ' '
	for i := 0; plain && i < len(v); i++ {
		plain = v[i] >= 0x20 && v[i] <= 0x7e
	}
	if plain && !(strings.HasPrefix(v, translate.SentinelPrefix) && strings.HasSuffix(v, translate.SentinelSuffix)) {
		return v
	}
	return translate.SentinelPrefix + base64.StdEncoding.EncodeToString([]byte(v)) + translate.SentinelSuffix
}
