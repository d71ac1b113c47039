package caddymodule

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
	"github.com/caddyserver/certmagic"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/caddymodule/face"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/legacy"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/forward"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/reverse"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/seal"
)

func init() {
	caddy.RegisterModule(Handler{})
}

// Handler is an MCP gateway. It stands in front of MCP servers of either
// protocol era — legacy (2025-11-25 and earlier: `initialize`, sessions,
// server-to-client requests in-line on SSE) and modern (2026-07-28:
// stateless, per-request `_meta`) — and lets every client reach them.
//
// Same-era traffic is passed through: a legacy client is pinned to one
// upstream session through a sealed session id that any gateway instance with
// the same `state_key` can route, with no shared store; a modern request is
// validated (headers mirror the body, `_meta`, version) and forwarded.
//
// With `saga on` it also serves the tool-call saga (tools/callSaga,
// tools/resumeSaga) as a face over the modern path (caddymodule/face/saga).
//
// With `rest <base>` it also serves, under that path, the HTTP REST face
// of SEP-1597 (caddymodule/face/rest): lists, resources, prompts and tool
// calls as durable HTTP resources, another face over the same modern path.
//
// The handler is terminal: it answers every request it receives.
//
// The bridges' parked calls and rounds are process-wide (they survive a
// config reload), but each handler's options (limits, timeouts, state_key,
// instance_id, metrics and logs) apply to the calls it serves: several
// mcp_gateway handlers in one configuration keep their own.
//
// It sets these placeholders:
//
// Placeholder | Description
// ------------|-------------
// `{http.mcp_gateway.era}` | The era of the client request: `legacy` or `modern`
// `{http.mcp_gateway.method}` | The JSON-RPC method of the request, if any (its first 256 bytes)
// `{http.mcp_gateway.upstream}` | The URL of the upstream that served the request
// `{http.mcp_gateway.owner}` | The instance a request was forwarded to (the owner of its call)
// `{http.mcp_gateway.server}` | The server of a federated block (`servers`) a request was routed to; unset for a merged answer (a listing, `server/discover`) and in a block without servers
// `{http.mcp_gateway.cell}` | Client era and upstream era: `modern-legacy` (forward bridge), `legacy-modern` (reverse bridge), `legacy-legacy` or `modern-modern` (pass-through), `none` (refused before an upstream was chosen). A request forwarded to the instance owning its call is in its call's cell on both instances
// `{http.mcp_gateway.round}` | Bridged requests only: the input round of the request (forward bridge: the round of the `requestState` it carries, 0 for a first request; reverse bridge: the in-line rounds it went through)
// `{http.mcp_gateway.outcome}` | `complete`, `input_required`, `error`, `cancelled`, `expired` or `refused` (no room among the parked calls: `max_parked`, `max_parked_per_principal`) for bridged requests; `ok`, `error` or `cancelled` (from the HTTP status) for pass-through ones
//
// Metrics (`caddy_mcp_gateway_*`) are registered on Caddy's metrics
// registry, served at the admin endpoint's `/metrics`. Every bridged call
// is logged at info level (method, cell, rounds, outcome, duration), every
// request at debug level.
type Handler struct {
	// The MCP servers behind the gateway. At least one is required. A new
	// legacy session, and every modern request, goes to one of the upstreams
	// of a matching era chosen by the selection policy; a legacy session stays
	// on its upstream until it ends.
	Upstreams []*Upstream `json:"upstreams,omitempty"`

	// A source of more upstreams, looked up while the gateway runs: any of
	// Caddy's reverse_proxy dynamic upstream modules (`a`, `srv`, `multi`,
	// ...), with their options (`refresh`, `resolvers`, ...). Each address
	// (host:port) it returns becomes an upstream whose URL is
	// `dynamic_endpoint` with that address as host. They are selected,
	// probed and health-checked as the static `upstreams` are, which come
	// first; an address that is also a static upstream's is that upstream.
	// What the gateway learned about an address (era, health) is kept while
	// the source returns it and for an hour after it last did. A session
	// pinned to an upstream the source no longer returns, or a
	// `requestState` naming one, is served as one naming an upstream removed
	// from the configuration: the client gets 404 (`-32001`) and initializes
	// again; it never moves to another upstream. When a lookup fails, the
	// source's last answer stays in use. Default: none. Caddyfile:
	// `dynamic <source> [<args...>] { <options...> }`.
	DynamicUpstreamsRaw json.RawMessage `json:"dynamic_upstreams,omitempty" caddy:"namespace=http.reverse_proxy.upstreams inline_key=source"`

	// The MCP endpoint of each dynamic upstream, and its options: `url` is
	// a template `http:///path` or `https:///path` (scheme and path, and a
	// query if any, but no host: the address from the source goes there,
	// a trailing dot of a host name dropped), and `era`, `gather`,
	// `get_stream`, `resume` and `tasks` mean what they mean for an
	// upstream, for every dynamic upstream. Only with
	// `dynamic_upstreams`. Default: `{"url": "http:///mcp"}` (era `auto`).
	DynamicEndpoint *Upstream `json:"dynamic_endpoint,omitempty"`

	// Address ranges a `dynamic` upstream may not have: clients'
	// `Authorization` headers go to every upstream, so a DNS answer naming
	// the gateway's own host, a link-local address or a cloud's metadata
	// service must not become one. Each value is a class — `loopback`
	// (127.0.0.0/8, ::1), `link_local` (169.254.0.0/16, fe80::/10, where
	// most clouds' metadata service is), `metadata` (169.254.169.254,
	// 169.254.170.2, fd00:ec2::254, 168.63.129.16, 100.100.100.200,
	// 192.0.0.192), `unspecified` (0.0.0.0/8, ::, which reach the host
	// itself), `private` (10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16,
	// fc00::/7, 100.64.0.0/10; never by default: in-cluster upstreams live
	// there) — a CIDR prefix or an address; `none` alone refuses nothing.
	// An address the source answers is dropped from its answer (logged
	// once, at warn); a name it answers (an SRV target) is checked on
	// every connection, against the address actually connected to
	// (whatever the transport's resolver said then, so DNS rebinding does
	// not pass): one in a refused range is closed before anything is sent,
	// and the request fails as if the upstream could not be reached (a
	// failure counted against it). IPv4 addresses mapped into IPv6 or
	// embedded in NAT64 (64:ff9b::/96) are checked as themselves. With a
	// `transport` other than `http`, or through a network proxy, only the
	// addresses the source answers are checked. Setting it replaces the
	// default. Default: `loopback link_local metadata unspecified`, without
	// `loopback` when the source asks only resolvers on loopback (`a` or
	// `srv` with every `resolvers` address on loopback or `localhost`, or
	// `multi` of such sources; one on the system's resolvers never does).
	// Caddyfile: `dynamic_refuse <range...>`.
	DynamicRefuse []string `json:"dynamic_refuse,omitempty"`

	// How to spread new sessions and modern requests over the upstreams:
	// any of Caddy's reverse_proxy selection policies (`random`,
	// `round_robin`, `first`, `header`, `client_ip_hash`, ...). Upstreams
	// marked down by passive health checks are never offered to the policy.
	// Policies that count in-flight requests (`least_conn`) see every
	// upstream as idle. Default: `random`. Caddyfile: `lb_policy`.
	SelectionPolicyRaw json.RawMessage `json:"selection_policy,omitempty" caddy:"namespace=http.reverse_proxy.selection_policies inline_key=policy"`

	// How the gateway connects to its upstreams: one of Caddy's
	// reverse_proxy transport modules (`http`), with its options as under
	// `reverse_proxy`: `tls_trust_pool` for a private CA,
	// `tls_client_auth` for a client certificate, `tls_server_name`,
	// `dial_timeout`, `resolvers`, `local_address`, `keepalive`, ... Every
	// request to an upstream goes through it: both pass-throughs, the
	// probes and health checks, and both bridges. An upstream URL's scheme
	// says whether TLS is used (`https`); the `tls*` options configure
	// it, they do not turn an `http` URL into TLS (a warning is logged
	// when no upstream is `https`). The transport's own defaults apply, as
	// under reverse_proxy (a dial timeout of 3s, a proxy from
	// `HTTP_PROXY`/`HTTPS_PROXY`/`NO_PROXY` if set, which the built-in
	// transport ignores, HTTP/2 with upstreams that offer it). The forward
	// bridge (a modern client in front of a legacy server) keeps its own
	// HTTP/1.1 connections, two goroutines fewer per parked call, made
	// with the transport's dialer (timeout, resolvers, local address,
	// keep-alive probes, read and write timeouts), TLS configuration, TLS
	// handshake timeout, idle pool and response header limit; it sends
	// through the transport itself instead when those connections cannot
	// do what it asks (another transport module, `versions` without `1.1`,
	// a `tls_server_name` with placeholders, a network proxy,
	// `response_header_timeout`, `max_conns_per_host`, `keepalive off`;
	// or, for one upstream — a static one, or a dynamic one when its
	// source first returns it — a proxy from the environment), and logs
	// why. `proxy_protocol` is refused (the gateway's own requests have
	// no client to announce). After a reload with a transport, idle
	// upstream sessions of the old configuration are not reused (they are
	// closed once idle for 2 minutes); new ones are opened with the new
	// transport. Default: a built-in transport: direct (no proxy from the
	// environment), the system's roots, 5s dial and 10s TLS handshake
	// timeouts, HTTP/1.1.
	TransportRaw json.RawMessage `json:"transport,omitempty" caddy:"namespace=http.reverse_proxy.transport inline_key=protocol"`

	// What the gateway sends the MCP servers as `Authorization`: `none`,
	// `passthrough`, `bearer` or `exchange` (see its `mode`). With
	// `servers`, the default of each server, which may set its own.
	// Default: `none` for requests the gateway's `auth` authenticated,
	// else `passthrough`. Caddyfile: `upstream_auth <mode> [<token>]`,
	// `upstream_auth exchange { token_endpoint <url>; client_id <id>;
	// client_secret <secret>; audience <aud>; resource <url>; timeout
	// <duration>; max_entries <n> }`.
	UpstreamAuth *UpstreamAuth `json:"upstream_auth,omitempty"`

	// Several MCP servers behind this one endpoint, each with its own
	// upstreams and era: their catalogs are merged into one, names
	// prefixed, and every request is routed to its server. At most 64.
	// With `servers`, the block has none of the upstream options
	// (`upstreams`, `dynamic_upstreams`, `dynamic_endpoint`,
	// `dynamic_refuse`, `selection_policy`, `transport`) of its own: each
	// server has them. Without it, the block fronts one server: its
	// `upstreams`. Caddyfile: `server <name> { ... }`.
	Servers []*Server `json:"servers,omitempty"`

	// Options of a block with `servers`.
	Federation FederationConfig `json:"federation,omitzero"`

	// The gateway as the OAuth resource server of the MCP servers behind
	// it: every request must carry a valid access token (docs/security.md).
	// Default: none (whatever authenticates in front, e.g. Caddy's
	// `basic_auth` or `forward_auth`, decides). Caddyfile: `auth { ... }`.
	Auth *AuthConfig `json:"auth,omitempty"`

	// The groups of options (config.go), each a JSON object of its own.

	Health   HealthChecks   `json:"health,omitzero"`
	Fleet    FleetConfig    `json:"fleet,omitzero"`
	Security SecurityConfig `json:"security,omitzero"`
	Streams  StreamsConfig  `json:"streams,omitzero"`
	Parking  ParkingConfig  `json:"parking,omitzero"`
	Sessions SessionsConfig `json:"sessions,omitzero"`
	Tasks    TasksConfig    `json:"tasks,omitzero"`
	Faces    FacesConfig    `json:"faces,omitzero"`

	selector      reverseproxy.Selector
	auth          *resourceServer   // auth (auth.go); nil without
	ctx           context.Context   // this configuration's life: background probes
	dynamic       *dynamicUpstreams // dynamic_upstreams (dynamic.go); nil without
	keyring       *seal.Keyring
	logger        *zap.Logger
	client        *http.Client    // to the upstreams (transport.go)
	bridgeClient  legacy.Doer     // the forward bridge's, under a transport; nil: the bridge's own
	reverseClient *http.Client    // the reverse bridge's, under a transport; nil: the bridge's own
	peerClient    *http.Client    // peer_transport's, or nil
	streams       *streamRegistry // resumable streams and single answers: closed on unload
	calls         *streamRegistry // calls no client can pick up again: life's, ended by a graceful stop
	relays        *streamRegistry // requests relayed to another instance: closed on unload, at the end of a graceful stop
	life          *lifecycle      // the gateway's life in this process, shared across reloads (stop.go)
	stopWait      time.Duration   // how long a graceful stop waits for the calls: grace_period (stop.go)
	allowedOrigin map[string]bool
	hosts         hostGuard // allowed_hosts (guard.go)
	quirks        quirkSet  // accept_client_quirks (quirks.go)
	bridge        *forward.Bridge
	bridgeOpts    *forward.Options // this handler's, carried by its requests
	reverse       *reverse.Bridge  // the reverse bridge (reverse.go)
	reverseOpts   *reverse.Options // this handler's, sealing and serving its sessions
	fleet         fleet            // instance id, address, peers (fleet.go)
	metrics       *gatewayMetrics
	observer      callObserver // of both bridges' calls
	// viaProxy, set under an http transport whose connections the forward
	// bridge makes itself, reports the upstreams the transport reaches
	// through a proxy from the environment (upstreamTarget).
	viaProxy func(*Upstream) bool
	events   healthEvents // healthy and unhealthy (health.go)

	// taskStorage is Caddy's configured storage (ctx.Storage()), where the
	// forward bridge keeps the records of its tasks (task_store); nil with
	// task_store off. bridgeOpts.Tasks.Store is it.
	taskStorage certmagic.Storage

	// faces are the enabled faces (faces.go), which the front door asks
	// in turn.
	faces []face.Face

	// fed is a federated block's: its servers' inner handlers
	// (federation.go); nil for a block of one server, and in an inner
	// handler.
	fed *federation
	// serverName is an inner handler's server's name; "" otherwise.
	serverName string
	// upstreamCreds is UpstreamAuth, provisioned (upstream_auth.go).
	upstreamCreds *upstreamCredentials
	// blockKeyring is the block's keyring, which signs what goes between
	// instances (the forwarding header); keyring is an inner handler's
	// own (seal.Keyring.ForServer). The same keyring outside a federated
	// block's servers.
	blockKeyring *seal.Keyring
}

// CaddyModule returns the Caddy module information.
func (Handler) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.mcp_gateway",
		New: func() caddy.Module { return new(Handler) },
	}
}

// Interface guards
var (
	_ caddy.Provisioner           = (*Handler)(nil)
	_ caddy.Validator             = (*Handler)(nil)
	_ caddy.CleanerUpper          = (*Handler)(nil)
	_ caddyhttp.MiddlewareHandler = (*Handler)(nil)
)
