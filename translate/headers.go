package translate

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
)

// ErrInvalidHeaderValue is wrapped by DecodeHeaderValue errors: the value
// holds characters not allowed in an HTTP field value, or a Base64 sentinel
// whose payload is not strict, padded standard Base64 of UTF-8 text.
var ErrInvalidHeaderValue = errors.New("invalid MCP header value")

// The Base64 sentinel of SEP-2243: =?base64?{payload}?= (markers are
// lowercase and case-sensitive).
const (
	SentinelPrefix = "=?base64?"
	SentinelSuffix = "?="
)

// strictBase64 is padded standard Base64 that also rejects non-zero
// trailing bits, so that each value has exactly one encoding.
var strictBase64 = base64.StdEncoding.Strict()

// DecodeHeaderValue returns the value an Mcp-Name or Mcp-Param-* header
// stands for. Optional whitespace (SP, HTAB) around v is removed first. A
// value that starts with "=?base64?" and ends with "?=" (both markers
// complete and not overlapping) is a Base64 sentinel: its payload must be
// strict, padded standard Base64 (RFC 4648 §4, no line breaks, no
// non-canonical trailing bits) of valid UTF-8, and the decoded text is
// returned. Any other value is literal and must consist of visible ASCII,
// SP and HTAB only. Errors wrap ErrInvalidHeaderValue.
func DecodeHeaderValue(v string) (string, error) {
	v = trimOWS(v)
	if len(v) >= len(SentinelPrefix)+len(SentinelSuffix) &&
		strings.HasPrefix(v, SentinelPrefix) && strings.HasSuffix(v, SentinelSuffix) {
		payload := v[len(SentinelPrefix) : len(v)-len(SentinelSuffix)]
		// encoding/base64 skips CR and LF; the sentinel allows neither.
		if i := strings.IndexFunc(payload, func(r rune) bool { return !isBase64Char(r) }); i >= 0 {
			return "", fmt.Errorf("%w: base64 sentinel has an invalid character at offset %d", ErrInvalidHeaderValue, i)
		}
		b, err := strictBase64.DecodeString(payload)
		if err != nil {
			return "", fmt.Errorf("%w: base64 sentinel: %w", ErrInvalidHeaderValue, err)
		}
		if !utf8.Valid(b) {
			return "", fmt.Errorf("%w: base64 sentinel does not decode to UTF-8", ErrInvalidHeaderValue)
		}
		return string(b), nil
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; c != '\t' && (c < 0x20 || c > 0x7e) {
			return "", fmt.Errorf("%w: byte 0x%02x at offset %d must be Base64-encoded", ErrInvalidHeaderValue, c, i)
		}
	}
	return v, nil
}

// isBase64Char reports whether r belongs to the standard Base64 alphabet
// or is padding.
func isBase64Char(r rune) bool {
	return r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' ||
		r == '+' || r == '/' || r == '='
}

// trimOWS removes optional whitespace (RFC 9110 §5.6.3: SP and HTAB) from
// both ends of a field value.
func trimOWS(s string) string {
	return strings.Trim(s, " \t")
}

// headerValues returns every value of the named header. Names match
// case-insensitively even when h was built by hand with non-canonical keys.
func headerValues(h http.Header, name string) []string {
	if len(h) == 0 {
		return nil
	}
	vals := h.Values(name)
	for k, vs := range h {
		if k != http.CanonicalHeaderKey(name) && strings.EqualFold(k, name) {
			vals = append(vals, vs...)
		}
	}
	return vals
}

// firstHeader returns the first value of the named header without
// surrounding whitespace, or "".
func firstHeader(h http.Header, name string) string {
	vals := headerValues(h, name)
	if len(vals) == 0 {
		return ""
	}
	return trimOWS(vals[0])
}

// singleHeader returns the only value of the named header without
// surrounding whitespace. It fails with HeaderMismatch when the header is
// absent or empty (and required), or repeated: an intermediary might act on
// a different copy than the one validated here.
func singleHeader(h http.Header, name string, required bool) (value string, present bool, e *jsonrpc.RPCError) {
	vals := headerValues(h, name)
	switch {
	case len(vals) > 1:
		return "", true, jsonrpc.Errorf(http.StatusBadRequest, jsonrpc.HeaderMismatch, "Header mismatch: %s header must not be repeated", name)
	case len(vals) == 0 || trimOWS(vals[0]) == "":
		if required {
			return "", false, jsonrpc.Errorf(http.StatusBadRequest, jsonrpc.HeaderMismatch, "Header mismatch: missing required %s header", name)
		}
		return "", len(vals) > 0, nil
	}
	return trimOWS(vals[0]), true, nil
}

// NameSourceField returns the params member that the Mcp-Name header
// mirrors for method, or "" when the method has no Mcp-Name. Only the core
// 2026-07-28 methods are listed; the Tasks extension's params.taskId is not
// validated because the gateway does not offer that extension.
func NameSourceField(method string) string {
	switch method {
	case "tools/call", "prompts/get":
		return "name"
	case "resources/read":
		return "uri"
	case "tasks/get", "tasks/update", "tasks/cancel":
		return "taskId" // the Tasks extension: Mcp-Name is the taskId
	}
	return ""
}

// checkStandardHeaders validates the SEP-2243 standard headers of a parsed
// modern message against its body: Mcp-Method must equal the method (it is
// required on requests, and checked on notifications only when present),
// and for tools/call, prompts/get and resources/read the Mcp-Name header
// must be present and decode to the body's name or uri. bodyName is that
// body value. Mcp-Param-* headers are not examined.
func checkStandardHeaders(h http.Header, msg jsonrpc.Message, bodyName string) *jsonrpc.RPCError {
	hm, present, e := singleHeader(h, HeaderMethod, msg.Kind == jsonrpc.KindRequest)
	if e != nil {
		return e
	}
	if present && hm != msg.Method {
		return jsonrpc.Errorf(http.StatusBadRequest, jsonrpc.HeaderMismatch,
			"Header mismatch: %s header value %q does not match body method %q", HeaderMethod, jsonrpc.Clip(hm), jsonrpc.Clip(msg.Method))
	}
	if msg.Kind != jsonrpc.KindRequest || NameSourceField(msg.Method) == "" {
		return nil
	}
	hn, _, e := singleHeader(h, HeaderName, true)
	if e != nil {
		return e
	}
	decoded, err := DecodeHeaderValue(hn)
	if err != nil {
		return jsonrpc.Errorf(http.StatusBadRequest, jsonrpc.HeaderMismatch, "Header mismatch: %s header: %v", HeaderName, err)
	}
	if decoded != bodyName {
		return jsonrpc.Errorf(http.StatusBadRequest, jsonrpc.HeaderMismatch,
			"Header mismatch: %s header value %q does not match body value %q", HeaderName, jsonrpc.Clip(decoded), jsonrpc.Clip(bodyName))
	}
	return nil
}
