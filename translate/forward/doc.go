// Package forward is the forward bridge: a modern (2026-07-28) client in
// front of a legacy (2025-11-25 and earlier) server. The client sees a
// stateless server; the bridge leases a legacy session for each call
// (legacy.Pool), and when the upstream asks for input in-line it parks the
// call, answers input_required with the questions and a sealed
// requestState, and sends the retry's inputResponses into the parked call.
//
// What it owns, by file:
//
//   - bridge.go: Bridge, Options, Request, Serve. The life of a call is
//     drawn at the top of call.go; run.go relays a running call, park.go
//     parks one and resumes it from its retry, admit.go bounds the parked
//     calls (max_parked and per principal), gather.go decides how long a
//     round waits for sibling questions, getstream.go when a session opens
//     its standalone GET stream, abandon.go ends calls nobody retries.
//   - Resumable parking (an upstream with an event store): resume.go parks
//     a call holding no stream and resumes it with Last-Event-ID on any
//     instance, linger.go keeps the stream open briefly for a retry on this
//     instance, places.go counts what the upstream still holds, giveback.go
//     and prime.go hand sessions back and prime them.
//   - Tasks (task*.go): one table, expiry, lookup and runner loop for two
//     kinds of task: those the gateway hosts for legacy tools
//     (task_hosted.go), and the 2025 experimental tasks of an upstream
//     that runs them itself (task_upstream*.go, task_learn.go). A face's
//     own tools/call may ask to be hosted whatever the rules
//     (Request.HostTask: the REST face's calls, which then outlive their
//     instance). task.go
//     draws a task's life; task_run.go is the runner, task_serve.go
//     answers tasks/get, tasks/update and tasks/cancel. task_store.go
//     keeps a sealed record of each hosted task in the fleet's storage,
//     task_lease.go this instance's lease on its tasks; task_takeover.go
//     serves a task from its record when its owner is gone, and takes it
//     over. task_push.go pushes each status change as notifications/tasks
//     to the listen streams naming the task, from memory on the instance
//     holding it and from its record on the others. task_trace.go: the
//     spans of a task's run, with an event per transition, and of its
//     takeover, with tracing on.
//   - The requestState's replay filter (used_states.go) and its refusals
//     (state_refusal.go).
//
// Options are passed with each request, so each configuration's limits
// apply to its own calls; a call keeps the options it started with.
package forward
