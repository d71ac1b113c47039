package translate

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
)

// BatchVersion is the only protocol revision with JSON-RPC batches: 2025-03-26
// added them (modelcontextprotocol.io/specification/2025-03-26/basic, Batching) and 2025-06-18 removed them
// (changelog, major change 1).
const BatchVersion = "2025-03-26"

// IsBatch reports whether body is a JSON array (whatever its contents): a
// JSON-RPC batch, to be checked with PeekBatch.
func IsBatch(body []byte) bool {
	for _, c := range body {
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		}
		return c == '['
	}
	return false
}

// SessionBatchVersion says which revision a legacy session request that
// carries a batch speaks, from its MCP-Protocol-Version header, and whether
// that revision allows batches. Clients of 2025-06-18 and later must send the
// header on every request after initialize, and a server without it "SHOULD
// assume protocol version 2025-03-26" (2025-06-18 and 2025-11-25 transports,
// §Protocol Version Header): an absent header is BatchVersion. A repeated
// header is not one version, and allows nothing.
func SessionBatchVersion(h http.Header) (version string, allowed bool) {
	vals := headerValues(h, HeaderProtocolVersion)
	switch len(vals) {
	case 0:
		return BatchVersion, true
	case 1:
		v := trimOWS(vals[0])
		if v == "" {
			return BatchVersion, true
		}
		return v, v == BatchVersion
	}
	return "", false
}

// MaxBatchElements is the most messages a batch may hold: what the
// TypeScript SDK's server accepts. A batch of more is refused before any of
// its elements is looked at.
const MaxBatchElements = 100

// CheckBatch checks that body is a JSON-RPC batch as 2025-03-26 allows it
// (Streamable HTTP §Sending Messages to the Server): a non-empty array of at
// most MaxBatchElements requests and notifications, or of responses, each
// element a single message by the rules of Peek. initialize must not be
// part of a batch (…/specification/2025-03-26/basic/lifecycle). It keeps nothing of the elements: each
// is peeked in place, in body, and forgotten. Every error is an *RPCError
// with HTTPStatus 400: ParseError for a body that is not JSON or is nested
// too deep, InvalidRequest otherwise, its message naming the element at
// fault.
func CheckBatch(body []byte) error {
	if err := jsonrpc.ValidJSON(body); err != nil {
		if errors.Is(err, jsonrpc.ErrJSONTooDeep) {
			return jsonrpc.Errorf(http.StatusBadRequest, jsonrpc.ParseError, "Parse error: %v", err)
		}
		return jsonrpc.Errorf(http.StatusBadRequest, jsonrpc.ParseError, "Parse error: body is not valid JSON")
	}
	if !IsBatch(body) {
		return jsonrpc.Errorf(http.StatusBadRequest, jsonrpc.InvalidRequest, "Invalid Request: a batch must be a JSON array")
	}
	n := 0
	forEachElement(body, func([]byte) bool {
		n++
		return n <= MaxBatchElements
	})
	switch {
	case n == 0:
		return jsonrpc.Errorf(http.StatusBadRequest, jsonrpc.InvalidRequest, "Invalid Request: empty batch")
	case n > MaxBatchElements:
		return jsonrpc.Errorf(http.StatusBadRequest, jsonrpc.InvalidRequest, "Invalid Request: a batch holds at most %d messages", MaxBatchElements)
	}
	var rerr *jsonrpc.RPCError
	i, responses := 0, false
	forEachElement(body, func(elem []byte) bool {
		rerr = checkBatchElement(elem, i, &responses)
		i++
		return rerr == nil
	})
	if rerr != nil {
		return rerr
	}
	return nil
}

// checkBatchElement checks element i of a batch; *responses says whether
// the batch holds responses, as its first element does.
func checkBatchElement(elem []byte, i int, responses *bool) *jsonrpc.RPCError {
	if elem[0] != '{' {
		return jsonrpc.Errorf(http.StatusBadRequest, jsonrpc.InvalidRequest, "Invalid Request: batch element %d must be a JSON object", i)
	}
	m, err := jsonrpc.Peek(elem)
	if err != nil {
		var re *jsonrpc.RPCError
		if !errors.As(err, &re) {
			re = jsonrpc.Errorf(http.StatusBadRequest, jsonrpc.InvalidRequest, "Invalid Request: %v", err)
		}
		return &jsonrpc.RPCError{HTTPStatus: re.HTTPStatus, Code: re.Code, Message: fmt.Sprintf("%s (batch element %d)", re.Message, i)}
	}
	if m.Kind == jsonrpc.KindRequest && m.Method == "initialize" {
		return jsonrpc.Errorf(http.StatusBadRequest, jsonrpc.InvalidRequest, "Invalid Request: initialize must not be part of a batch (batch element %d)", i)
	}
	if i == 0 {
		*responses = m.Kind == jsonrpc.KindResponse
	} else if (m.Kind == jsonrpc.KindResponse) != *responses {
		return jsonrpc.Errorf(http.StatusBadRequest, jsonrpc.InvalidRequest, "Invalid Request: a batch holds either requests and notifications or responses, not both (batch element %d)", i)
	}
	return nil
}

// forEachElement calls fn with each element of body, a valid JSON text
// whose top level is an array, as a sub-slice of body (no copy, no
// allocation), until fn returns false.
func forEachElement(body []byte, fn func(elem []byte) bool) {
	i := 0
	for i < len(body) && body[i] != '[' {
		i++
	}
	depth, start, end := 0, -1, 0
	inString, escaped := false, false
	for i++; i < len(body); i++ {
		c := body[i]
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			end = i + 1
			continue
		}
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			continue
		case depth == 0 && c == ',':
			if !fn(body[start:end]) {
				return
			}
			start = -1
			continue
		case depth == 0 && c == ']':
			if start >= 0 {
				fn(body[start:end])
			}
			return
		}
		if start < 0 {
			start = i
		}
		end = i + 1
		switch c {
		case '"':
			inString = true
		case '[', '{':
			depth++
		case ']', '}':
			depth--
		}
	}
}

// MaxMethodLength bounds the JSON-RPC method names the reverse bridge
// accepts from a legacy client: far above any method MCP defines (the
// longest is under 40 bytes), so that a method name written into an
// upstream's Mcp-Method header, a log line or a metric stays small. A
// longer one is refused with -32600 before anything goes upstream.
const MaxMethodLength = 256
