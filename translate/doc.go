// Package translate is the gateway's protocol kit: what both bridges and the
// Caddy module need to read, check and build MCP messages of either era,
// with no Caddy and no state of its own. Its two engines live below it:
//
//   - translate/forward: the forward bridge (a modern, 2026-07-28 client in
//     front of a legacy, 2025-11-25 server): parked calls, resumable
//     parking, the Tasks the gateway hosts for legacy tools;
//   - translate/reverse: the reverse bridge (a legacy client in front of a
//     modern server): the gateway-held session and its in-line rounds.
//
// Beside them, translate/upstreamauth is the RFC 8693 token-exchange client
// of `upstream_auth exchange`.
//
// The kit holds:
//
//   - JSON-RPC 2.0 batches: CheckBatch, and MaxMethodLength (batch.go);
//     single messages, the errors meant for a client and the splice editor
//     are in package jsonrpc, which both eras build on (compat.go keeps
//     deprecated aliases of a few of them for translate/forward's task
//     files until those are rewritten);
//   - the eras: classification of an inbound POST as legacy (initialize +
//     Mcp-Session-Id) or modern (stateless, per-request _meta), the header
//     and _meta names (era.go, headers.go), and the validation ladder a
//     modern request passes before the gateway acts on it (validate.go);
//   - input requests and responses, the shape of an input_required result
//     and the keys of a call's questions (inputs.go);
//   - reshaping results between the eras (reshape.go), message building
//     (wire.go), the request digest and principal hash a requestState is
//     bound to (digest.go);
//   - what both bridges share: Sink, the methods that may need input, the
//     defaults of their common limits (bridges.go), the Observer they report
//     to (observe.go), the owner of an in-line request (owner.go), a
//     per-principal counter (principal_count.go), and the words an upstream
//     failure is told to a client in (upstream_failure.go).
//
// JSON is handled by the rule stated in package jsonrpc: foreign JSON (a
// client's, an upstream's) is read with gjson and edited by splicing, never
// decoded; what the gateway builds it builds from structs. The package
// never logs and exposes no third-party types.
package translate
