package federate

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
)

// ErrNoString wraps every error of String and SetString.
var ErrNoString = errors.New("no string member")

// String reads the string at path in the JSON object body: member names
// joined by '.' (e.g. "params.name", "params.ref.name", "params.taskId";
// no gjson syntax). It is an error when body is not a valid JSON object,
// a member on the path is missing, is not an object where one is needed,
// or is repeated (a repeated name could be read as one copy here and as
// another by the server), or when the value is not a string. Routing
// reads the name with String and rewrites it with SetString: both see the
// same member.
func String(body []byte, path string) (string, error) {
	v, _, err := lookup(body, path)
	return v.Str, err
}

// SetString returns body with the string at path (as String reads it)
// replaced by value, JSON-escaped; the rest of body is kept byte for
// byte.
func SetString(body []byte, path, value string) ([]byte, error) {
	v, at, err := lookup(body, path)
	if err != nil {
		return nil, err
	}
	sp := jsonrpc.Splice{At: at, End: at + len(v.Raw), Text: jsonrpc.Quote(value)}
	return jsonrpc.ApplySplices(string(body), []jsonrpc.Splice{sp}), nil
}

// lookup finds the string at path in body, and its offset in body.
func lookup(body []byte, path string) (gjson.Result, int, error) {
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) == 0 || trimmed[0] != '{' || jsonrpc.ValidJSON(body) != nil {
		return gjson.Result{}, 0, fmt.Errorf("%w: not a JSON object", ErrNoString)
	}
	obj, at := string(trimmed), len(body)-len(trimmed)
	var v gjson.Result
	for name := range strings.SplitSeq(path, ".") {
		if len(obj) == 0 || obj[0] != '{' {
			return gjson.Result{}, 0, fmt.Errorf("%w: %s: not in an object", ErrNoString, path)
		}
		var count int
		v, count = member(obj, name)
		switch count {
		case 0:
			return gjson.Result{}, 0, fmt.Errorf("%w: %s: no member %q", ErrNoString, path, name)
		case 1:
		default:
			return gjson.Result{}, 0, fmt.Errorf("%w: %s: member %q repeated", ErrNoString, path, name)
		}
		at += v.Index
		obj = v.Raw
	}
	if v.Type != gjson.String {
		return gjson.Result{}, 0, fmt.Errorf("%w: %s: not a string", ErrNoString, path)
	}
	return v, at, nil
}
