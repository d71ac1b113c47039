package federate

import (
	"strconv"
	"unicode/utf8"

	"github.com/tidwall/gjson"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
)

// Bounds of MergeDiscover.
const (
	MaxInstructions    = 4096 // bytes of one server's instructions kept
	maxCapabilityDepth = 8    // levels of capabilities merged
	serverInfoMetaKey  = "io.modelcontextprotocol/serverInfo"
)

// MergeDiscover merges the servers' `server/discover` results (parts) into
// the federation's:
//
//   - supportedVersions: the versions every part lists, in the order of
//     the first part (in server order); when they have none in common, the
//     first part's;
//   - capabilities (extensions included): the union, objects merged
//     member by member down to 8 levels (deeper, the first part's value),
//     a member true when any part says true, else the first part's value;
//   - instructions: a paragraph naming each server of set and its prefix,
//     then each part's own instructions under its server's name (at most
//     MaxInstructions bytes of each);
//   - _meta: the gateway's own serverInfo (left out when it is not a JSON
//     object);
//   - resultType "complete", ttlMs and cacheScope as Merge makes them.
//
// Parts that are not JSON objects count only for ttlMs and cacheScope.
func MergeDiscover(set *Set, parts []Part, serverInfo []byte) []byte {
	parts = inServerOrder(set, parts)
	var results []gjson.Result
	var servers []int
	for _, p := range parts {
		if res, ok := resultObject(p.Result); ok {
			results = append(results, res)
			servers = append(servers, p.Server)
		}
	}
	b := make([]byte, 0, 512)
	b = append(b, `{"supportedVersions":`...)
	b = appendVersions(b, results)
	b = append(b, `,"capabilities":`...)
	caps := make([]gjson.Result, len(results))
	for i, r := range results {
		caps[i] = r.Get("capabilities")
	}
	b = appendUnion(b, caps, 1)
	b = append(b, `,"instructions":`...)
	b = append(b, jsonrpc.Quote(instructions(set, servers, results))...)
	if info := gjson.ParseBytes(serverInfo); info.IsObject() && jsonrpc.ValidJSON(serverInfo) == nil {
		b = append(b, `,"_meta":{"`+serverInfoMetaKey+`":`...)
		b = append(b, info.Raw...)
		b = append(b, '}')
	}
	return appendCacheable(b, parts)
}

// appendVersions appends the versions every result lists (else the first
// one's) as a JSON array.
func appendVersions(b []byte, results []gjson.Result) []byte {
	if len(results) == 0 {
		return append(b, "[]"...)
	}
	first := results[0].Get("supportedVersions").Array()
	common := make([]gjson.Result, 0, len(first))
	for _, v := range first {
		if v.Type != gjson.String {
			continue
		}
		everywhere := true
		for _, r := range results[1:] {
			listed := false
			for _, w := range r.Get("supportedVersions").Array() {
				listed = listed || (w.Type == gjson.String && w.Str == v.Str)
			}
			everywhere = everywhere && listed
		}
		if everywhere {
			common = append(common, v)
		}
	}
	if len(common) == 0 {
		for _, v := range first {
			if v.Type == gjson.String {
				common = append(common, v)
			}
		}
	}
	b = append(b, '[')
	for i, v := range common {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, v.Raw...)
	}
	return append(b, ']')
}

// appendUnion appends the union of the JSON objects among vals (see
// MergeDiscover); depth is the level of vals.
func appendUnion(b []byte, vals []gjson.Result, depth int) []byte {
	type merging struct {
		key  string         // the name as first written
		vals []gjson.Result // its value in each object that has it
	}
	var out []merging
	at := map[string]int{}
	for _, v := range vals {
		if !v.IsObject() {
			continue
		}
		seen := map[string]bool{}
		ms, _ := jsonrpc.Members(v.Raw)
		for _, m := range ms {
			if seen[m.Name] {
				continue // a repeated name: its first copy, as gjson reads it
			}
			seen[m.Name] = true
			i, ok := at[m.Name]
			if !ok {
				i = len(out)
				at[m.Name] = i
				out = append(out, merging{key: m.Key})
			}
			out[i].vals = append(out[i].vals, m.Val)
		}
	}
	b = append(b, '{')
	for i, m := range out {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, m.key...)
		b = append(b, ':')
		b = appendMerged(b, m.vals, depth)
	}
	return append(b, '}')
}

// appendMerged appends the merge of one member's values.
func appendMerged(b []byte, vals []gjson.Result, depth int) []byte {
	objects := true
	for _, v := range vals {
		if v.Type == gjson.True {
			return append(b, "true"...)
		}
		objects = objects && v.IsObject()
	}
	if objects && depth < maxCapabilityDepth {
		return appendUnion(b, vals, depth+1)
	}
	return append(b, vals[0].Raw...)
}

// instructions is the merged instructions: the paragraph naming the
// servers, then each result's own.
func instructions(set *Set, servers []int, results []gjson.Result) string {
	b := []byte("This endpoint joins " + strconv.Itoa(set.Len()) + " MCP servers. The names of each one's tools and prompts begin with its prefix; resource URIs are its own. Servers:")
	for i := range set.Len() {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, ' ')
		b = append(b, set.Name(i)...)
		if p := set.Prefix(i); p != "" {
			b = append(b, " (prefix "...)
			b = append(b, p...)
			b = append(b, ')')
		} else {
			b = append(b, " (no prefix)"...)
		}
	}
	b = append(b, '.')
	for i, r := range results {
		text := r.Get("instructions")
		if text.Type != gjson.String || text.Str == "" {
			continue
		}
		b = append(b, "\n\n## "...)
		b = append(b, set.Name(servers[i])...)
		b = append(b, '\n')
		b = append(b, clip(text.Str, MaxInstructions)...)
	}
	return string(b)
}

// clip cuts s to at most n bytes, at the start of a UTF-8 character.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
