package translate

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/tidwall/gjson"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/legacy"
)

// BatchVersion is the only protocol revision with JSON-RPC batches: 2025-03-26
// added them (basic/index.mdx §Batching) and 2025-06-18 removed them
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

// PeekBatch checks that body is a JSON-RPC batch as 2025-03-26 allows it
// (Streamable HTTP §Sending Messages to the Server): a non-empty array of
// requests and notifications, or a non-empty array of responses, each
// element a single message by the rules of Peek. initialize must not be part
// of a batch (lifecycle.mdx). It returns the elements' envelopes. Every
// error is an *RPCError with HTTPStatus 400: ParseError for a body that is
// not JSON or is nested too deep, InvalidRequest otherwise, its message
// naming the element at fault.
func PeekBatch(body []byte) ([]legacy.Message, error) {
	if err := legacy.ValidJSON(body); err != nil {
		if errors.Is(err, legacy.ErrJSONTooDeep) {
			return nil, errorf(http.StatusBadRequest, ParseError, "Parse error: %v", err)
		}
		return nil, errorf(http.StatusBadRequest, ParseError, "Parse error: body is not valid JSON")
	}
	root := gjson.ParseBytes(body)
	if !root.IsArray() {
		return nil, errorf(http.StatusBadRequest, InvalidRequest, "Invalid Request: a batch must be a JSON array")
	}
	var msgs []legacy.Message
	var rerr *RPCError
	root.ForEach(func(_, elem gjson.Result) bool {
		i := len(msgs)
		if !elem.IsObject() {
			rerr = errorf(http.StatusBadRequest, InvalidRequest, "Invalid Request: batch element %d must be a JSON object", i)
			return false
		}
		m, err := Peek([]byte(elem.Raw))
		if err != nil {
			var re *RPCError
			if !errors.As(err, &re) {
				re = errorf(http.StatusBadRequest, InvalidRequest, "Invalid Request: %v", err)
			}
			rerr = &RPCError{HTTPStatus: re.HTTPStatus, Code: re.Code, Message: fmt.Sprintf("%s (batch element %d)", re.Message, i)}
			return false
		}
		if m.Kind == legacy.KindRequest && m.Method == "initialize" {
			rerr = errorf(http.StatusBadRequest, InvalidRequest, "Invalid Request: initialize must not be part of a batch (batch element %d)", i)
			return false
		}
		if i > 0 && (m.Kind == legacy.KindResponse) != (msgs[0].Kind == legacy.KindResponse) {
			rerr = errorf(http.StatusBadRequest, InvalidRequest, "Invalid Request: a batch holds either requests and notifications or responses, not both (batch element %d)", i)
			return false
		}
		msgs = append(msgs, m)
		return true
	})
	if rerr != nil {
		return nil, rerr
	}
	if len(msgs) == 0 {
		return nil, errorf(http.StatusBadRequest, InvalidRequest, "Invalid Request: empty batch")
	}
	return msgs, nil
}
