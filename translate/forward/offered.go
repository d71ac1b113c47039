package forward

import (
	"strings"

	"github.com/tidwall/gjson"
)

// capabilityOf names the server capability under which a legacy server
// offers a bridged method ("" for a method every server serves, or that
// the gateway serves itself).
func capabilityOf(method string) string {
	switch {
	case strings.HasPrefix(method, "tools/"):
		return "tools"
	case strings.HasPrefix(method, "prompts/"):
		return "prompts"
	case strings.HasPrefix(method, "resources/"):
		return "resources"
	case method == "completion/complete":
		return "completions"
	}
	return ""
}

// upstreamOffers reports whether a legacy server whose InitializeResult is
// initResult offers method, by the capabilities it declared. A -32601 it
// answers for a method it offers is a handler's error (fastmcp answers an
// unknown tool with it), not a method the server lacks: the forward bridge
// relays it in-band (HTTP 200) rather than as the modern transport's 404
// for a method that is not implemented, which modern clients report as a
// transport failure without the JSON-RPC error. An initResult that cannot
// be read offers everything.
func upstreamOffers(initResult []byte, method string) bool {
	capability := capabilityOf(method)
	if capability == "" || len(initResult) == 0 {
		return true
	}
	caps := gjson.GetBytes(initResult, "capabilities")
	if !caps.IsObject() {
		return true
	}
	return caps.Get(capability).Exists()
}
