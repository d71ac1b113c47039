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
	// GetStream (forward bridge): when the sessions leased for calls open
	// their standalone GET stream (subscriptions/listen always does).
	GetStream GetStream
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

// GetStream says when the forward bridge's upstream sessions open their
// standalone GET stream, where a legacy server may send requests outside
// any call's stream (the upstream's get_stream option).
type GetStream uint8

const (
	// GetStreamLearn (the zero value) opens the stream for a call whose
	// target (tool, prompt or resource) is not known to ask its questions
	// on the call's own stream, and none for one that is: one that asked
	// there and never on the GET stream (forward/getstream.go).
	GetStreamLearn GetStream = iota
	// GetStreamOn opens it with every session and keeps it.
	GetStreamOn
	// GetStreamOff never opens it: the upstream sends everything a call
	// needs on the call's own stream.
	GetStreamOff
)
