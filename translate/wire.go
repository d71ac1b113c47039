package translate

import (
	"encoding/json"
	"sync"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
	"github.com/tidwall/gjson"
)

// ParamsOf returns the raw params object of a JSON-RPC request.
func ParamsOf(body []byte) []byte {
	p := gjson.GetBytes(body, "params")
	if !p.IsObject() {
		return nil
	}
	return []byte(p.Raw)
}

// StringField returns params[name] if it is a string.
func StringField(params []byte, name string) string {
	v := gjson.GetBytes(params, name)
	if v.Type != gjson.String {
		return ""
	}
	return v.String()
}

// MetaField returns the raw params._meta[key].
func MetaField(params []byte, key string) []byte {
	v := gjson.GetBytes(params, MetaPath("_meta", key))
	if !v.Exists() {
		return nil
	}
	return []byte(v.Raw)
}

// InputResponses returns params.inputResponses as raw values by input key
// (a map keyed by data: see package jsonrpc); nil when absent, null or not
// an object. Of repeated keys the first counts.
func InputResponses(params []byte) map[string]json.RawMessage {
	v := gjson.GetBytes(params, "inputResponses")
	if !v.IsObject() {
		return nil
	}
	out := make(map[string]json.RawMessage)
	v.ForEach(func(k, val gjson.Result) bool {
		if _, seen := out[k.Str]; !seen { // the first of repeated keys, as gjson reads it
			out[k.Str] = json.RawMessage(val.Raw)
		}
		return true
	})
	return out
}

// modernMeta are the per-request _meta keys a legacy server must not see
// (it got them at initialize).
var modernMeta = []string{MetaProtocolVersion, MetaClientCapabilities, MetaClientInfo, MetaLogLevel}

// UpstreamParams turns a modern request's params into legacy params: the
// per-request protocol fields and the MRTR fields go; everything else
// (arguments, progressToken, other _meta) stays, byte for byte and in order.
func UpstreamParams(params []byte) []byte {
	if len(params) == 0 {
		return nil
	}
	src := string(params)
	if jsonrpc.ValidJSONString(src) != nil || !gjson.Parse(src).IsObject() {
		return params
	}
	ms, _ := jsonrpc.Members(src)
	b := make([]byte, 0, len(src))
	b = append(b, '{')
	n := 0
	for _, m := range ms {
		val := m.Val.Raw
		switch {
		case m.Name == "inputResponses" || m.Name == "requestState" || m.Name == "task":
			// MRTR's fields, and a 2025 task augmentation, which a
			// modern client's request does not make (the bridge adds
			// its own: upstreamTaskParams).
			continue
		case m.Name == "_meta" && m.Val.IsObject():
			if val = jsonrpc.RemoveMembers(val, modernMeta...); val == "{}" {
				continue
			}
		}
		if n > 0 {
			b = append(b, ',')
		}
		n++
		b = append(append(append(b, m.Key...), ':'), val...)
	}
	return append(b, '}')
}

// LegacyCapabilities maps modern client capabilities to the legacy ones a
// session is initialized with, as canonical JSON (sorted keys), so that equal
// capability sets share sessions.
func LegacyCapabilities(caps []byte) string {
	if len(caps) > maxCachedCaps {
		return mapLegacyCapabilities(caps)
	}
	capsCache.Lock()
	v, ok := capsCache.m[string(caps)]
	capsCache.Unlock()
	if ok {
		return v
	}
	v = mapLegacyCapabilities(caps)
	capsCache.Lock()
	if len(capsCache.m) >= capsCacheSize {
		clear(capsCache.m)
	}
	capsCache.m[string(caps)] = v
	capsCache.Unlock()
	return v
}

// capsCache remembers the mapping of recent capability sets: clients send
// the same few over and over, and the mapping decodes and re-encodes JSON.
// It holds at most capsCacheSize sets of at most maxCachedCaps bytes each.
var capsCache = struct {
	sync.Mutex
	m map[string]string
}{m: make(map[string]string)}

const (
	capsCacheSize = 256
	maxCachedCaps = 512
)

// legacyCapabilities is the ClientCapabilities of a legacy initialize, as
// LegacyCapabilities builds it (its fields in name order, so that the JSON
// is sorted).
type legacyCapabilities struct {
	Elicitation  json.RawMessage `json:"elicitation,omitempty"`
	Experimental json.RawMessage `json:"experimental,omitempty"`
	Roots        json.RawMessage `json:"roots,omitempty"`
	Sampling     json.RawMessage `json:"sampling,omitempty"`
}

// mapLegacyCapabilities is LegacyCapabilities without the cache: the
// object members of elicitation, sampling and experimental are copied in
// canonical form (jsonrpc.AppendCanonical), roots becomes {}.
func mapLegacyCapabilities(caps []byte) string {
	if jsonrpc.ValidJSON(caps) != nil {
		return "{}"
	}
	c := gjson.ParseBytes(caps)
	if !c.IsObject() {
		return "{}"
	}
	canonical := func(name string) json.RawMessage {
		if v := c.Get(gjson.Escape(name)); v.IsObject() {
			return jsonrpc.AppendCanonical(nil, v)
		}
		return nil
	}
	out := legacyCapabilities{
		Elicitation:  canonical("elicitation"),
		Experimental: canonical("experimental"),
		Sampling:     canonical("sampling"),
	}
	if c.Get("roots").IsObject() {
		out.Roots = json.RawMessage("{}") // a stateless client never sends roots/list_changed
	}
	b, err := json.Marshal(out)
	if err != nil {
		return "{}"
	}
	return string(b)
}

// ServerInfo returns the raw serverInfo of an InitializeResult.
func ServerInfo(initResult []byte) []byte {
	v := gjson.GetBytes(initResult, "serverInfo")
	if !v.IsObject() {
		return nil
	}
	return []byte(v.Raw)
}

// ResultOf returns the raw result of the JSON-RPC response raw (nil for
// none).
func ResultOf(raw []byte) []byte {
	v := gjson.GetBytes(raw, "result")
	if !v.Exists() {
		return nil
	}
	return []byte(v.Raw)
}

// ErrorOf returns the raw error object of the JSON-RPC response raw (nil
// for none).
func ErrorOf(raw []byte) []byte {
	v := gjson.GetBytes(raw, "error")
	if !v.IsObject() {
		return []byte(`{"code":-32603,"message":"malformed upstream response"}`)
	}
	return []byte(v.Raw)
}

// ResultResponse builds {"jsonrpc":"2.0","id":id,"result":result}.
func ResultResponse(id json.RawMessage, result []byte) []byte {
	return rpcEnvelope(id, "result", result)
}

// ErrorObjectResponse builds {"jsonrpc":"2.0","id":id,"error":errObj}.
func ErrorObjectResponse(id json.RawMessage, errObj []byte) []byte {
	return rpcEnvelope(id, "error", errObj)
}

// ListenCompletion builds the response that ends a subscriptions/listen
// stream the graceful way, the result a server sends when it ends the
// subscription itself (its shutdown, a reload) before it closes the
// stream:
// {"jsonrpc":"2.0","id":id,"result":{"resultType":"complete","_meta":{MetaSubscriptionID:id}}}.
// id is the listen request's id, which is also the subscription id;
// serverInfo, when not nil, is the raw Implementation object of the server
// (as on every result: MetaServerInfo), put in _meta first. A client that
// gets it knows that the subscription closed cleanly; a stream that closes
// without it is an unexpected disconnect (the specification's
// basic/patterns/subscriptions page, Graceful Closure).
func ListenCompletion(id json.RawMessage, serverInfo []byte) []byte {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	b := make([]byte, 0, 2*len(id)+len(serverInfo)+128)
	b = append(b, `{"resultType":"complete","_meta":{`...)
	if serverInfo != nil {
		b = append(b, jsonrpc.Quote(MetaServerInfo)...)
		b = append(b, ':')
		b = append(b, serverInfo...)
		b = append(b, ',')
	}
	b = append(b, jsonrpc.Quote(MetaSubscriptionID)...)
	b = append(b, ':')
	b = append(b, id...)
	return ResultResponse(id, append(b, "}}"...))
}

func rpcEnvelope(id json.RawMessage, field string, value []byte) []byte {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	b := make([]byte, 0, len(id)+len(value)+40)
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = append(b, id...)
	b = append(b, `,"`...)
	b = append(b, field...)
	b = append(b, `":`...)
	b = append(b, value...)
	return append(b, '}')
}
