// Package seal is what the gateway seals and signs: the tokens it hands to
// clients, and the header with which one instance vouches for a request it
// forwards to another.
//
//   - Keyring: AES-256-GCM under rotating 32-byte keys (the first seals,
//     every one opens), each token bound to its Purpose as additional data,
//     so that a token of one kind never opens as another.
//   - Pin and ClientSession: the two kinds of gateway session id (a legacy
//     client pinned to a legacy upstream's session; a session the gateway
//     holds itself in front of a modern upstream), told apart by the
//     purpose they open for (OpenSessionID).
//   - State: the requestState of a parked forward-bridge call.
//   - SealOwner: the owner tag of in-line request ids (reverse bridge).
//   - ForwardAuth: the HMAC of the forwarding header (Mcp-Gateway-Forwarded)
//     and ReplayFilter, the replay filter it and the resumable requestStates share.
//
// It takes bytes and plain values: what a token binds (a principal's hash,
// a request's digest) is computed by its callers. It imports legacy only
// for legacy.UpstreamSessionID and jsonrpc.ValidJSON, never translate or
// Caddy.
package seal
