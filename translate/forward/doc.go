// Package forward is the forward bridge: a modern (2026-07-28) client in
// front of a legacy (2025-11-25 and earlier) server. The client sees a
// stateless server; the bridge leases a legacy session for each call
// (legacy.Pool), and when the upstream asks for input in-line it parks the
// call, answers input_required with the questions and a sealed
// requestState, and sends the retry's inputResponses into the parked call.
//
// What it owns, by file:
//
//   - bridge.go: Bridge, Options, Request, Serve; the life of a call is
//     drawn at the top of bridge_call.go; bridge_run.go relays a running
//     call, bridge_park.go parks one and resumes it from its retry,
//     bridge_admit.go bounds the parked calls (max_parked and per principal),
//     gather.go decides how long a round waits for sibling questions,
//     bridge_abandon.go ends calls nobody retries;
//   - resumable parking (an upstream with an event store): bridge_resume.go
//     parks a call holding no stream and resumes it with Last-Event-ID on
//     any instance, bridge_linger.go keeps the stream open briefly for a
//     retry on this instance, bridge_places.go counts what the upstream
//     still holds, bridge_giveback.go and bridge_prime.go hand sessions
//     back and prime them;
//   - Tasks the gateway hosts for legacy tools (bridge_task*.go, task_*.go),
//     and the 2025 experimental tasks of an upstream that runs them itself
//     (bridge_task2025*.go);
//   - the requestState's replay filter (used_states.go) and its refusals
//     (state_refusal.go).
//
// Options are passed with each request, so each configuration's limits
// apply to its own calls; a call keeps the options it started with.
package forward
