package federate

import (
	"slices"
	"strconv"

	"github.com/tidwall/gjson"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
)

// ListKind is one of the four lists a federation merges.
type ListKind uint8

// The lists.
const (
	Tools             ListKind = 1 // tools/list: "tools" by "name", prefixed and filtered
	Prompts           ListKind = 2 // prompts/list: "prompts" by "name", prefixed
	Resources         ListKind = 3 // resources/list: "resources" by "uri", first server wins
	ResourceTemplates ListKind = 4 // resources/templates/list: "resourceTemplates" by "uriTemplate"
)

// MaxListItems bounds the entries taken from one server's page.
const MaxListItems = 10000

type listSpec struct {
	method, array, key string
	renamed            bool
}

var listSpecs = [...]listSpec{
	Tools:             {"tools/list", "tools", "name", true},
	Prompts:           {"prompts/list", "prompts", "name", true},
	Resources:         {"resources/list", "resources", "uri", false},
	ResourceTemplates: {"resources/templates/list", "resourceTemplates", "uriTemplate", false},
}

// ListKindOf is the list a method lists; !ok for any other method.
func ListKindOf(method string) (ListKind, bool) {
	for k := Tools; k <= ResourceTemplates; k++ {
		if listSpecs[k].method == method {
			return k, true
		}
	}
	return 0, false
}

// Method is the list's method, e.g. "tools/list".
func (k ListKind) Method() string { return listSpecs[k].method }

// Part is one server's answer to a fan-out: the result object of its
// JSON-RPC response. A server that did not answer is left out.
type Part struct {
	// Server is the server's index in the Set.
	Server int
	// Result is the JSON-RPC result object the server answered.
	Result []byte
}

// Hidden is an entry of a server that a merge leaves out, for the caller
// to log (a tool its Tools filter drops is not listed: that is
// configuration, not a fault).
type Hidden struct {
	// Server is the server's index in the Set.
	Server int
	// Name is the entry's name or URI as the server gives it ("" when it
	// has none).
	Name string
	// Why is one of the Why* constants.
	Why string
}

// Merged is one merged page of a list.
type Merged struct {
	// Result is the merged result object: the entries of every part in
	// server order, `resultType` "complete", `ttlMs` and `cacheScope`
	// (see Merge). It has no `nextCursor`: the caller seals Next
	// (NextCursor) and sets it (jsonrpc.SetMember).
	Result []byte
	// Next is each server's nextCursor (servers with none are absent).
	Next map[int]string
	// Hidden is what was left out, and why.
	Hidden []Hidden
}

// Merge merges one page of a list from several servers. Parts are taken
// in server order, whatever their order in parts (a part whose Server is
// not an index of set is ignored). Each entry's JSON is
// kept byte for byte, but for the name of a tool or prompt, which becomes
// its shown name (Set.Prefixed). Left out, and listed in Hidden: entries
// that are not objects or lack their key (a string, given once), names
// that may not be shown, a resource URI an earlier server already lists
// (the first server in configuration order wins; within one merge, so
// the caller merges pages of resources in one pass per page), a part's
// entries beyond MaxListItems, and a part that is not a JSON object. Left
// out silently: tools the server's Tools filter drops. Members of the
// parts other than the list, `nextCursor`, `ttlMs` and `cacheScope` are
// dropped.
//
// ttlMs is the smallest of the parts' (a missing, negative or
// non-integer ttlMs counts as 0); cacheScope is "public" only when every
// part says "public" (and there is at least one).
func Merge(set *Set, kind ListKind, parts []Part) Merged {
	spec := listSpecs[kind]
	parts = inServerOrder(set, parts)
	m := Merged{Next: map[int]string{}}
	seen := map[string]bool{} // resource URIs already shown
	b := make([]byte, 0, 256)
	b = append(b, `{"`...)
	b = append(b, spec.array...)
	b = append(b, `":[`...)
	first := true
	for _, p := range parts {
		res, ok := resultObject(p.Result)
		if !ok {
			m.Hidden = append(m.Hidden, Hidden{Server: p.Server, Why: WhyMalformed})
			continue
		}
		if c := res.Get("nextCursor"); c.Type == gjson.String && c.Str != "" {
			m.Next[p.Server] = c.Str
		}
		n := 0
		res.Get(spec.array).ForEach(func(_, item gjson.Result) bool {
			if n == MaxListItems {
				m.Hidden = append(m.Hidden, Hidden{Server: p.Server, Why: WhyTooMany})
				return false
			}
			n++
			start := len(b)
			if !first {
				b = append(b, ',')
			}
			var kept bool
			var h Hidden
			if b, kept, h = appendItem(b, set, kind, p.Server, item, seen); h.Why != "" {
				m.Hidden = append(m.Hidden, h)
			}
			if kept {
				first = false
			} else {
				b = b[:start]
			}
			return true
		})
	}
	b = append(b, ']')
	m.Result = appendCacheable(b, parts)
	return m
}

// appendItem appends the text of one entry in the merged list to b, or
// says it is left out (!kept), and why when it is hidden (a zero Hidden
// when it is not).
func appendItem(b []byte, set *Set, kind ListKind, server int, item gjson.Result, seen map[string]bool) (_ []byte, kept bool, _ Hidden) {
	spec := listSpecs[kind]
	v, ok := onlyString(item, spec.key)
	if !ok {
		return b, false, Hidden{Server: server, Why: WhyMalformed}
	}
	key := v.Str
	switch kind {
	case Tools, Prompts:
		if kind == Tools && !set.servers[server].Tools.Allows(key) {
			return b, false, Hidden{} // configuration, not a fault
		}
		shown, why := set.shown(server, key)
		if why != "" {
			return b, false, Hidden{Server: server, Name: key, Why: why}
		}
		b = append(b, item.Raw[:v.Index]...)
		b = append(b, jsonrpc.Quote(shown)...)
		return append(b, item.Raw[v.Index+len(v.Raw):]...), true, Hidden{}
	case Resources:
		if seen[key] {
			return b, false, Hidden{Server: server, Name: key, Why: WhyDuplicate}
		}
		seen[key] = true
	}
	return append(b, item.Raw...), true, Hidden{}
}

// onlyString reads the member name of the object v (its Index is its
// offset in v.Raw); !ok when v is not an object, has no such member, has
// it twice, or it is not a string.
func onlyString(v gjson.Result, name string) (gjson.Result, bool) {
	if !v.IsObject() {
		return gjson.Result{}, false
	}
	val, n := member(v.Raw, name)
	return val, n == 1 && val.Type == gjson.String
}

// member reads the member name of the JSON object text obj: its first
// value (its Index is its offset in obj), and how many times obj has it
// (counting stops at 2: a repeated name could be read as one copy here
// and as another by a peer).
func member(obj, name string) (gjson.Result, int) {
	var val gjson.Result
	n := 0
	gjson.Parse(obj).ForEach(func(k, v gjson.Result) bool {
		if k.Str == name {
			if n == 0 {
				val = v
			}
			n++
		}
		return n < 2
	})
	return val, n
}

// resultObject parses a part's result: !ok unless it is valid JSON (of a
// bounded depth) and an object.
func resultObject(b []byte) (gjson.Result, bool) {
	if jsonrpc.ValidJSON(b) != nil {
		return gjson.Result{}, false
	}
	res := gjson.ParseBytes(b)
	return res, res.IsObject()
}

// inServerOrder returns the parts of servers of set sorted by server
// (a part with another index is dropped), leaving parts unchanged.
func inServerOrder(set *Set, parts []Part) []Part {
	parts = slices.DeleteFunc(slices.Clone(parts), func(p Part) bool { return p.Server < 0 || p.Server >= set.Len() })
	slices.SortStableFunc(parts, func(a, b Part) int { return a.Server - b.Server })
	return parts
}

// appendCacheable appends to the object being written at the end of b
// (its members so far written) `resultType`, `ttlMs` and `cacheScope`
// merged from parts, and closes it.
func appendCacheable(b []byte, parts []Part) []byte {
	ttl, public := int64(-1), len(parts) > 0
	for _, p := range parts {
		res := gjson.ParseBytes(p.Result)
		t := partTTL(res.Get("ttlMs"))
		if ttl < 0 || t < ttl {
			ttl = t
		}
		if s := res.Get("cacheScope"); s.Type != gjson.String || s.Str != "public" {
			public = false
		}
	}
	scope := "private"
	if public {
		scope = "public"
	}
	b = append(b, `,"resultType":"complete","ttlMs":`...)
	b = strconv.AppendInt(b, max(ttl, 0), 10)
	b = append(b, `,"cacheScope":"`...)
	b = append(b, scope...)
	return append(b, `"}`...)
}

// partTTL is a part's ttlMs: 0 unless it is a non-negative integer.
func partTTL(v gjson.Result) int64 {
	if v.Type != gjson.Number {
		return 0
	}
	n, err := strconv.ParseInt(v.Raw, 10, 64)
	if err != nil || n < 0 {
		return 0
	}
	return n
}
