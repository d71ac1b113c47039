package translate

import "github.com/caddy-mcp-gateway/caddy-mcp-gateway/legacy"

// Target is the upstream a bridged request goes to, as the configuration
// that knows the upstream describes it: its URL, its per-upstream options
// and how it is reached. The caller decides it once per upstream (when the
// upstream is configured, or when a dynamic source names it) and every
// request to that upstream carries it; translate keeps no table of
// upstreams of its own.
type Target struct {
	// Upstream is the URL of the upstream's MCP endpoint.
	Upstream string
	// NoGetStream (forward bridge): the upstream sends everything a call
	// needs on the call's own stream, so the sessions leased for calls
	// open no standalone GET stream (subscriptions/listen still does).
	NoGetStream bool
	// Resume (forward bridge): the upstream's call streams may be resumed
	// (its resume option): a call whose stream is resumable parks holding
	// nothing (forward/resume.go).
	Resume bool
	// GatherAlways (forward bridge) makes every round of a call wait
	// GatherWindow for sibling questions (the upstream is configured with
	// gather always).
	GatherAlways bool
	// NoTasks (reverse bridge): tools/call does not declare the Tasks
	// extension to the upstream, which must answer without a task (or
	// refuse a tool that needs one, -32021).
	NoTasks bool
	// Client, if set, makes the forward bridge's upstream requests to this
	// upstream instead of forward.Options.Client (say, the configured
	// transport, for an upstream reached through a proxy). Its sessions
	// are kept apart from those of other clients (legacy.PoolKey.Client).
	Client legacy.Doer
}
