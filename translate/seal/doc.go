// Package seal is what the gateway seals and signs: every token it hands
// to clients (of both eras and every face), the records it keeps in
// Caddy's storage, and the header with which one instance vouches for a
// request it forwards to another.
//
// Keyring is AES-256-GCM under rotating 32-byte keys (state_key: the
// first seals, every one opens); it also names principals in storage
// (PrincipalName, name.go: a keyed digest). Each kind below is sealed for a Purpose
// of its own, bound as additional data, so that a token of one kind never
// opens as another. Each kind's codec bounds every field (a token longer
// than the largest one sealable is refused before it is opened) and is
// fuzzed where it parses what a client or the storage gives (the
// Fuzz* targets); golden_test.go keeps tokens of the session ids, the
// requestState, the owner tag and the federated cursor that a later
// release must still open (resume_trace_test.go and traceref_test.go, those
// minted before a call's tokens and records carried a TraceRef:
// traceref.go).
//
// The kinds, with their purpose strings, and where they are made and
// opened:
//
//	kind (type, Seal/Open)                purpose                                made / opened in
//	Pin (SealPin, OpenPin)                mcp-gateway/legacy-pin/v2              caddymodule (a legacy client pinned to a legacy upstream's session) / caddymodule routing via OpenSessionID
//	ClientSession (SealClientSession)     mcp-gateway/legacy-client-session/v1   translate/reverse (a session the gateway holds in front of a modern upstream) / OpenSessionID
//	State (SealState, OpenRequestState)   mcp-gateway/request-state/v1           translate/forward (the requestState of a call parked holding its stream) / translate/forward
//	ResumeState (SealResume)              mcp-gateway/request-state-resume/v1    translate/forward (the requestState of a call parked holding nothing: any instance resumes it) / translate/forward (OpenRequestState opens both)
//	Task (SealTask, OpenTask)             mcp-gateway/task/v1                    translate/forward (a hosted task's taskId) / translate/forward
//	TaskRecord (SealTaskRecord)           mcp-gateway/task-record/v1             translate/forward (a hosted task's record in Caddy's storage) / translate/forward (polls, takeovers)
//	owner tag (SealOwner, OpenOwner)      mcp-gateway/owner/v1                   translate/reverse (the instance in an in-line request's id) / translate/reverse
//	SagaState (SealSaga, OpenSaga)        mcp-gateway/saga-token/v1              caddymodule/face/saga (a sagaToken) / the same
//	RESTCall (SealRESTCall)               mcp-gateway/rest-call/v2 + its key     caddymodule/face/rest (a REST call's record in Caddy's storage) / the same
//	REST roots (SealRESTRoots)            mcp-gateway/rest-roots/v1              caddymodule/face/rest (a principal's roots in Caddy's storage) / the same
//	TurnState (SealTurn, OpenTurn)        mcp-gateway/multi-turn-sse/v1          caddymodule/face/multiturn (the Last-Event-ID ending a turn) / the same
//	TurnSession (SealTurnSession)         mcp-gateway/multi-turn-session/v1      caddymodule/face/multiturn (an opted-in session id, mt1.) / the same
//	FederatedCursor (SealFederatedCursor) mcp-gateway/federated-cursor/v1        translate/federate (the nextCursor of a list merged from several servers) / the same
//	forwarding header (ForwardAuth)       mcp-gateway/forwarded/v2 (an HMAC key) caddymodule (Mcp-Gateway-Forwarded on a request relayed to its owner) / caddymodule
//	principal's storage name (PrincipalName) mcp-gateway/storage-name/v1 (an HMAC key) caddymodule/face/rest, translate/forward (the folder of a principal's records in Caddy's storage)
//
// ReplayFilter makes a token single use on one instance (the forwarding
// header's nonce, resumable requestStates; for sagaTokens and turn
// tokens, the first check before the fleet-wide record in Caddy's
// storage, which caddymodule keeps).
//
// It takes bytes and plain values: what a token binds (a principal's hash,
// a request's digest) is computed by its callers. It imports legacy only
// for legacy.UpstreamSessionID and jsonrpc.ValidJSON, never translate or
// Caddy.
package seal
