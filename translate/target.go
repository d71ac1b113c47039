package translate

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/legacy"
)

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

// ErrForwardTarget: the owner's base URL or the request's target is not
// fit to build the forwarded request's URL from.
var ErrForwardTarget = errors.New("cannot build the forwarded request's URL")

// ForwardURL builds the URL a request is forwarded to (to the instance of
// the fleet that owns its call): scheme and host of
// base (an owner's base URL, `http[s]://host[:port]`), path and query of
// orig (the client's request URL, in origin form). It fails rather than
// guess: the result's scheme and host are always base's.
func ForwardURL(base string, orig *url.URL) (*url.URL, error) {
	b, err := url.Parse(base)
	switch {
	case err != nil:
		return nil, fmt.Errorf("%w: owner address: %w", ErrForwardTarget, err)
	case b.Scheme != "http" && b.Scheme != "https":
		return nil, fmt.Errorf("%w: owner address: scheme %q", ErrForwardTarget, b.Scheme)
	case b.Host == "" || b.Hostname() == "" || b.User != nil || b.Opaque != "" || b.RawQuery != "" || b.Fragment != "" ||
		(b.Path != "" && b.Path != "/"):
		return nil, fmt.Errorf("%w: owner address is not scheme://host[:port]", ErrForwardTarget)
	case orig == nil || orig.Scheme != "" || orig.Host != "" || orig.User != nil || orig.Opaque != "" || orig.Fragment != "":
		return nil, fmt.Errorf("%w: the request target is not in origin form", ErrForwardTarget)
	}
	path := orig.EscapedPath()
	if !strings.HasPrefix(path, "/") {
		return nil, fmt.Errorf("%w: the request path does not begin with /", ErrForwardTarget)
	}
	out := &url.URL{Scheme: b.Scheme, Host: b.Host, Path: orig.Path, RawQuery: orig.RawQuery, ForceQuery: orig.ForceQuery}
	if orig.RawPath != "" && orig.RawPath == path {
		out.RawPath = orig.RawPath // keep the client's escaping (%2F)
	}
	if out.EscapedPath() != path {
		return nil, fmt.Errorf("%w: the request path does not survive re-encoding", ErrForwardTarget)
	}
	if strings.ContainsFunc(path+out.RawQuery, func(c rune) bool { return c <= ' ' || c == 0x7f }) {
		return nil, fmt.Errorf("%w: control character or space in the request target", ErrForwardTarget)
	}
	// A request target has no fragment (RFC 9112 §3.2.1), but Go's server
	// leaves a '#' in the query: written out and parsed again, the URL
	// would end its query there.
	if strings.Contains(out.RawQuery, "#") {
		return nil, fmt.Errorf("%w: '#' in the request's query", ErrForwardTarget)
	}
	return out, nil
}
