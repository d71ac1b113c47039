package auth

import (
	"github.com/tidwall/gjson"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
)

// An authorization server's answers (its metadata, JWKS, introspection
// answers) are foreign JSON: as everything a peer writes, they are read
// with gjson once jsonrpc.ValidJSON has bounded their nesting, never
// decoded into structs with encoding/json.

// jsonObject reads body as one JSON object, nested at most
// jsonrpc.MaxJSONDepth deep; ok is false for anything else.
func jsonObject(body []byte) (gjson.Result, bool) {
	if jsonrpc.ValidJSON(body) != nil {
		return gjson.Result{}, false
	}
	r := gjson.ParseBytes(body)
	return r, r.IsObject()
}

// stringMember is the string member name of obj: "" when absent or null,
// ok false when it is of another type.
func stringMember(obj gjson.Result, name string) (string, bool) {
	switch v := obj.Get(gjson.Escape(name)); v.Type {
	case gjson.String:
		return v.Str, true
	case gjson.Null:
		return "", true
	default:
		return "", false
	}
}

// stringField names a string member to read, and where to put it.
type stringField struct {
	name string
	to   *string
}

// readStrings reads each field's member of obj (stringMember); false when
// one is not a string.
func readStrings(obj gjson.Result, fields ...stringField) bool {
	for _, f := range fields {
		var ok bool
		if *f.to, ok = stringMember(obj, f.name); !ok {
			return false
		}
	}
	return true
}

// intMember is the integer member name of obj: nil when absent or null, ok
// false when it is not a whole number.
func intMember(obj gjson.Result, name string) (*int64, bool) {
	switch v := obj.Get(gjson.Escape(name)); v.Type {
	case gjson.Number:
		n := v.Int()
		if float64(n) != v.Num {
			return nil, false
		}
		return &n, true
	case gjson.Null:
		return nil, true
	default:
		return nil, false
	}
}
