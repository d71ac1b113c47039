package caddymodule

import (
	"encoding/json"

	"github.com/caddyserver/caddy/v2"
)

// Server is one named MCP server of a federated block: a group of
// upstreams (replicas of one server, in its own era) whose tools,
// prompts, resources and tasks the gateway shows, with those of the
// block's other servers, as one server's. Every option of the block that
// is not an upstream's (state_key, limits, tasks, faces, fleet, health,
// security, streams, sessions, parking) applies to each server.
type Server struct {
	// The server's name: 1 to 64 letters, digits, `_` or `-`. It is the
	// default prefix of its tools' and prompts' names, names the server in
	// logs, metrics, the admin API and errors, and namespaces its task
	// ids. Required, unique in the block.
	Name string `json:"name,omitempty"`

	// What the server's tool and prompt names are prefixed with in the
	// merged catalog, and removed from them again on the way to the
	// server: letters, digits, `_`, `-` and `.` (MCP's tool-name
	// characters), at most 64. `""` shows the names as the server gives
	// them (one server per block at most). Two servers' prefixes may not
	// be equal, nor one begin with the other (except `""`): a name is
	// routed to the server with the longest prefix it begins with, and an
	// entry that would route elsewhere (a collision, e.g. a name of the
	// `""` server beginning with another's prefix) is hidden and logged,
	// never served ambiguously. Default: `<name>__`. Caddyfile:
	// `prefix <prefix>` (`prefix ""` for none).
	Prefix *string `json:"prefix,omitempty"`

	// Which of the server's tools the gateway shows and lets clients call,
	// by name as the server gives it (before the prefix): `include` globs
	// (`*` matches any run of characters) keep only the tools matching
	// one, `exclude` globs then drop those matching one. A tool not shown
	// is answered as an unknown tool. Default: every tool. Caddyfile:
	// `tools include <glob...>` and `tools exclude <glob...>`.
	Tools *NameFilter `json:"tools,omitempty"`

	// The server's upstreams: replicas of one MCP server, with every
	// option of a block's `upstreams` (era, gather, get_stream, resume,
	// tasks). At least one, or `dynamic_upstreams`.
	Upstreams []*Upstream `json:"upstreams,omitempty"`

	// A source of more upstreams of this server, as a block's
	// `dynamic_upstreams`. Caddyfile: `dynamic <source> ...`.
	DynamicUpstreamsRaw json.RawMessage `json:"dynamic_upstreams,omitempty" caddy:"namespace=http.reverse_proxy.upstreams inline_key=source"`

	// The MCP endpoint of each dynamic upstream of this server, as a
	// block's `dynamic_endpoint`.
	DynamicEndpoint *Upstream `json:"dynamic_endpoint,omitempty"`

	// Address ranges a dynamic upstream of this server may not have, as a
	// block's `dynamic_refuse`.
	DynamicRefuse []string `json:"dynamic_refuse,omitempty"`

	// How to spread calls over this server's upstreams, as a block's
	// `selection_policy`. Default: the block's (`random`).
	SelectionPolicyRaw json.RawMessage `json:"selection_policy,omitempty" caddy:"namespace=http.reverse_proxy.selection_policies inline_key=policy"`

	// What the gateway sends this server as `Authorization`, as a block's
	// `upstream_auth` (none, passthrough, bearer or exchange). Default:
	// the block's. Caddyfile: `upstream_auth ...` in the server's block.
	UpstreamAuth *UpstreamAuth `json:"upstream_auth,omitempty"`

	// How the gateway connects to this server's upstreams, as a block's
	// `transport`. Default: the block's.
	TransportRaw json.RawMessage `json:"transport,omitempty" caddy:"namespace=http.reverse_proxy.transport inline_key=protocol"`
}

// NameFilter keeps some names of a list and drops the others.
type NameFilter struct {
	// Globs a name must match one of to be kept (`*` matches any run of
	// characters). Default: every name.
	Include []string `json:"include,omitempty"`
	// Globs that drop a name matching one of them, after `include`.
	Exclude []string `json:"exclude,omitempty"`
}

// FederationConfig is what applies to a block of several servers
// (`servers`), and only to one.
type FederationConfig struct {
	// How long a merged listing (`tools/list`, `prompts/list`,
	// `resources/list`, `resources/templates/list`, `server/discover`)
	// waits for each server: one that has not answered by then is left
	// out of the answer (logged at warn, counted by
	// `caddy_mcp_gateway_federation_left_out_total`), and the others'
	// entries are answered. Default: 5s. Caddyfile: `list_timeout`.
	ListTimeout caddy.Duration `json:"list_timeout,omitempty"`
}
