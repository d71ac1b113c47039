package translate

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
	"github.com/tidwall/gjson"
)

// This file turns the in-line requests of a legacy server
// (elicitation/create, sampling/createMessage, roots/list) into the input
// requests of a modern InputRequiredResult (SEP-2322), and
// checks the client's input responses before they go upstream.

// InputKeyHint is the params._meta key by which a legacy server may choose
// the key of its in-line request in the modern inputRequests map. Its value
// must be a string of 1 to MaxInputKeyLen visible ASCII characters. The
// gateway removes it before the request reaches the client.
const InputKeyHint = "io.github.caddy-mcp-gateway/inputKey"

// MaxInputKeyLen is the longest InputKeyHint the gateway accepts, in bytes.
const MaxInputKeyLen = 128

// Input methods: the server-to-client requests that MRTR embeds in results.
const (
	MethodElicit     = "elicitation/create"
	MethodSample     = "sampling/createMessage"
	MethodListRoots  = "roots/list"
	urlElicitKeyBase = "url-elicitation"
)

// ErrInputRequest is wrapped by NewInputRequest errors: the upstream's
// in-line request is not one MRTR can carry.
var ErrInputRequest = errors.New("translate: invalid input request")

// ErrInputResponse is wrapped by ValidateInputResponse errors.
var ErrInputResponse = errors.New("translate: invalid input response")

// InputRequest is one entry of a modern inputRequests map.
type InputRequest struct {
	// Key is the entry's key, unique within the upstream call.
	Key string
	// Method is elicitation/create, sampling/createMessage or roots/list.
	Method string
	// Params is the raw JSON params object, cleaned of 2025-only members
	// and of InputKeyHint; nil when the request had none (roots/list).
	Params []byte
}

// IsInputMethod reports whether method is one of the three input methods.
func IsInputMethod(method string) bool {
	return method == MethodElicit || method == MethodSample || method == MethodListRoots
}

// keyBase returns the prefix of derived keys for an input method.
func keyBase(method string) string {
	switch method {
	case MethodElicit:
		return "elicitation"
	case MethodSample:
		return "sampling"
	default:
		return "roots"
	}
}

// KeyCounter hands out the input keys of one upstream call, so that keys
// never repeat within the call, across all of its rounds. The zero value is
// ready to use. It is not safe for concurrent use.
type KeyCounter struct {
	// Slices, not maps: a call asks a few questions (at most
	// max_rounds × max_inputs_per_round), and a parked call keeps its
	// counter.
	used   []string
	counts []methodCount
}

type methodCount struct {
	method string
	n      int
}

// Used reports whether key was already handed out.
func (kc *KeyCounter) Used(key string) bool { return slices.Contains(kc.used, key) }

// next counts one more request of method and returns how many so far.
func (kc *KeyCounter) next(method string) int {
	for i := range kc.counts {
		if kc.counts[i].method == method {
			kc.counts[i].n++
			return kc.counts[i].n
		}
	}
	kc.counts = append(kc.counts, methodCount{method, 1})
	return 1
}

// AppendBinary appends kc's state: the counts per method, then the keys
// handed out (uvarint lengths). It is sealed, so DecodeKeyCounter trusts
// its shape and only guards against running off the end.
func (kc *KeyCounter) AppendBinary(b []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(kc.counts)))
	for _, mc := range kc.counts {
		b = binary.AppendUvarint(b, uint64(len(mc.method)))
		b = append(b, mc.method...)
		b = binary.AppendUvarint(b, uint64(mc.n))
	}
	for _, k := range kc.used {
		b = binary.AppendUvarint(b, uint64(len(k)))
		b = append(b, k...)
	}
	return b
}

// DecodeKeyCounter reads what AppendBinary wrote (a zero counter for
// anything else).
func DecodeKeyCounter(b []byte) KeyCounter {
	var kc KeyCounter
	str := func() (string, bool) {
		n, w := binary.Uvarint(b)
		if w <= 0 || n > uint64(len(b)-w) {
			return "", false
		}
		s := string(b[w : w+int(n)])
		b = b[w+int(n):]
		return s, true
	}
	n, w := binary.Uvarint(b)
	if w <= 0 || n > 16 {
		return KeyCounter{}
	}
	b = b[w:]
	for range n {
		m, ok := str()
		if !ok {
			return KeyCounter{}
		}
		c, w := binary.Uvarint(b)
		if w <= 0 || c > 1<<20 {
			return KeyCounter{}
		}
		b = b[w:]
		kc.counts = append(kc.counts, methodCount{m, int(c)})
	}
	for len(b) > 0 {
		k, ok := str()
		if !ok {
			return KeyCounter{}
		}
		kc.used = append(kc.used, k)
	}
	return kc
}

// assign picks the key of the next request of method: hint when it is a
// valid key not yet used, else "<base>-<ordinal>" with ordinal one more
// than the number of requests of method keyed so far (skipping ordinals
// whose key a hint already took).
func (kc *KeyCounter) assign(method, hint string) string {
	count := kc.next(method)
	key := hint
	if !validInputKey(hint) || kc.Used(hint) {
		base := keyBase(method)
		for n := count; ; n++ {
			key = base + "-" + strconv.Itoa(n)
			if !kc.Used(key) {
				break
			}
		}
	}
	kc.used = append(kc.used, key)
	return key
}

// validInputKey reports whether k is 1 to MaxInputKeyLen visible ASCII
// characters (0x21-0x7E).
func validInputKey(k string) bool {
	if k == "" || len(k) > MaxInputKeyLen {
		return false
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x21 || k[i] > 0x7e {
			return false
		}
	}
	return true
}

// NewInputRequest turns the method and params of an in-line JSON-RPC
// request from a legacy server into a modern input request (the caller
// has already dropped jsonrpc and id). The params are cleaned:
//
//   - elicitation/create loses elicitationId (2025 URL mode; 2026
//     ElicitRequestURLParams has none) and task;
//   - sampling/createMessage loses task (2025 TaskAugmentedRequestParams,
//     gone in 2026);
//   - InputKeyHint is removed from params._meta, and so is a _meta that
//     this leaves empty.
//
// Everything else is kept verbatim. The key is the hint when it is valid
// (see InputKeyHint) and not yet used by kc, else derived from the method
// and an ordinal: "elicitation-N", "sampling-N", "roots-N". kc must live as
// long as the upstream call; nil uses a fresh counter.
//
// The request is refused (an error wrapping ErrInputRequest, with no key
// used up) when method is not an input method; when params is not a JSON
// object without repeated members (roots/list may have none); or when a
// member the 2026-07-28 schema requires is missing or mistyped:
// elicitation/create needs a string message and either (form, mode absent
// or "form") an object requestedSchema or (mode "url") a string url;
// sampling/createMessage needs a messages array and a numeric maxTokens.
func NewInputRequest(method string, params []byte, kc *KeyCounter) (InputRequest, error) {
	if !IsInputMethod(method) {
		return InputRequest{}, fmt.Errorf("%w: method %q is not an input method", ErrInputRequest, jsonrpc.Clip(method))
	}
	if kc == nil {
		kc = new(KeyCounter)
	}
	params = bytes.TrimSpace(params)
	if len(params) == 0 || string(params) == "null" {
		if method != MethodListRoots {
			return InputRequest{}, fmt.Errorf("%w: %s needs params", ErrInputRequest, method)
		}
		// params is optional in roots/list, but some clients (the go-sdk
		// 1.8's InputRequestMap) cannot decode an input request without
		// it: an empty object means the same.
		return InputRequest{Key: kc.assign(method, ""), Method: method, Params: json.RawMessage(`{}`)}, nil
	}
	src := string(params)
	if src[0] != '{' || jsonrpc.ValidJSONString(src) != nil {
		return InputRequest{}, fmt.Errorf("%w: params is not a JSON object", ErrInputRequest)
	}
	ms, dup := jsonrpc.Members(src)
	if dup != "" {
		return InputRequest{}, fmt.Errorf("%w: repeated member %q in params", ErrInputRequest, jsonrpc.Clip(dup))
	}
	if err := checkInputParams(method, ms); err != nil {
		return InputRequest{}, err
	}

	var drop []string
	hint := ""
	metaRepl, metaEmptied := "", false
	for _, m := range ms {
		switch m.Name {
		case "elicitationId":
			if method == MethodElicit {
				drop = append(drop, m.Name)
			}
		case "task":
			if method != MethodListRoots {
				drop = append(drop, m.Name)
			}
		case "_meta":
			if !m.Val.IsObject() {
				continue
			}
			hv := m.Val.Get(gjson.Escape(InputKeyHint))
			if !hv.Exists() {
				continue
			}
			if hv.Type == gjson.String {
				hint = hv.Str
			}
			metaRepl = jsonrpc.RemoveMembers(m.Val.Raw, InputKeyHint)
			metaEmptied = metaRepl == "{}"
		}
	}
	out := src
	if len(drop) > 0 || metaRepl != "" {
		b := make([]byte, 0, len(src))
		b = append(b, '{')
		for _, m := range ms {
			val := m.Val.Raw
			if m.Name == "_meta" && metaRepl != "" {
				if metaEmptied {
					continue
				}
				val = metaRepl
			} else if contains(drop, m.Name) {
				continue
			}
			b = jsonrpc.AppendMember(b, m.Key, val)
		}
		out = string(append(b, '}'))
	}
	return InputRequest{Key: kc.assign(method, hint), Method: method, Params: []byte(out)}, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// checkInputParams checks the members the 2026-07-28 schema requires in the
// params of an input request.
func checkInputParams(method string, ms []jsonrpc.Member) error {
	get := func(name string) gjson.Result {
		for _, m := range ms {
			if m.Name == name {
				return m.Val
			}
		}
		return gjson.Result{}
	}
	switch method {
	case MethodElicit:
		if get("message").Type != gjson.String {
			return fmt.Errorf("%w: elicitation/create needs a string message", ErrInputRequest)
		}
		switch mode := get("mode"); {
		case !mode.Exists() || mode.Type == gjson.String && mode.Str == "form":
			if !get("requestedSchema").IsObject() {
				return fmt.Errorf("%w: form elicitation needs an object requestedSchema", ErrInputRequest)
			}
		case mode.Type == gjson.String && mode.Str == "url":
			if get("url").Type != gjson.String {
				return fmt.Errorf("%w: URL elicitation needs a string url", ErrInputRequest)
			}
		default:
			return fmt.Errorf("%w: unknown elicitation mode %s", ErrInputRequest, jsonrpc.Clip(mode.Raw))
		}
	case MethodSample:
		if !get("messages").IsArray() || get("maxTokens").Type != gjson.Number {
			return fmt.Errorf("%w: sampling/createMessage needs a messages array and a numeric maxTokens", ErrInputRequest)
		}
	}
	return nil
}

// ElicitMode returns "url" for a URL-mode elicitation and "form" otherwise.
func ElicitMode(params []byte) string {
	if m := gjson.GetBytes(params, "mode"); m.Type == gjson.String && m.Str == "url" {
		return "url"
	}
	return "form"
}

// samplingUsesTools reports whether sampling params use tools or toolChoice.
func samplingUsesTools(params []byte) bool {
	r := gjson.GetManyBytes(params, "tools", "toolChoice")
	return r[0].Exists() || r[1].Exists()
}

// RequiredCapability returns the client capabilities an input request
// needs, as the JSON ClientCapabilities object for the requiredCapabilities
// of a MissingRequiredClientCapability error (2026-07-28 schema.ts,
// SEP-2322): elicitation/create needs {"elicitation":{}} (form, which an empty
// elicitation object implies) or {"elicitation":{"url":{}}} (mode "url");
// sampling/createMessage needs {"sampling":{}}, or {"sampling":{"tools":{}}}
// when params has tools or toolChoice; roots/list needs {"roots":{}}. It
// returns nil for other methods.
func RequiredCapability(method string, params []byte) []byte {
	switch method {
	case MethodElicit:
		if ElicitMode(params) == "url" {
			return []byte(`{"elicitation":{"url":{}}}`)
		}
		return []byte(`{"elicitation":{}}`)
	case MethodSample:
		if samplingUsesTools(params) {
			return []byte(`{"sampling":{"tools":{}}}`)
		}
		return []byte(`{"sampling":{}}`)
	case MethodListRoots:
		return []byte(`{"roots":{}}`)
	}
	return nil
}

// ClientSupports reports whether the client capabilities caps (the raw
// JSON object of the modern request's _meta clientCapabilities) allow the
// input request method with params. Capabilities count only as JSON
// objects:
//
//   - elicitation/create, form mode: caps.elicitation is present and either
//     declares form or declares neither form nor url (an empty elicitation
//     object means form only, the 2026-07-28 specification,
//     modelcontextprotocol.io/specification/2026-07-28/client/elicitation,
//     Capabilities); URL mode: caps.elicitation.url is present;
//   - sampling/createMessage: caps.sampling, plus caps.sampling.tools when
//     params has tools or toolChoice (the client MUST otherwise fail the
//     request). sampling.context is not required for includeContext: the
//     client MAY ignore includeContext;
//   - roots/list: caps.roots.
//
// Other methods, and caps that are not an object, are not supported.
func ClientSupports(caps []byte, method string, params []byte) bool {
	c := gjson.ParseBytes(bytes.TrimSpace(caps))
	if !c.IsObject() {
		return false
	}
	switch method {
	case MethodElicit:
		e := c.Get("elicitation")
		if !e.IsObject() {
			return false
		}
		form, url := e.Get("form"), e.Get("url")
		if ElicitMode(params) == "url" {
			return url.IsObject()
		}
		return form.IsObject() || (!form.Exists() && !url.Exists())
	case MethodSample:
		s := c.Get("sampling")
		if !s.IsObject() {
			return false
		}
		return !samplingUsesTools(params) || s.Get("tools").IsObject()
	case MethodListRoots:
		return c.Get("roots").IsObject()
	}
	return false
}

// ValidateInputResponse checks a client's inputResponses[key] value against
// the result type of method in the 2026-07-28 schema, before the gateway
// sends it upstream as a JSON-RPC result. The value must be a JSON object
// without repeated members, and:
//
//   - elicitation/create (ElicitResult): action is "accept", "decline" or
//     "cancel"; content, when present, is an object whose values are
//     strings, numbers, booleans or arrays of strings;
//   - sampling/createMessage (CreateMessageResult): role is "assistant" or
//     "user"; content is an object with a string type, or an array of such
//     objects; model is a string; stopReason, when present, is a string;
//   - roots/list (ListRootsResult): roots is an array of objects, each with
//     a string uri that starts with "file://" and, when present, a string
//     name.
//
// Other members are allowed. Errors wrap ErrInputResponse and say what is
// wrong.
func ValidateInputResponse(method string, resp []byte) error {
	resp = bytes.TrimSpace(resp)
	if !IsInputMethod(method) {
		return fmt.Errorf("%w: %q is not an input method", ErrInputResponse, jsonrpc.Clip(method))
	}
	if len(resp) == 0 || resp[0] != '{' || jsonrpc.ValidJSON(resp) != nil {
		return fmt.Errorf("%w: the response to %s must be a JSON object", ErrInputResponse, method)
	}
	ms, dup := jsonrpc.Members(string(resp))
	if dup != "" {
		return fmt.Errorf("%w: repeated member %q", ErrInputResponse, jsonrpc.Clip(dup))
	}
	get := func(name string) gjson.Result {
		for _, m := range ms {
			if m.Name == name {
				return m.Val
			}
		}
		return gjson.Result{}
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s: "+format, append([]any{ErrInputResponse, method}, args...)...)
	}
	switch method {
	case MethodElicit:
		switch a := get("action"); {
		case a.Type != gjson.String:
			return bad("action must be a string")
		case a.Str != "accept" && a.Str != "decline" && a.Str != "cancel":
			return bad(`action %q is not "accept", "decline" or "cancel"`, jsonrpc.Clip(a.Str))
		}
		c := get("content")
		if !c.Exists() {
			return nil
		}
		if !c.IsObject() {
			return bad("content must be an object")
		}
		var err error
		c.ForEach(func(k, v gjson.Result) bool {
			switch v.Type {
			case gjson.String, gjson.Number, gjson.True, gjson.False:
				return true
			}
			if v.IsArray() {
				ok := true
				v.ForEach(func(_, e gjson.Result) bool {
					ok = e.Type == gjson.String
					return ok
				})
				if ok {
					return true
				}
			}
			err = bad("content %q must be a string, number, boolean or array of strings", jsonrpc.Clip(k.Str))
			return false
		})
		return err
	case MethodSample:
		if r := get("role"); r.Type != gjson.String || (r.Str != "assistant" && r.Str != "user") {
			return bad(`role must be "assistant" or "user"`)
		}
		c := get("content")
		isBlock := func(v gjson.Result) bool { return v.IsObject() && v.Get("type").Type == gjson.String }
		switch {
		case c.IsArray():
			ok := true
			c.ForEach(func(_, v gjson.Result) bool {
				ok = isBlock(v)
				return ok
			})
			if !ok {
				return bad("every content block must be an object with a string type")
			}
		case !isBlock(c):
			return bad("content must be an object with a string type, or an array of them")
		}
		if get("model").Type != gjson.String {
			return bad("model must be a string")
		}
		if s := get("stopReason"); s.Exists() && s.Type != gjson.String {
			return bad("stopReason must be a string")
		}
	case MethodListRoots:
		roots := get("roots")
		if !roots.IsArray() {
			return bad("roots must be an array")
		}
		var err error
		i := 0
		roots.ForEach(func(_, r gjson.Result) bool {
			u := r.Get("uri")
			switch {
			case !r.IsObject():
				err = bad("roots[%d] must be an object", i)
			case u.Type != gjson.String || !strings.HasPrefix(u.Str, "file://"):
				err = bad(`roots[%d].uri must be a string starting with "file://"`, i)
			case r.Get("name").Exists() && r.Get("name").Type != gjson.String:
				err = bad("roots[%d].name must be a string", i)
			}
			i++
			return err == nil
		})
		return err
	}
	return nil
}

// InputRequiredResult builds the result object of a modern
// InputRequiredResult: {"resultType":"input_required","inputRequests":
// {key:{"method":...,"params":...}},"requestState":state}, with the entries
// in the order of reqs. inputRequests is omitted when reqs is empty, params
// when nil, and requestState when state is empty; the spec requires at
// least one of inputRequests and requestState. Each Params must be valid
// JSON (NewInputRequest guarantees it). Pass the result through
// ReshapeResult to add _meta serverInfo.
func InputRequiredResult(reqs []InputRequest, state string) []byte {
	n := 64 + len(state)
	for _, r := range reqs {
		n += len(r.Key) + len(r.Method) + len(r.Params) + 32
	}
	b := make([]byte, 0, n)
	b = append(b, `{"resultType":"input_required"`...)
	if len(reqs) > 0 {
		b = append(b, `,"inputRequests":{`...)
		for i, r := range reqs {
			if i > 0 {
				b = append(b, ',')
			}
			b = AppendJSONString(b, r.Key)
			b = append(b, `:{"method":`...)
			b = AppendJSONString(b, r.Method)
			if len(r.Params) > 0 {
				b = append(b, `,"params":`...)
				b = append(b, r.Params...)
			}
			b = append(b, '}')
		}
		b = append(b, '}')
	}
	if state != "" {
		b = append(b, `,"requestState":`...)
		b = AppendJSONString(b, state)
	}
	return append(b, '}')
}

// AppendJSONString appends s as a JSON string.
func AppendJSONString(b []byte, s string) []byte {
	q, _ := json.Marshal(s) // a string always marshals
	return append(b, q...)
}

// CancelAnswer returns what the gateway sends upstream, as the JSON-RPC
// response to an in-line request, when the modern client abandons it (the
// call expired, found no room among the parked calls, or the client went
// away). Exactly one of result and errObj is non-nil:
//
//   - elicitation/create: result {"action":"cancel"}, the ElicitResult of a
//     user who "dismissed without making an explicit choice";
//   - sampling/createMessage: error {"code":-1,"message":"User rejected
//     sampling request"}, the client error the 2025-11-25
//     specification lists (…/specification/2025-11-25/client/sampling,
//     Error Handling);
//   - roots/list: error -32603 (InternalError), the other error the 2025-11-25
//     specification lists (…/specification/2025-11-25/client/roots, Error
//     Handling); -32601 would tell the server
//     the client has no roots capability, which is not what happened;
//   - any other method: error -32601 (MethodNotFound).
func CancelAnswer(method string) (result []byte, errObj []byte) {
	switch method {
	case MethodElicit:
		return []byte(`{"action":"cancel"}`), nil
	case MethodSample:
		return nil, []byte(`{"code":-1,"message":"User rejected sampling request"}`)
	case MethodListRoots:
		return nil, []byte(`{"code":-32603,"message":"Internal error: the client did not answer the roots/list request"}`)
	}
	return nil, []byte(`{"code":-32601,"message":"Method not found"}`)
}

// URLElicitationFromError turns a legacy URLElicitationRequiredError (code
// -32042, 2025-11-25 schema.ts: data.elicitations is an array of
// ElicitRequestURLParams {mode:"url", message, elicitationId, url}) into
// URL-mode elicitation/create input requests, since 2026-07-28 removed the
// error. Each entry loses elicitationId (and
// task); its other members are kept. Keys are "url-elicitation-1",
// "url-elicitation-2", ... in order: the error ends the upstream call, so
// these are the only keys of their InputRequiredResult. ok is false when
// errObj is not such an error, data.elicitations is empty, or an entry is
// not a valid URL-mode elicitation.
func URLElicitationFromError(errObj []byte) ([]InputRequest, bool) {
	e := gjson.ParseBytes(bytes.TrimSpace(errObj))
	if !e.IsObject() || jsonrpc.ValidJSON(errObj) != nil {
		return nil, false
	}
	code := e.Get("code")
	if code.Type != gjson.Number || code.Num != URLElicitationRequired {
		return nil, false
	}
	list := e.Get("data.elicitations")
	if !list.IsArray() {
		return nil, false
	}
	var reqs []InputRequest
	ok := true
	list.ForEach(func(_, v gjson.Result) bool {
		if m := v.Get("mode"); m.Type != gjson.String || m.Str != "url" {
			ok = false
			return false
		}
		var kc KeyCounter // keys are set below
		r, err := NewInputRequest(MethodElicit, []byte(v.Raw), &kc)
		if err != nil {
			ok = false
			return false
		}
		r.Key = urlElicitKeyBase + "-" + strconv.Itoa(len(reqs)+1)
		reqs = append(reqs, r)
		return true
	})
	if !ok || len(reqs) == 0 {
		return nil, false
	}
	return reqs, true
}
