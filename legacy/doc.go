// Package legacy holds the gateway's side of the legacy MCP wire (protocol
// revisions 2025-11-25 and earlier): the upstream sessions the bridge opens,
// over their own HTTP/1.1 client. The sealed session ids that pin a legacy
// client to an upstream session, and the keyring that seals them, are in
// translate/seal. Its messages are jsonrpc.Message, the envelope both eras
// share (message.go keeps deprecated aliases for translate/forward's task
// files until those are rewritten), and its JSON follows the rule stated
// in package jsonrpc. It does not import Caddy. With a recording span in
// a request's context (Caddy's tracing), each POST of a session is a client
// span whose traceparent the upstream gets (traced.go, translate/traces).
package legacy
