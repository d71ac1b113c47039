// Package caddymodule is the Caddy side of caddy-mcp-gateway: the
// http.handlers.mcp_gateway handler, its Caddyfile directive, and the glue
// between Caddy and the Caddy-free packages translate, legacy and sse.
package caddymodule

import (
	"context"
	"encoding/json"
	"net/http"

	"go.uber.org/zap"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/legacy"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/legacy/seal"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
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
	// source's last answer stays in use. Default: none.
	DynamicUpstreamsRaw json.RawMessage `json:"dynamic_upstreams,omitempty" caddy:"namespace=http.reverse_proxy.upstreams inline_key=source"`

	// The MCP endpoint of each dynamic upstream, and its options: `url` is
	// a template `http:///path` or `https:///path` (scheme and path, and a
	// query if any, but no host: the address from the source goes there,
	// a trailing dot of a host name dropped), and `era`, `gather` and
	// `get_stream` mean what they mean for an upstream. Only with
	// `dynamic_upstreams`. Default: `{"url": "http:///mcp"}` (era `auto`).
	DynamicEndpoint *Upstream `json:"dynamic_endpoint,omitempty"`

	// Address ranges a `dynamic` upstream may not have: clients'
	// `Authorization` headers go to every upstream, so a DNS answer naming
	// the gateway's own host, a link-local address or a cloud's metadata
	// service must not become one. Each value is a class — `loopback`
	// (127.0.0.0/8, ::1), `link_local` (169.254.0.0/16, fe80::/10),
	// `metadata` (169.254.169.254, 169.254.170.2, fd00:ec2::254,
	// 168.63.129.16, 100.100.100.200, 192.0.0.192), `unspecified`
	// (0.0.0.0/8, ::), `private` (10.0.0.0/8, 172.16.0.0/12,
	// 192.168.0.0/16, fc00::/7, 100.64.0.0/10) — a CIDR prefix or an
	// address; `none` alone refuses nothing. An address the source answers
	// is dropped from its answer (logged once, at warn); a name it answers
	// (an SRV target) is checked on every connection, against the address
	// actually connected to: one in a refused range is closed before
	// anything is sent, and the request fails as if the upstream could not
	// be reached. IPv4 addresses mapped into IPv6 or embedded in NAT64
	// (64:ff9b::/96) are checked as themselves. Setting it replaces the
	// default. Default: `loopback link_local metadata unspecified`, without
	// `loopback` when the source asks only resolvers on loopback (`a` or
	// `srv` with every `resolvers` address on loopback, or `multi` of such
	// sources). Caddyfile: `dynamic_refuse <range...>`.
	DynamicRefuse []string `json:"dynamic_refuse,omitempty"`

	// How to spread new sessions and modern requests over the upstreams:
	// any of Caddy's reverse_proxy selection policies (`random`,
	// `round_robin`, `first`, `header`, `client_ip_hash`, ...). Upstreams
	// marked down by passive health checks are never offered to the policy.
	// Policies that count in-flight requests (`least_conn`) see every
	// upstream as idle. Default: `random`.
	SelectionPolicyRaw json.RawMessage `json:"selection_policy,omitempty" caddy:"namespace=http.reverse_proxy.selection_policies inline_key=policy"`

	// How the gateway connects to its upstreams: one of Caddy's
	// reverse_proxy transport modules (`http`), with its options as under
	// `reverse_proxy`: `tls_trust_pool` for a private CA,
	// `tls_client_auth` for a client certificate, `tls_server_name`,
	// `dial_timeout`, `resolvers`, `local_address`, `keepalive`, ... Every
	// request to an upstream goes through it: both pass-throughs, the
	// probes and health checks, and both bridges. An upstream URL's scheme
	// says whether TLS is used (`https`); the `tls*` options configure
	// it, they do not turn an `http` URL into TLS. The transport's own
	// defaults apply, as under reverse_proxy (a dial timeout of 3s, a proxy
	// from `HTTP_PROXY`/`HTTPS_PROXY`/`NO_PROXY` if set, HTTP/2 with
	// upstreams that offer it). The forward bridge (a modern client in
	// front of a legacy server) keeps its own HTTP/1.1 connections, made
	// with the transport's dialer, TLS configuration, TLS handshake
	// timeout, idle pool and response header limit; it sends through the
	// transport itself instead when those connections cannot do what it
	// asks (another transport module, `versions` without `1.1`, a
	// `tls_server_name` with placeholders, a network proxy,
	// `response_header_timeout`, `max_conns_per_host`, `keepalive off`;
	// or, for one upstream, a proxy from the environment), and logs why.
	// `proxy_protocol` is refused. Default: a built-in transport: direct
	// (no proxy from the environment), the system's roots, 5s dial and
	// 10s TLS handshake timeouts, HTTP/1.1.
	TransportRaw json.RawMessage `json:"transport,omitempty" caddy:"namespace=http.reverse_proxy.transport inline_key=protocol"`

	// Keys sealing the session ids (and later the request state) the
	// gateway hands to clients: base64 encodings of 32 random bytes (for
	// example `openssl rand -base64 32`). The first key seals; all keys
	// open, so a key is rotated by putting a new one first and keeping the
	// old one until its sessions are gone. Every instance of a fleet must
	// share them: an instance given a session id or requestState sealed
	// under a key it lacks refuses it as any invalid one, and logs a
	// warning naming `state_key` (at most once per 10 seconds for each).
	// Placeholders such as `{env.MCP_GATEWAY_KEY}` are expanded; a key
	// that is empty once expanded (an unset variable) is an error, not a
	// reason to make one. Default (no `state_key` at all): a random key
	// made at start, so sessions do not survive a restart of the process
	// and cannot be served by another instance (they do survive a config
	// reload).
	StateKeys []string `json:"state_keys,omitempty"`

	// The id of this gateway instance in a fleet of several behind a load
	// balancer: letters, digits, `.`, `_` and `-`, at most 64. Parked calls
	// (a modern client in front of a legacy server) and rounds waiting for a
	// legacy client's answers (in front of a modern server) live on the
	// instance that started them, and the tokens it hands out name it; a
	// retry or an answer that lands on another instance is forwarded to it.
	// Other instances find it by its `advertise` address, sealed into those
	// tokens, or by this id in their `peer` list. Every mcp_gateway handler
	// of one Caddy process must use the same id. Placeholders such as
	// `{env.HOSTNAME}` are expanded. Default: a random id made at start,
	// enough for a single instance, or for a fleet that uses `advertise`.
	InstanceID string `json:"instance_id,omitempty"`

	// Where the other instances of the fleet reach this one, as a base URL
	// `http[s]://host[:port]` (no path: the client's request path is
	// kept). It must lead to this instance directly, not through the load
	// balancer, and to a route where this same mcp_gateway handler runs.
	// It is sealed into the tokens this instance hands out, so that an
	// autoscaled fleet needs no peer list. Requires a shared `state_keys`.
	// Placeholders are expanded. Default: none (other instances need a
	// `peer` entry naming this one).
	Advertise string `json:"advertise,omitempty"`

	// The other instances of a fixed fleet: instance id → base URL
	// `http[s]://host[:port]`, with the same meaning as `advertise`. Used
	// for tokens that carry no address (their instance does not
	// advertise), and preferred over a sealed address when both exist. An
	// entry for this instance's own id is ignored, so every instance can
	// share one list. Requires a shared `state_keys`, and an `instance_id`
	// (or `advertise`) on this instance. Default: none.
	Peers map[string]string `json:"peers,omitempty"`

	// How the instances of a fleet connect to each other when they forward
	// a request (`advertise`, `peer`): a transport module as for
	// `transport`, for instances reached at `https` addresses whose
	// certificates a private CA signs (`tls_trust_pool`) or that require a
	// client certificate (`tls_client_auth`). It does not apply to
	// upstreams, nor `transport` to instances. Default: a built-in
	// transport: direct (no proxy from the environment), the system's
	// roots, 3s dial and TLS handshake timeouts.
	PeerTransportRaw json.RawMessage `json:"peer_transport,omitempty" caddy:"namespace=http.reverse_proxy.transport inline_key=protocol"`

	// Origins (scheme://host[:port]) that browsers may call the gateway
	// from. A request carrying an `Origin` header is refused with 403 unless
	// the origin is listed here, or its host is the request's own `Host`
	// and that host passes the host check. `*` allows every origin.
	// Default: none beyond same-host.
	AllowedOrigins []string `json:"allowed_origins,omitempty"`

	// Host names or IP addresses (without port, case-insensitive) accepted
	// in the `Host` header, which defeats DNS rebinding: a web page whose
	// name an attacker points at the gateway's address sends its own name.
	// `*.example.com` accepts any one label in place of `*`; an entry with
	// a scheme, port or path is a configuration error. When set, a
	// request on any listener whose Host is not listed is refused with 403
	// (`-32600`), except that a loopback listener also accepts `localhost`
	// and loopback addresses. Unset, a loopback listener accepts only
	// those, and a listener on any other address accepts every Host: a
	// site address naming a host (`mcp.example.com { … }`) makes Caddy match
	// the Host already, but a site such as `:8080` on a LAN address is open
	// to DNS rebinding from browsers on that network. The hosts of this
	// instance's own `advertise` address and `peer` entry, which the other
	// instances name when they forward a request here, are always accepted.
	// Default: none.
	AllowedHosts []string `json:"allowed_hosts,omitempty"`

	// How long an SSE stream may stay silent before the gateway sends a
	// keep-alive comment (`: keep-alive`), so that idle-timeouts of load
	// balancers on the way do not cut it. A negative duration (`-1`) turns
	// keep-alives off. Default: 15s (also when set to 0).
	KeepAliveInterval caddy.Duration `json:"keepalive_interval,omitempty"`

	// How long to let open streams run after the configuration is unloaded
	// (reload) or the server stops, before the gateway closes them. A
	// reload closes only what clients pick up again: legacy streams (the
	// client resumes them with `Last-Event-ID` on the new configuration),
	// GET streams and subscriptions; calls in progress finish. Stopping
	// closes everything. Must not be negative. Default: 0 (close at once).
	StreamCloseDelay caddy.Duration `json:"stream_close_delay,omitempty"`

	// Passive health, as reverse_proxy's: how long a failure of an
	// upstream is counted, and how long an upstream that reached
	// `max_fails` counted failures is then skipped for new sessions and
	// modern requests, in every cell. A failure is a connection the
	// upstream refused or dropped without an answer (or any failure to
	// answer with HTTP at all), in every cell; and, for the requests the
	// gateway passes through (legacy sessions pinned to a legacy server,
	// modern requests to a modern one), an answer with an
	// `unhealthy_status` or slower than `unhealthy_latency`. A request
	// whose upstream could not take it moves to another upstream of the
	// right era (a new session, a modern request; never the requests of a
	// pinned session), and never back to one it already tried. An
	// upstream back from being skipped has its era probed again (if
	// `auto`) before it takes work. An `auto` upstream that does not
	// answer its era probe is skipped for `fail_duration` too. It cannot
	// be turned off. Must be positive. Default: 10s.
	FailDuration caddy.Duration `json:"fail_duration,omitempty"`

	// How many failures (see `fail_duration`) counted at once mark an
	// upstream unhealthy. At least 1. Default: 1.
	MaxFails int `json:"max_fails,omitempty"`

	// HTTP statuses that count as a failure of the upstream when a
	// passed-through request gets them: a code such as `503`, or a class
	// such as `5` (written `5xx` in the Caddyfile). The answer still
	// reaches the client. Default: none.
	UnhealthyStatus []int `json:"unhealthy_status,omitempty"`

	// How long a passed-through request may wait for the upstream's
	// response headers before the answer counts as a failure of the
	// upstream (it still reaches the client). For an SSE answer this is
	// the time to the stream's headers, not to its end. Default: 0 (off).
	UnhealthyLatency caddy.Duration `json:"unhealthy_latency,omitempty"`

	// The largest request body accepted, in bytes; larger requests get 413.
	// Must be positive. Default: 4 MiB.
	MaxRequestBody int64 `json:"max_request_body,omitempty"`

	// How long a call parked at `input_required` (a modern client in front
	// of a legacy server) waits for the client's retry. Then the upstream's
	// questions are answered with a cancellation and the call is cancelled.
	// In front of a modern server, how long a round waits for a legacy
	// client's answers. Must be positive (a call cannot wait for ever).
	// Default: 5m.
	ParkTTL caddy.Duration `json:"park_ttl,omitempty"`

	// The most calls this handler keeps parked at once (a modern client in
	// front of a legacy server). A call counts from its first
	// `input_required` until it ends, its later rounds included. When full,
	// a new call that wants to park is refused with 503 (`-32603`): the
	// legacy server has already asked its question, so the gateway answers
	// it with a cancellation and cancels the upstream call. A call to a
	// tool, prompt or resource known to ask for input is refused before it
	// is sent at all. No parked call is ever ended to make room. Calls
	// parked by other mcp_gateway handlers do not count. At least 1.
	// Default: 10000.
	MaxParked int `json:"max_parked,omitempty"`

	// The most parked calls (counted as for `max_parked`) one principal may
	// hold in this handler. At the limit, the principal's new call that
	// wants to park is refused with 429 (`-32603`), the same way; its own
	// parked calls are not ended, and other principals are not affected.
	// Without authentication in front every client without an
	// `Authorization` header is the same principal, so this is then a limit
	// for all of them together: set `principal` to a real identity. At
	// least 1. Default: 100.
	MaxParkedPerPrincipal int `json:"max_parked_per_principal,omitempty"`

	// How long, after a legacy server's first in-line request for input,
	// the gateway waits for sibling requests so that they are asked in the
	// same round: on the first round of each tool, prompt or resource, and
	// on every round of those that asked several questions at once (see the
	// upstream's `gather`). Other rounds do not wait: they take the
	// questions already there. A round that waits pays
	// this before the client gets its `input_required`, so keep it short;
	// raise it for a server whose simultaneous questions arrive further
	// apart (a sibling that misses the window is asked in a round of its
	// own). A negative duration (`-1`) turns the wait off: every round takes
	// the questions already there. Default: 2ms (also when set to 0).
	GatherWindow caddy.Duration `json:"gather_window,omitempty"`

	// How long a call parked holding no stream (an upstream with `resume
	// on` and resumable streams) keeps its upstream streams open all the
	// same, for a retry that comes back to this instance at once: such a
	// retry goes on reading the call's stream, with no new connection, no
	// GET and no replay, as if the call had been held. Only the calls of a
	// tool (prompt, resource) whose retry has come back to this instance
	// within this time linger, until one lingers with no retry: a tool a
	// person answers never does, and neither does a tool's first park.
	// The streams close when the time is up, or as soon as the upstream
	// sends anything on the call's stream (it may be answering a retry
	// that reached another instance, which then reopens the stream
	// itself; a go-sdk server refuses it that until the streams here
	// close). The state is the
	// resumable one all the same: any instance sharing `state_key` resumes
	// it. A negative duration (`-1`) closes the streams at once. At most
	// 1s. Default: 250ms (also when set to 0).
	ResumeLinger caddy.Duration `json:"resume_linger,omitempty"`

	// The most `input_required` rounds one request may go through, in both
	// bridges. A modern client in front of a legacy server: asking again for
	// missing or invalid answers counts as a round; beyond the limit the
	// upstream call is cancelled and the client gets an error (`-32603`). A
	// legacy client in front of a modern server: each round asks the client
	// in-line and retries upstream with its answers; a request that needs
	// more ends with an error (an `isError` tool result for `tools/call`).
	// How long a round waits for the client's answers is `park_ttl`.
	// At least 1. Default: 8.
	MaxRounds int `json:"max_rounds,omitempty"`

	// The most requests for input (elicitation, sampling, roots) one round
	// may carry, in both bridges. An upstream that asks for more in one
	// round has its call ended with an error (in front of a legacy server
	// the upstream call is cancelled). At least 1. Default: 16.
	MaxInputsPerRound int `json:"max_inputs_per_round,omitempty"`

	// The most messages a parked call holds: what a legacy upstream sends,
	// in front of a modern client, while the call waits for the client's
	// retry. A notification (progress, log) that finds this many waiting
	// ends the call at once: the upstream call is cancelled and the
	// client's retry gets `-32602`. While a client reads the call's stream,
	// the upstream waits for room instead (a client that stops reading is
	// ended by `write_timeout`). At least 1, at most 4096. Default: 32.
	MaxBufferedNotifications int `json:"max_buffered_notifications,omitempty"`

	// The most upstream sessions the gateway opens for one principal, in
	// front of legacy servers for modern clients (across upstreams and
	// capability sets; each call in progress or parked holds one). When a
	// principal is at the limit, its least recently used idle session is
	// closed to make room; if none is idle, the request gets 429 (`-32603`).
	// The principal's sessions are counted across every mcp_gateway handler
	// of the process; this handler's limit applies to those it opens.
	// Without authentication in front every client without an
	// `Authorization` header is the same principal, so this is then a limit
	// for all of them together (1000 calls in progress or parked, in all):
	// set `principal` to a real identity. At least 1. Default: 1000.
	MaxSessionsPerPrincipal int `json:"max_sessions_per_principal,omitempty"`

	// How long one write to a client may block (a client that stopped
	// reading, or whose network stalled): each event of a stream, and each
	// write of an answer relayed or made by the gateway. Then the answer
	// is ended; a call of either bridge is abandoned (cancelled upstream).
	// A negative duration (`-1`) turns the bound off: a write may block
	// until the client or the network gives up. Default: 30s (also when set
	// to 0).
	WriteTimeout caddy.Duration `json:"write_timeout,omitempty"`

	// How long a session the gateway holds for a legacy client in front of
	// a modern server stays valid after `initialize`; then its requests get
	// 404 and the client initializes again. The session id is sealed and
	// self-contained, so any instance sharing `state_key` serves it.
	// Must be positive. Default: 24h.
	SessionLifetime caddy.Duration `json:"session_lifetime,omitempty"`

	// The most GET streams of gateway-held sessions (legacy clients in
	// front of modern servers) open at once, in the whole process: each
	// holds an upstream `subscriptions/listen` (one connection, two while
	// its subscriptions change) and about five goroutines, and a
	// gateway-held session costs a client nothing to open. A GET beyond
	// it gets 503 (`-32603`); no stream is closed to make room. The
	// streams of every mcp_gateway handler count; this handler's limit
	// applies to the GETs it serves. At least 1. Default: 10000.
	MaxGetStreams int `json:"max_get_streams,omitempty"`

	// The most GET streams of gateway-held sessions one principal holds
	// open at once, in the whole process, counted as for
	// `max_get_streams`; a GET beyond it gets 429 (`-32603`), and other
	// principals are not affected. Without authentication in front every
	// client without an `Authorization` header is the same principal, so
	// this is then a limit for all of them together: set `principal` to a
	// real identity. At least 1. Default: 100.
	MaxGetStreamsPerPrincipal int `json:"max_get_streams_per_principal,omitempty"`

	// How long the gateway follows a task for a legacy client in front of
	// a modern server (an upstream with `tasks on` answered its
	// `tools/call` with a task), counted from the task's creation; the
	// task's own `ttlMs`, when shorter, bounds it too. Then the task is
	// cancelled upstream (`tasks/cancel`) and the client gets `-32603`
	// saying the task did not end in time. Must be positive. Default: 1h.
	MaxTaskWait caddy.Duration `json:"max_task_wait,omitempty"`

	// Who is calling, as a placeholder expression evaluated per request.
	// Upstream sessions and parked calls are never shared across
	// principals, and a requestState only opens for its principal. Only a
	// hash of the value is kept. Set it to the user identity your
	// authentication provides, e.g. `{http.auth.user.id}`. A request
	// another instance of the fleet forwarded (its forwarding header
	// verified) is served as the principal that instance evaluated, which
	// the header carries, hashed and signed. Default:
	// `{http.request.header.Authorization}`.
	Principal string `json:"principal,omitempty"`

	// How often to check every upstream actively (the dynamic ones too): a
	// legacy upstream with `initialize` and `ping` (then the probe session
	// is deleted), a modern one with `server/discover`, an `auto` one whose
	// era is not known with the era probe. An upstream that fails
	// `health_fails` checks in a row is skipped for new sessions and modern
	// requests until it passes `health_passes` in a row. Zero or a negative duration (`-1`) means no
	// active checks (the passive ones, `fail_duration`, still apply).
	// Default: 0 (off).
	HealthInterval caddy.Duration `json:"health_interval,omitempty"`

	// How long one active health check may take before it counts as
	// failed; also the bound of an era probe. Era probes (of `auto`
	// upstreams whose era is not known yet, or forgotten after they
	// failed) run in the background, never under a client request: a
	// request is served by an upstream whose era is known, while the
	// others are probed. Only when no available upstream's era is known
	// at all does a request wait, holding no lock, for the first probe in
	// flight to end, at most this long. Must be positive. Default: 5s.
	HealthTimeout caddy.Duration `json:"health_timeout,omitempty"`

	// How many active health checks in a row an upstream must pass to be
	// taken back when it is down. At least 1. Default: 1.
	HealthPasses int `json:"health_passes,omitempty"`

	// How many active health checks in a row an upstream must fail to be
	// marked down. At least 1. Default: 1.
	HealthFails int `json:"health_fails,omitempty"`

	// Which tools' calls may become tasks the gateway hosts, in front of
	// a legacy server, for modern clients that declare the Tasks extension
	// (`io.modelcontextprotocol/tasks`). One rule per tool (`tool` `*`
	// for every tool not named); a tool without a rule takes the
	// upstream's own `execution.taskSupport`, as its `tools/list` said
	// through the gateway to the same principal (a listing is never
	// applied to another principal's calls), else `forbidden`. Caddyfile: `task <tool>
	// <forbidden|optional|required> [<window>]`, repeatable. Default: none.
	Tasks []*TaskPolicy `json:"tasks,omitempty"`

	// The window of the task rules that name none, and of the tools whose
	// rule comes from the upstream's `tools/list`: how long the gateway
	// holds a call before it turns it into a task. Zero or negative: the
	// task is made at once. Default: 1s.
	TaskWindow caddy.Duration `json:"task_window,omitempty"`

	// How long a task's record lives from its creation (the `ttlMs` its
	// client sees): its result stays readable until then, and a task still
	// running then is cancelled (its upstream call too). Must be positive.
	// Default: 1h.
	TaskTTL caddy.Duration `json:"task_ttl,omitempty"`

	// The `pollIntervalMs` suggested to clients polling a task. A negative
	// duration (`-1`) suggests none. Default: 1s.
	TaskPollInterval caddy.Duration `json:"task_poll_interval,omitempty"`

	// The most tasks this handler runs at once (with the calls that may
	// still become one). A task gives its place back the moment it is
	// terminal (completed, failed or cancelled: by `tasks/cancel`, its
	// `task_ttl` or the gateway stopping); its record stays readable until
	// its `task_ttl` without counting. When full, a call that may become a
	// task is refused with 503 (`-32603`) before it is sent. No task is
	// ended to make room. At least 1. Default: 1000.
	MaxTasks int `json:"max_tasks,omitempty"`

	// The most running tasks (counted as for `max_tasks`) one principal
	// may hold in this handler: at the limit its new call that may become
	// a task is refused with 429 (`-32603`) before it is sent, until one
	// of its tasks ends; `tasks/cancel` frees a place at once. At least 1.
	// Default: 100.
	MaxTasksPerPrincipal int `json:"max_tasks_per_principal,omitempty"`

	// UNSAFE, for debugging only: add to the debug-level log line of every
	// request its `Mcp-Session-Id`, the evaluated principal (often a
	// bearer token) and the first 4 KiB of its body (params,
	// `requestState`, answers). Without it, logs never carry tokens,
	// params, `requestState` or session ids. Default: false.
	LogUnsafeDetails bool `json:"log_unsafe_details,omitempty"`

	selector      reverseproxy.Selector
	ctx           context.Context   // this configuration's life: background probes
	dynamic       *dynamicUpstreams // dynamic_upstreams (dynamic.go); nil without
	keyring       *seal.Keyring
	logger        *zap.Logger
	client        *http.Client    // to the upstreams (transport.go)
	bridgeClient  legacy.Doer     // the forward bridge's, under a transport; nil: the bridge's own
	reverseClient *http.Client    // the reverse bridge's, under a transport; nil: the bridge's own
	peerClient    *http.Client    // peer_transport's, or nil
	streams       *streamRegistry // resumable streams and single answers: closed on unload
	calls         *streamRegistry // calls no client can pick up again: openCalls, closed when Caddy exits
	allowedOrigin map[string]bool
	hosts         hostGuard // allowed_hosts (guard.go)
	bridge        *translate.Bridge
	bridgeOpts    *translate.BridgeOptions  // this handler's, carried by its requests
	reverse       *translate.Reverse        // the reverse bridge (reverse.go)
	reverseOpts   *translate.ReverseOptions // this handler's, sealing and serving its sessions
	fleet         fleet                     // instance id, address, peers (fleet.go)
	metrics       *gatewayMetrics
	observer      callObserver // of both bridges' calls
	// viaProxy, set under an http transport whose connections the forward
	// bridge makes itself, reports the upstreams the transport reaches
	// through a proxy from the environment (upstreamTarget).
	viaProxy func(*Upstream) bool
	events   healthEvents // healthy and unhealthy (health.go)
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
