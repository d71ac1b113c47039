package jsonrpc

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"

	"github.com/tidwall/gjson"
)

// Marshal encodes v, a value the gateway builds (a struct, or a map keyed
// by data), with encoding/json, without HTML-escaping its strings: a
// string from a peer (a requestState above all) reaches the other peer
// with the bytes it was written with. json.RawMessage fields are copied
// compactly. Unlike json.Marshal it adds no trailing newline.
func Marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// Quote returns s as a JSON string, as encoding/json writes it without
// HTML escaping (strconv.Quote is Go syntax, not JSON: it writes \x00).
func Quote(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			b, _ := Marshal(s) // a string always marshals
			return string(b)
		}
	}
	return `"` + s + `"` // printable ASCII needs no escape
}

// SetMember returns the JSON object obj with the member called name set to
// val (a JSON value): the first member of that name keeps its place and
// takes val, later copies are dropped, and when there is none the member is
// added at the end. Only obj's own level is re-written (compactly); the
// other members' values are copied verbatim. obj must be a valid JSON
// object.
func SetMember(obj, name, val string) string {
	ms, _ := Members(obj)
	b := make([]byte, 0, len(obj)+len(name)+len(val)+4)
	b = append(b, '{')
	set := false
	for _, m := range ms {
		switch {
		case m.Name != name:
			b = AppendMember(b, m.Key, m.Val.Raw)
		case !set:
			b = AppendMember(b, m.Key, val)
			set = true
		}
	}
	if !set {
		b = AppendMember(b, Quote(name), val)
	}
	return string(append(b, '}'))
}

// AppendObject returns the JSON object obj followed by the members of the
// JSON object add (e.g. a struct the gateway marshalled): obj's text is
// kept, add's members go at its end. Both must be valid JSON objects.
func AppendObject(obj, add string) string {
	ms, _ := Members(obj)
	var texts []string
	gjson.Parse(add).ForEach(func(k, v gjson.Result) bool {
		texts = append(texts, k.Raw+":"+v.Raw)
		return true
	})
	if len(texts) == 0 {
		return obj
	}
	sp := AppendMembers(obj, ms, texts)
	return string(ApplySplices(obj, []Splice{sp}))
}

// AppendCanonical appends v in a canonical form, for comparing JSON by
// value (e.g. a key for sessions that equal capability sets may share):
// compact, every object's members sorted by name and their names written
// as encoding/json writes them, of repeated names only the first (as gjson
// reads it). Scalars are copied as written. v must be
// valid JSON that passed ValidJSON (the walk recurses once per level).
// (translate's request digest has a canonical form of its own on purpose:
// it keeps every copy of a repeated name, so that no change a peer could
// read escapes the digest, and it is hashed, never sent.)
func AppendCanonical(b []byte, v gjson.Result) []byte {
	switch {
	case v.IsObject():
		type member struct {
			name string
			val  gjson.Result
		}
		var (
			ms   []member
			seen nameSet
		)
		v.ForEach(func(k, val gjson.Result) bool {
			if seen.add(k.Str) {
				ms = append(ms, member{k.Str, val})
			}
			return true
		})
		slices.SortStableFunc(ms, func(a, c member) int { return strings.Compare(a.name, c.name) })
		b = append(b, '{')
		for i, m := range ms {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, Quote(m.name)...)
			b = append(b, ':')
			b = AppendCanonical(b, m.val)
		}
		return append(b, '}')
	case v.IsArray():
		b = append(b, '[')
		i := 0
		v.ForEach(func(_, val gjson.Result) bool {
			if i > 0 {
				b = append(b, ',')
			}
			i++
			b = AppendCanonical(b, val)
			return true
		})
		return append(b, ']')
	default:
		return append(b, v.Raw...)
	}
}

// Request is a request, or a notification (no ID), that the gateway
// builds; Marshal writes it. Params is a struct of the gateway's, or a
// json.RawMessage holding foreign params (copied compactly); a nil Params
// omits the member (a nil json.RawMessage stored in it would not: leave
// Params nil instead).
type Request struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method"`
	Params  any             `json:"params,omitempty"`
}

// NewRequest returns a JSON-RPC 2.0 request (a notification when id is
// nil).
func NewRequest(id json.RawMessage, method string, params any) Request {
	return Request{JSONRPC: "2.0", ID: id, Method: method, Params: params}
}
