package rest

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"mime"
	"net/http"
	"strconv"

	"github.com/tidwall/gjson"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/caddymodule/face"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
)

// This file serves what the REST face answers at once: the lists (every
// page gathered, a strong ETag), a resource's bytes, a prompt, a
// completion.

// listPagesMax bounds the pages gathered for one list.
const listPagesMax = 100

// lists are the list routes: their method and their result's member.
var lists = map[string]struct{ method, member string }{
	"tools":               {"tools/list", "tools"},
	"prompts":             {"prompts/list", "prompts"},
	"resources":           {"resources/list", "resources"},
	"resources-templates": {"resources/templates/list", "resourceTemplates"},
}

// cacheHint is a result's caching hint (CacheableResult): ttlMs (-1 when
// absent) and cacheScope.
type cacheHint struct {
	ttl    int64
	public bool
}

// cacheOf reads a result's caching hint.
func cacheOf(res gjson.Result) cacheHint {
	c := cacheHint{ttl: -1}
	if t := res.Get("ttlMs"); t.Type == gjson.Number {
		c.ttl = max(t.Int(), 0)
	}
	c.public = res.Get("cacheScope").String() == "public"
	return c
}

// header is the Cache-Control of a result with c: max-age from ttlMs
// (private unless the server said public), or no-cache without one.
func (c cacheHint) header() string {
	if c.ttl < 0 {
		return "private, no-cache"
	}
	scope := "private"
	if c.public {
		scope = "public"
	}
	return scope + ", max-age=" + strconv.FormatInt(c.ttl/1000, 10)
}

// gather gathers every page of a list and returns its items (raw
// JSON) and the first page's caching hint; on failure it has answered
// the client.
func (f *Face) gather(w http.ResponseWriter, r *http.Request, kind string) ([]json.RawMessage, cacheHint, bool) {
	items, cache, fail := f.gatherItems(r.Context(), r, kind)
	if fail != nil {
		_ = writeProblem(w, fail.Status, fail.Detail)
		return nil, cache, false
	}
	return items, cache, true
}

// gatherItems gathers every page of a list: its items (raw JSON) and
// the first page's caching hint, or why not.
func (f *Face) gatherItems(ctx context.Context, r *http.Request, kind string) ([]json.RawMessage, cacheHint, *face.Failure) {
	l := lists[kind]
	var items []json.RawMessage
	cache := cacheHint{ttl: -1}
	cursor := ""
	for page := 0; ; page++ {
		if page == listPagesMax {
			return nil, cache, &face.Failure{Status: http.StatusBadGateway, Detail: "the upstream's list has more than " + strconv.Itoa(listPagesMax) + " pages"}
		}
		a, fail := f.rpc(ctx, r, l.method, "", listParams{Cursor: cursor, Meta: meta})
		if fail != nil {
			return nil, cache, fail
		}
		if e, ok := a.Error(); ok {
			return nil, cache, &face.Failure{Status: errorStatus(a.Status, e), Detail: "the upstream answered: " + jsonrpc.Clip(e.Get("message").String())}
		}
		res := a.Result()
		if page == 0 {
			cache = cacheOf(res)
		}
		res.Get(l.member).ForEach(func(_, v gjson.Result) bool {
			items = append(items, json.RawMessage(v.Raw))
			return true
		})
		next := res.Get("nextCursor").String()
		if next == "" || next == cursor {
			return items, cache, nil
		}
		cursor = next
	}
}

// toolUnknown reports whether the upstream's tools/list, asked now,
// lacks the tool name (false when the list cannot be had).
func (f *Face) toolUnknown(ctx context.Context, r *http.Request, name string) bool {
	tools, _, fail := f.gatherItems(ctx, r, "tools")
	if fail != nil {
		return false
	}
	for _, t := range tools {
		if gjson.GetBytes(t, "name").String() == name {
			return false
		}
	}
	return true
}

// list answers a whole list as MCP's list result (no nextCursor),
// with a strong ETag; If-None-Match → 304. The result's ttlMs and
// cacheScope become Cache-Control.
func (f *Face) list(w http.ResponseWriter, r *http.Request, kind string) error {
	items, cache, ok := f.gather(w, r, kind)
	if !ok {
		return nil
	}
	if items == nil {
		items = []json.RawMessage{}
	}
	list, err := json.Marshal(items)
	if err != nil {
		return writeProblem(w, http.StatusBadGateway, "the upstream's list could not be encoded")
	}
	b := jsonrpc.AppendMember([]byte{'{'}, jsonrpc.Quote(lists[kind].member), string(list))
	b = append(b, '}')
	sum := sha256.Sum256(b)
	etag := `"` + hex.EncodeToString(sum[:16]) + `"`
	w.Header().Set("ETag", etag)
	w.Header().Set("Cache-Control", cache.header())
	if inm := r.Header.Get("If-None-Match"); inm != "" && etagMatches(inm, etag[1:len(etag)-1]) {
		w.WriteHeader(http.StatusNotModified)
		return nil
	}
	return writeBytes(w, r, http.StatusOK, "application/json", b)
}

// resource answers the bytes of the resource named name in
// resources/list: its first content, a blob decoded, with its mimeType.
func (f *Face) resource(w http.ResponseWriter, r *http.Request, name string) error {
	items, _, ok := f.gather(w, r, "resources")
	if !ok {
		return nil
	}
	uri := ""
	for _, it := range items {
		if v := gjson.ParseBytes(it); v.Get("name").String() == name {
			uri = v.Get("uri").String()
			break
		}
	}
	if uri == "" {
		return writeProblem(w, http.StatusNotFound, "no resource of that name in resources/list")
	}
	params := struct {
		URI  string    `json:"uri"`
		Meta face.Meta `json:"_meta"`
	}{uri, meta}
	a, fail := f.rpc(r.Context(), r, "resources/read", uri, params)
	if fail != nil {
		return writeProblem(w, fail.Status, fail.Detail)
	}
	if e, ok := a.Error(); ok {
		st := errorStatus(a.Status, e)
		if code := e.Get("code").Int(); code == -32002 || code == jsonrpc.InvalidParams && e.Get("data.uri").Exists() {
			st = http.StatusNotFound // resource not found: 2025-11-25's code, and 2026-07-28's
		}
		return writeProblem(w, st, "the upstream answered: "+jsonrpc.Clip(e.Get("message").String()))
	}
	c := a.Result().Get("contents.0")
	if !c.Exists() {
		return writeProblem(w, http.StatusNotFound, "the resource has no contents")
	}
	ct := c.Get("mimeType").String()
	var body []byte
	if blob := c.Get("blob"); blob.Exists() {
		var err error
		if body, err = base64.StdEncoding.DecodeString(blob.String()); err != nil {
			return writeProblem(w, http.StatusBadGateway, "the upstream's blob is not valid base64")
		}
		if ct == "" {
			ct = "application/octet-stream"
		}
	} else {
		body = []byte(c.Get("text").String())
		if ct == "" {
			ct = "text/plain; charset=utf-8"
		}
	}
	if _, _, err := mime.ParseMediaType(ct); err != nil {
		ct = "application/octet-stream"
	}
	sum := sha256.Sum256(body)
	etag := hex.EncodeToString(sum[:16])
	w.Header().Set("ETag", `"`+etag+`"`)
	w.Header().Set("Cache-Control", cacheOf(a.Result()).header())
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if inm := r.Header.Get("If-None-Match"); inm != "" && etagMatches(inm, etag) {
		w.WriteHeader(http.StatusNotModified)
		return nil
	}
	return writeBytes(w, r, http.StatusOK, ct, body)
}

// prompt answers prompts/get of name; the body (optional) is
// `{"arguments": {...}}`.
func (f *Face) prompt(w http.ResponseWriter, r *http.Request, name string) error {
	body, ok := f.readBody(w, r, true)
	if !ok {
		return nil
	}
	params := struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments,omitempty"`
		Meta      face.Meta       `json:"_meta"`
	}{Name: name, Meta: meta}
	if a := gjson.GetBytes(body, "arguments"); a.IsObject() {
		params.Arguments = json.RawMessage(a.Raw)
	} else if a.Exists() && a.Type != gjson.Null {
		return writeProblem(w, http.StatusBadRequest, "arguments must be an object")
	}
	return f.forward(w, r, "prompts/get", name, params)
}

// complete answers completion/complete; the body is its params
// (`ref`, `argument`, `context`).
func (f *Face) complete(w http.ResponseWriter, r *http.Request) error {
	body, ok := f.readBody(w, r, false)
	if !ok {
		return nil
	}
	b := gjson.ParseBytes(body)
	if !b.IsObject() || !b.Get("ref").IsObject() || !b.Get("argument").IsObject() {
		return writeProblem(w, http.StatusBadRequest, `the body must be completion/complete's params: {"ref": {...}, "argument": {...}}`)
	}
	m, _ := json.Marshal(meta)
	params := json.RawMessage(jsonrpc.SetMember(b.Raw, "_meta", string(m)))
	return f.forward(w, r, "completion/complete", "", params)
}

// forward makes the request and answers its result as is.
func (f *Face) forward(w http.ResponseWriter, r *http.Request, method, name string, params any) error {
	a, fail := f.rpc(r.Context(), r, method, name, params)
	if fail != nil {
		return writeProblem(w, fail.Status, fail.Detail)
	}
	if e, ok := a.Error(); ok {
		return writeProblem(w, errorStatus(a.Status, e), "the upstream answered: "+jsonrpc.Clip(e.Get("message").String()))
	}
	w.Header().Set("Cache-Control", "private, no-store")
	return writeBytes(w, r, http.StatusOK, "application/json", []byte(a.Result().Raw))
}
