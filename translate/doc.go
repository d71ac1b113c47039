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
// The kit holds:
//
//   - JSON-RPC 2.0 messages: Peek reads one without decoding it
//     (jsonrpc.go), CheckBatch a batch (batch.go); RPCError carries both the
//     HTTP status and the JSON-RPC code of an error meant for the client,
//     and ErrorResponse turns one into a response body;
//   - the eras: classification of an inbound POST as legacy (initialize +
//     Mcp-Session-Id) or modern (stateless, per-request _meta), the header
//     and _meta names (era.go, headers.go), and the validation ladder a
//     modern request passes before the gateway acts on it (validate.go);
//   - input requests and responses, the shape of an input_required result
//     and the keys of a call's questions (inputs.go);
//   - reshaping results between the eras and the splice editor it uses
//     (reshape.go), message building (wire.go), the request digest and
//     principal hash a requestState is bound to (digest.go);
//   - what both bridges share: Sink, the methods that may need input, the
//     defaults of their common limits (bridges.go), the Observer they report
//     to (observe.go), the owner of an in-line request (owner.go), a
//     per-principal counter (principal_count.go), and the words an upstream
//     failure is told to a client in (upstream_failure.go).
//
// Foreign JSON (a client's, an upstream's) is read with gjson and edited by
// splicing, never decoded into maps, so that key order and duplicate keys
// are kept as sent. The package never logs and exposes no third-party types.
package translate
