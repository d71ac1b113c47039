// Package translate holds the Caddy-free protocol logic of the MCP gateway:
// JSON-RPC 2.0 message inspection, classification of an inbound HTTP POST as
// a legacy (2025-11-25 and earlier, initialize + Mcp-Session-Id) or modern
// (2026-07-28, stateless, per-request _meta) MCP message, and the validation
// ladder a modern Streamable HTTP request must pass before the gateway acts
// on it.
//
// The package reads message fields with gjson instead of unmarshalling whole
// bodies, never logs, and exposes no third-party types. Errors meant for the
// client are *RPCError values that carry both the HTTP status and the
// JSON-RPC error code; ErrorResponse turns one into a response body.
package translate
