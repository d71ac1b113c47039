// Package reverse is the reverse bridge: a legacy (2025-11-25 and earlier)
// client in front of a modern (2026-07-28) server. The client sees a legacy
// server: the gateway holds the session itself, in a sealed session id
// (session.go); sends each request upstream statelessly with the full
// _meta (upstream.go); and turns every input_required round of the upstream
// into in-line requests on the SSE answer to the client (inline.go), whose
// POSTed answers it collects before retrying upstream (reverse.go).
//
// Its other parts: options.go (options and defaults), reshape.go and
// params.go (results and params between the eras), facts.go (what the
// upstream declared), listen.go, subscribe.go and resubscribe.go (the GET
// stream and subscriptions), streams.go (the bounds on GET streams),
// table.go (the per-instance session table), tasks.go (a modern server's
// tasks, followed for a client that knows none), traced.go (each POST
// upstream as a client span when tracing is on).
package reverse
