package jsonrpc

import (
	"errors"
	"fmt"

	"github.com/tidwall/gjson"
)

// MaxJSONDepth is how deeply arrays and objects may nest in any JSON the
// gateway validates or walks: a client's body, an upstream's answer or
// event, a forwarded body. The top-level object is depth 1.
//
// JSON validators recurse once per level (gjson.ValidBytes, and
// encoding/json.Unmarshal into interfaces), so without a bound a 4 MiB body
// of "[" costs some 650 MiB of goroutine stack, and a deeper one crashes
// the process. 128 levels cost a few kilobytes of stack, and leave room for
// what MCP messages carry: a tools/list answer reaches a tool's inputSchema
// at depth 5, and each level of nested object properties in a JSON Schema
// adds two, so a schema nesting 60 objects still fits. It is also the limit
// of serde_json (the Rust MCP SDK's parser), so a peer written in Rust
// already refuses anything deeper.
const MaxJSONDepth = 128

// ErrJSONTooDeep is returned by ValidJSON for JSON nested deeper than
// MaxJSONDepth.
var ErrJSONTooDeep = fmt.Errorf("JSON nested deeper than %d levels (the gateway's limit)", MaxJSONDepth)

// ErrInvalidJSON is returned by ValidJSON for text that is not one JSON
// value.
var ErrInvalidJSON = errors.New("not valid JSON")

// ValidJSON reports whether b is a single valid JSON value nested at most
// MaxJSONDepth levels deep: nil, ErrJSONTooDeep or ErrInvalidJSON. The depth
// is checked first, by a scan that neither recurses nor allocates, so the
// recursive validator only ever sees shallow input. Every validation of
// untrusted JSON in the gateway goes through it (or ValidJSONString).
func ValidJSON(b []byte) error {
	if !depthWithin(b, MaxJSONDepth) {
		return ErrJSONTooDeep
	}
	if !gjson.ValidBytes(b) {
		return ErrInvalidJSON
	}
	return nil
}

// ValidJSONString is ValidJSON for a string.
func ValidJSONString(s string) error {
	if !depthWithin(s, MaxJSONDepth) {
		return ErrJSONTooDeep
	}
	if !gjson.Valid(s) {
		return ErrInvalidJSON
	}
	return nil
}

// CheckJSONDepth is the first half of ValidJSON: ErrJSONTooDeep when b
// nests deeper than MaxJSONDepth, else nil, whether or not b is valid JSON.
// It lets a front door refuse a nesting bomb before anything looks at the
// body; the body must still pass ValidJSON before it is used.
func CheckJSONDepth(b []byte) error {
	if !depthWithin(b, MaxJSONDepth) {
		return ErrJSONTooDeep
	}
	return nil
}

// JSONDepth returns how deeply arrays and objects nest in b: 0 for a
// scalar, 1 for [] or {"a":1}, 2 for [[]], and so on. Brackets inside
// strings (escapes included) do not count. b need not be valid JSON: the
// scan counts every [ and { outside strings, and every ] and } (never
// below zero). It takes O(len(b)) time and no memory.
func JSONDepth[T ~string | ~[]byte](b T) int {
	_, deepest := scanDepth(b, len(b))
	return deepest
}

// depthWithin reports whether b nests at most limit levels deep, stopping
// at the first level beyond it.
func depthWithin[T ~string | ~[]byte](b T, limit int) bool {
	exceeded, _ := scanDepth(b, limit)
	return !exceeded
}

// scanDepth counts the nesting of b outside strings. It stops as soon as
// the depth exceeds limit (exceeded is then true) and otherwise returns the
// deepest level seen.
func scanDepth[T ~string | ~[]byte](b T, limit int) (exceeded bool, deepest int) {
	depth := 0
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '"':
			// Skip the string: a backslash escapes the byte after it
			// (\" and \\ included), so the string ends at the first
			// unescaped quote, or with the input.
			for i++; i < len(b) && b[i] != '"'; i++ {
				if b[i] == '\\' {
					i++
				}
			}
		case '[', '{':
			depth++
			if depth > deepest {
				if depth > limit {
					return true, depth
				}
				deepest = depth
			}
		case ']', '}':
			if depth > 0 {
				depth--
			}
		}
	}
	return false, deepest
}
