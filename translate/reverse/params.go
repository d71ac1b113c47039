package reverse

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/seal"
	"github.com/tidwall/gjson"
)

// This file gives the reverse bridge's tools/call requests the Mcp-Param-*
// headers of SEP-2243: a modern server mirrors tool
// arguments annotated "x-mcp-header" into headers and rejects a call that
// lacks them (-32020). A legacy client knows nothing of them, so the gateway
// reads the annotations from the upstream's tools/list.

// Bounds of the x-mcp-header lookup.
const (
	maxToolListPages   = 20
	maxHeaderDepth     = 8
	minToolListTTL     = time.Minute
	maxToolListTTL     = time.Hour
	maxToolListsCached = 1024
)

// paramHeader is one x-mcp-header annotation: the header Mcp-Param-<Name>
// mirrors the argument at path.
type paramHeader struct {
	name string
	path []string
}

// toolHeaders maps tool names to their annotations (tools without any are
// absent).
type toolHeaders map[string][]paramHeader

// headerNamePattern is an RFC 9110 token, which header names must be.
var headerNamePattern = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")

// schemaHeaders collects the x-mcp-header annotations of an inputSchema,
// following only properties chains (the annotations SEP-2243 allows).
func schemaHeaders(schema gjson.Result, path []string, out []paramHeader) []paramHeader {
	if len(path) >= maxHeaderDepth {
		return out
	}
	schema.Get("properties").ForEach(func(k, prop gjson.Result) bool {
		if !prop.IsObject() {
			return true
		}
		p := append(append([]string(nil), path...), k.Str)
		if h := prop.Get(gjson.Escape("x-mcp-header")); h.Type == gjson.String && headerNamePattern.MatchString(h.Str) {
			out = append(out, paramHeader{name: h.Str, path: p})
		}
		return true
	})
	schema.Get("properties").ForEach(func(k, prop gjson.Result) bool {
		if prop.IsObject() && prop.Get("properties").IsObject() {
			out = schemaHeaders(prop, append(append([]string(nil), path...), k.Str), out)
		}
		return true
	})
	return out
}

// checkUniqueParams refuses a legacy client's params in which a member
// name repeats where the gateway reads a header from: params itself (name
// and uri become Mcp-Name, arguments the Mcp-Param-* headers), and the
// arguments object with the objects nested in it through objects, down to
// maxHeaderDepth (every path an x-mcp-header annotation can name). The
// headers are read with gjson, which takes the first of repeated members,
// while the upstream (encoding/json, JSON.parse) acts on the last: a call
// could otherwise run one tool under another's Mcp-Name. params is the raw
// params object (nil when absent). The error is -32602 with HTTP 400, as
// for a modern request's repeated params members (ValidateModern).
func checkUniqueParams(params []byte) *jsonrpc.RPCError {
	p := gjson.ParseBytes(params)
	if dup := jsonrpc.ScanMembers(p, nil, nil); dup != "" {
		return jsonrpc.Errorf(http.StatusBadRequest, jsonrpc.InvalidParams, "Invalid params: duplicate member %q in params", jsonrpc.Clip(dup))
	}
	if dup := repeatedMember(p.Get("arguments"), maxHeaderDepth); dup != "" {
		return jsonrpc.Errorf(http.StatusBadRequest, jsonrpc.InvalidParams, "Invalid params: duplicate member %q in params.arguments", jsonrpc.Clip(dup))
	}
	return nil
}

// repeatedMember returns the first member name repeated in obj or in the
// objects nested in it through objects, looking levels deep ("" if none, or
// if obj is not an object).
func repeatedMember(obj gjson.Result, levels int) (dup string) {
	if levels <= 0 || !obj.IsObject() {
		return ""
	}
	if dup = jsonrpc.ScanMembers(obj, nil, nil); dup != "" {
		return dup
	}
	obj.ForEach(func(_, v gjson.Result) bool {
		dup = repeatedMember(v, levels-1)
		return dup == ""
	})
	return dup
}

// headerValue renders an argument for its Mcp-Param header: strings
// (Base64-encoded when needed), integers in decimal, booleans; ok is false
// for null, absent and every other value, whose header is omitted.
func headerValue(v gjson.Result) (string, bool) {
	switch v.Type {
	case gjson.String:
		return EncodeHeaderValue(v.Str), true
	case gjson.True:
		return "true", true
	case gjson.False:
		return "false", true
	case gjson.Number:
		if _, err := strconv.ParseInt(v.Raw, 10, 64); err == nil {
			return v.Raw, true
		}
		if v.Num == float64(int64(v.Num)) {
			return strconv.FormatInt(int64(v.Num), 10), true
		}
	}
	return "", false
}

// setParamHeaders sets on hdr the Mcp-Param-* headers of a call to a tool
// with annotations hs and the given raw arguments.
func setParamHeaders(hdr http.Header, hs []paramHeader, arguments gjson.Result) {
	for _, h := range hs {
		esc := make([]string, len(h.path))
		for i, p := range h.path {
			esc[i] = gjson.Escape(p)
		}
		if v, ok := headerValue(arguments.Get(strings.Join(esc, "."))); ok {
			hdr.Set("Mcp-Param-"+h.name, v)
		}
	}
}

// FillParamHeaders sets on hdr the Mcp-Param-* headers that a modern
// client's tools/call of tool, with the raw arguments, should carry and
// hdr lacks (a header present is left as it is). The annotations are the
// upstream's tools' x-mcp-header ones, read with its tools/list for
// principal, sending header (the client's credentials), and cached as for
// the bridge's own calls; opts are those of the configuration serving the
// request (nil: the bridge's own). It returns how many headers it set.
func (rv *Bridge) FillParamHeaders(ctx context.Context, opts *Options, upstream string, principal [16]byte, header, hdr http.Header, tool string, arguments []byte) int {
	s := &Session{ClientSession: seal.ClientSession{Upstream: upstream, Principal: principal, Capabilities: []byte("{}")}, opts: opts}
	hs := rv.toolHeadersOf(ctx, s, header, false)[tool]
	if len(hs) == 0 {
		return 0
	}
	want := http.Header{}
	setParamHeaders(want, hs, gjson.ParseBytes(arguments))
	n := 0
	for k, v := range want {
		if len(hdr.Values(k)) == 0 {
			hdr[k] = v
			n++
		}
	}
	return n
}

// toolHeadersOf returns the x-mcp-header annotations of the upstream's
// tools, from the cache unless refresh is set.
func (rv *Bridge) toolHeadersOf(ctx context.Context, s *Session, header http.Header, refresh bool) toolHeaders {
	now := time.Now()
	key := s.Upstream + "\x00" + string(s.Principal[:])
	if !refresh {
		if th, ok := rv.toolLists.get(key, now); ok {
			return th
		}
	}
	th := toolHeaders{}
	ttl := maxToolListTTL
	cursor := ""
	for range maxToolListPages {
		var params []byte
		if cursor != "" {
			params, _ = json.Marshal(struct {
				Cursor string `json:"cursor"`
			}{cursor})
		}
		id := rv.upstreamID(rv.options(s))
		body, err := upstreamRequest(id, "tools/list", params, s, "", nil, "")
		if err != nil {
			break
		}
		final, rerr := rv.exchange(ctx, rv.options(s), s.Upstream, modernHeader(header, "tools/list", "", false), body, id, nil, "")
		res := final.Get("result")
		if rerr != nil || !res.IsObject() {
			// What was read is kept, briefly: the upstream is asked
			// again a minute on, not an hour.
			ttl = minToolListTTL
			break
		}
		res.Get("tools").ForEach(func(_, tool gjson.Result) bool {
			if hs := schemaHeaders(tool.Get("inputSchema"), nil, nil); len(hs) > 0 {
				th[tool.Get("name").String()] = hs
			}
			return true
		})
		if t := res.Get("ttlMs"); translate.ValidTTL(t) {
			ttl = min(ttl, time.Duration(t.Num)*time.Millisecond)
		}
		if cursor = res.Get("nextCursor").String(); cursor == "" {
			break
		}
	}
	rv.toolLists.put(key, th, now.Add(max(ttl, minToolListTTL)), now)
	return th
}
