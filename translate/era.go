package translate

import (
	"net/http"
	"slices"

	"github.com/tidwall/gjson"
)

// ModernVersion is the first modern (stateless, per-request _meta) MCP
// protocol version, and the one the gateway serves to modern clients.
const ModernVersion = "2026-07-28"

// LegacyVersions lists the legacy (initialize-based) MCP protocol versions,
// newest first. Treat it as read-only.
var LegacyVersions = []string{"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}

// Reserved _meta keys of the 2026-07-28 protocol.
const (
	// MetaProtocolVersion is the request _meta key holding the protocol
	// version; required on modern requests.
	MetaProtocolVersion = "io.modelcontextprotocol/protocolVersion"
	// MetaClientCapabilities is the request _meta key holding the client's
	// capabilities object; required on modern requests.
	MetaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"
	// MetaClientInfo is the optional request _meta key identifying the
	// client implementation ({name, version, ...}).
	MetaClientInfo = "io.modelcontextprotocol/clientInfo"
	// MetaLogLevel is the optional request _meta key that opts in to
	// notifications/message at or above the given level.
	MetaLogLevel = "io.modelcontextprotocol/logLevel"
	// MetaServerInfo is the result _meta key identifying the server
	// implementation.
	MetaServerInfo = "io.modelcontextprotocol/serverInfo"
	// MetaSubscriptionID is the notification _meta key that ties a
	// notification to the subscriptions/listen request that opened its stream.
	MetaSubscriptionID = "io.modelcontextprotocol/subscriptionId"
)

// Header names used by MCP Streamable HTTP.
const (
	// HeaderProtocolVersion carries the protocol version of the request.
	HeaderProtocolVersion = "MCP-Protocol-Version"
	// HeaderSessionID carries the legacy (2025-11-25 and earlier) session id.
	HeaderSessionID = "Mcp-Session-Id"
	// HeaderMethod mirrors the JSON-RPC method (2026-07-28).
	HeaderMethod = "Mcp-Method"
	// HeaderName mirrors params.name or params.uri (2026-07-28).
	HeaderName = "Mcp-Name"
)

// MetaPath returns the gjson path of the _meta member key inside the object
// at container, e.g. MetaPath("params", MetaProtocolVersion) is
// `params._meta.io\.modelcontextprotocol\/protocolVersion`. The key is
// escaped, since dots and other characters in MCP _meta keys are gjson path
// syntax. An empty container addresses a top-level _meta.
func MetaPath(container, key string) string {
	p := "_meta." + gjson.Escape(key)
	if container == "" {
		return p
	}
	return container + "." + p
}

// Era is the protocol generation an inbound message belongs to.
type Era int

// Eras. The zero value is EraUnknown.
const (
	// EraUnknown means the message carries no consistent era signal (for
	// example an MCP-Protocol-Version header that is not a date and no
	// modern _meta).
	EraUnknown Era = iota
	// EraLegacy is 2025-11-25 and earlier: initialize handshake and
	// Mcp-Session-Id sessions.
	EraLegacy
	// EraModern is 2026-07-28 and later: stateless, per-request _meta.
	EraModern
)

// String returns "unknown", "legacy" or "modern".
func (e Era) String() string {
	switch e {
	case EraLegacy:
		return "legacy"
	case EraModern:
		return "modern"
	default:
		return "unknown"
	}
}

// ClassifyRequest decides which era an inbound POST belongs to, from its
// headers and body. It never fails; a body that is not JSON is classified by
// its headers alone, and the validator of the chosen era reports the error.
// The first matching rule wins:
//
//  1. params._meta holds MetaProtocolVersion or MetaClientCapabilities
//     (whatever their values): modern. These keys exist only in modern MCP,
//     and the body is the source of truth. This includes "v999.0.0" sent in
//     _meta, so that the modern ladder can answer -32022, and an
//     "initialize" that carries modern _meta, which a modern endpoint must
//     answer with 404/-32601.
//  2. The MCP-Protocol-Version header is a YYYY-MM-DD date not before
//     ModernVersion: modern (the modern ladder then reports missing _meta
//     as -32602).
//  3. The method is "initialize": legacy.
//  4. An Mcp-Session-Id header is present: legacy.
//  5. The MCP-Protocol-Version header is absent or empty: legacy (legacy
//     clients send no header on initialize, nor did clients before
//     2025-06-18; their responses and notifications carry no _meta).
//  6. The header is a date before ModernVersion (any of LegacyVersions, or
//     an older or unknown legacy date): legacy.
//  7. Otherwise (a non-date header such as "v999.0.0" without modern
//     _meta): unknown.
func ClassifyRequest(h http.Header, body []byte) Era {
	if hasModernMeta(body) {
		return EraModern
	}
	hv := firstHeader(h, HeaderProtocolVersion)
	if isDateVersion(hv) && hv >= ModernVersion {
		return EraModern
	}
	if m := gjson.GetBytes(body, "method"); m.Type == gjson.String && m.Str == "initialize" {
		return EraLegacy
	}
	if len(headerValues(h, HeaderSessionID)) > 0 {
		return EraLegacy
	}
	if hv == "" || isDateVersion(hv) {
		return EraLegacy
	}
	return EraUnknown
}

// IsLegacyVersion reports whether v is one of LegacyVersions.
func IsLegacyVersion(v string) bool {
	return slices.Contains(LegacyVersions, v)
}

// hasModernMeta reports whether the body's params._meta carries one of the
// required modern request keys.
func hasModernMeta(body []byte) bool {
	return gjson.GetBytes(body, paramsMetaVersion).Exists() || gjson.GetBytes(body, paramsMetaCapabilities).Exists()
}

// The gjson paths hasModernMeta reads, built once.
var (
	paramsMetaVersion      = MetaPath("params", MetaProtocolVersion)
	paramsMetaCapabilities = MetaPath("params", MetaClientCapabilities)
)

// isDateVersion reports whether v has the YYYY-MM-DD shape of MCP protocol
// versions, so that versions can be ordered by comparing strings.
func isDateVersion(v string) bool {
	if len(v) != len("2006-01-02") {
		return false
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if i == 4 || i == 7 {
			if c != '-' {
				return false
			}
			continue
		}
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
