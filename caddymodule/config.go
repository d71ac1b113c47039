package caddymodule

import (
	"encoding/json"

	"github.com/caddyserver/caddy/v2"
)

// The groups of the handler's JSON configuration. Each is a field of
// Handler named after its JSON key, so that code names the group it reads
// (h.Parking.MaxParked, as reverse_proxy reads h.HealthChecks.Active) and
// its JSON is an object of its own (`"parking": {"max_parked": 100}`).
// An empty group is left out of the JSON (omitzero). docs/json.md is made
// from the comments of these fields (TestJSONReference).

// HealthChecks is the `health` object of the handler: how the gateway
// tells that an upstream is down, so that new sessions and modern
// requests go to the others. As in reverse_proxy's `health_checks`,
// active checks are requests the gateway makes on its own, and passive
// ones are counted from the traffic it serves.
type HealthChecks struct {
	Active  ActiveHealthChecks  `json:"active,omitzero"`
	Passive PassiveHealthChecks `json:"passive,omitzero"`
}

// ActiveHealthChecks is `health.active`: checks the gateway makes on its
// own, every `interval`. Off unless `interval` is set.
type ActiveHealthChecks struct {
	// How often to check every upstream actively (the dynamic ones too): a
	// legacy upstream with `initialize` and `ping` (then the probe session
	// is deleted), a modern one with `server/discover`, an `auto` one whose
	// era is not known with the era probe. An upstream that fails
	// `fails` checks in a row is skipped for new sessions and modern
	// requests until it passes `passes` in a row; then it is taken back
	// at once, even within `fail_duration`. Zero or a negative duration
	// (`-1`) means no active checks (the passive ones still apply).
	// Default: 0 (off).
	// Caddyfile: `health_interval`.
	Interval caddy.Duration `json:"interval,omitempty"`

	// How long one active health check may take before it counts as
	// failed; also the bound of an era probe. Era probes (of `auto`
	// upstreams whose era is not known yet, or forgotten after they
	// failed) run in the background, never under a client request: a
	// request is served by an upstream whose era is known, while the
	// others are probed. Only when no available upstream's era is known
	// at all does a request wait, holding no lock, for the first probe in
	// flight to end, at most this long; then it gets 503 if none answered.
	// Must be positive. Default: 5s.
	// Caddyfile: `health_timeout`.
	Timeout caddy.Duration `json:"timeout,omitempty"`

	// How many active health checks in a row an upstream must pass to be
	// taken back when it is down. At least 1. Default: 1.
	// Caddyfile: `health_passes`.
	Passes int `json:"passes,omitempty"`

	// How many active health checks in a row an upstream must fail to be
	// marked down. At least 1. Default: 1.
	// Caddyfile: `health_fails`.
	Fails int `json:"fails,omitempty"`
}

// PassiveHealthChecks is `health.passive`: failures counted from the
// requests the gateway serves. Always on.
type PassiveHealthChecks struct {
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
}

// FleetConfig is the `fleet` object of the handler: the keys that seal
// what the gateway hands to clients, and how the instances of a fleet
// behind one load balancer find each other. A single instance needs
// none of it, unless its sessions must survive a restart (`state_keys`).
type FleetConfig struct {
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
	// Caddyfile: `state_key <key> [<older keys...>]`.
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
	// Caddyfile: `peer <id> <base url>`, repeatable.
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
}

// SecurityConfig is the `security` object of the handler: which browsers
// and `Host` names may reach the gateway, who is calling (the principal
// that sessions, parked calls and limits are kept apart by), how large a
// request may be, and what the logs may carry.
type SecurityConfig struct {
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

	// The largest request body accepted, in bytes; larger requests get 413.
	// Must be positive. Default: 4 MiB.
	MaxRequestBody int64 `json:"max_request_body,omitempty"`

	// Header bugs of known clients that the gateway repairs instead of
	// refusing the request with `-32020`, as the specification requires of
	// a server. Each repair applies only to a request whose body is modern
	// (its `params._meta` `io.modelcontextprotocol/protocolVersion` is
	// `2026-07-28`), only makes a header say what the body says, and is
	// made before the request's era is decided and it is validated: a
	// header that still disagrees with the body is refused as before.
	// Routing and policy read the body either way. Each repair is logged
	// at debug level with the client's `clientInfo` name and counted in
	// `caddy_mcp_gateway_client_quirks_repaired_total{repair}`. A repaired
	// header reaches a modern upstream as repaired, which breaks an HTTP
	// message signature that covers it.
	//
	// `protocol_header_mismatch`: a single `MCP-Protocol-Version` header
	// naming a legacy revision (`2025-11-25`, `2025-06-18`, `2025-03-26`,
	// `2024-11-05`) is set to the body's version (Claude's connectors
	// send `2025-11-25` with a 2026-07-28 body).
	//
	// `missing_method_header`: on a request, an absent `Mcp-Method` is set
	// to the body's method, and an absent `Mcp-Name` to its `params.name`,
	// `params.uri` or `params.taskId` (Base64-encoded when needed), for the
	// methods that have one (some stdio-to-HTTP bridges omit them). A
	// header present is never changed. A `tools/call` so repaired that
	// goes to a modern upstream also gets the `Mcp-Param-*` headers it
	// lacks, from the `x-mcp-header` annotations of the upstream's
	// `tools/list` (asked with the client's `Authorization`, kept per
	// upstream and principal for its `ttlMs`, 1 minute to 1 hour, as the
	// reverse bridge does for legacy clients); the forward bridge's legacy
	// upstreams need none.
	//
	// Default: none (every such request gets `-32020`).
	AcceptClientQuirks []string `json:"accept_client_quirks,omitempty"`

	// UNSAFE, for debugging only: add to the debug-level log line of every
	// request its `Mcp-Session-Id`, the evaluated principal (often a
	// bearer token) and the first 4 KiB of its body (params,
	// `requestState`, answers), in fields named `unsafe_*`; a warning is
	// logged at start while it is on. Without it, logs never carry tokens,
	// params, `requestState` or session ids. Never in production. Default:
	// false.
	LogUnsafeDetails bool `json:"log_unsafe_details,omitempty"`
}

// StreamsConfig is the `streams` object of the handler: how the gateway
// writes to clients: keep-alives on SSE streams, the bound on one write,
// and how long streams outlive a reload.
type StreamsConfig struct {
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

	// How long one write to a client may block (a client that stopped
	// reading, or whose network stalled): each event of a stream, and each
	// write of an answer relayed or made by the gateway. Then the answer
	// is ended; a call of either bridge is abandoned (cancelled upstream).
	// A negative duration (`-1`) turns the bound off: a write may block
	// until the client or the network gives up. Default: 30s (also when set
	// to 0).
	WriteTimeout caddy.Duration `json:"write_timeout,omitempty"`
}

// ParkingConfig is the `parking` object of the handler: calls waiting
// for a client's answers. In front of a legacy server, a modern client's
// call is parked at `input_required` between its rounds; in front of a
// modern server, a legacy client is asked in-line. `park_ttl`,
// `max_rounds` and `max_inputs_per_round` bound the rounds of both
// bridges; the others apply to the parked calls of the forward bridge
// (a modern client in front of a legacy server).
type ParkingConfig struct {
	// How long a call parked at `input_required` (a modern client in front
	// of a legacy server) waits for the client's retry. Then the upstream's
	// questions are answered with a cancellation, the call is cancelled and
	// its upstream session ended. In front of a modern server, how long a
	// round waits for a legacy client's answers before the call ends with
	// an error. Must be positive (a call cannot wait for ever).
	// Default: 5m.
	ParkTTL caddy.Duration `json:"park_ttl,omitempty"`

	// The most calls this handler keeps parked at once (a modern client in
	// front of a legacy server). A call counts from its first
	// `input_required` until it ends, its later rounds included. When full,
	// a new call that wants to park is refused with 503 (`-32603`, "the
	// gateway has too many calls waiting for input (max_parked)"): the
	// legacy server has already asked its question, so the gateway answers
	// it with a cancellation, sends the upstream `notifications/cancelled`
	// and ends the call's session. A call to a tool, prompt or resource
	// that has asked for input before is refused before it is sent at all,
	// so the upstream sees nothing of it; other calls go through and are
	// refused only if they ask. No parked call is ever ended to make room,
	// and there is no `Retry-After`: a place frees when a parked call is
	// answered or expires (`park_ttl`), or, for a call parked holding no
	// stream, when it is found finished on another instance (checked at
	// once before a refusal; see the upstream's `resume`). Calls parked by
	// other mcp_gateway handlers do not count. At least 1. Default: 10000.
	MaxParked int `json:"max_parked,omitempty"`

	// The most parked calls (counted as for `max_parked`) one principal may
	// hold in this handler. At the limit, the principal's new call that
	// wants to park is refused with 429 (`-32603`, "…
	// (max_parked_per_principal)"), the same way; its own parked calls are
	// not ended (all are work in progress, unlike the idle sessions
	// `max_sessions_per_principal` closes first), and other principals are
	// not affected. 100 waiting questions is more than one person or agent
	// answers at once, and filling the default `max_parked` takes a hundred
	// principals. Without authentication in front every client without an
	// `Authorization` header is the same principal, so this is then a limit
	// for all of them together: set `principal` to a real identity. At
	// least 1. Default: 100.
	MaxParkedPerPrincipal int `json:"max_parked_per_principal,omitempty"`

	// How long, after a legacy server's first in-line request for input,
	// the gateway waits for sibling requests so that they are asked in the
	// same round: on the first round of each tool, prompt or resource, and
	// on every round of those that asked several questions at once (two or
	// more in one round, or one that arrived while their call was parked,
	// which is asked in the next round, not lost), and on every round in
	// front of an upstream with `gather always`. The gateway remembers what
	// the 4096 most recently used tools, prompts and resources did (per
	// upstream, per Caddy process). Other rounds do not wait: they take the
	// questions already there. A round that waits pays this before the client gets its `input_required`, so keep it short;
	// raise it for a server whose simultaneous questions arrive further
	// apart (a sibling that misses the window is asked in a round of its
	// own). A negative duration (`-1`) turns the wait off: every round takes
	// the questions already there. Default: 2ms (also when set to 0).
	GatherWindow caddy.Duration `json:"gather_window,omitempty"`

	// How long a call parked holding no stream (an upstream with `resume
	// on` and resumable streams) keeps its upstream streams open all the
	// same, for a retry that comes back to this instance at once (a client
	// that answers without asking anybody: roots, an agent's own
	// sampling): such a retry goes on reading the call's stream, with no
	// new connection, no GET and no replay, as if the call had been held
	// (a round then costs about what a held round does). Only the calls of
	// a tool (prompt, resource) whose retry has come back to this instance
	// within this time linger, until one lingers with no retry (the
	// gateway remembers 4096 of them, per Caddy process, as for
	// `gather_window`): a tool a person answers never does, and neither
	// does a tool's first park. In a fleet whose instances reach each
	// other (`advertise` or `peer`), a retry that lands on another
	// instance while the call lingers here is relayed here and reads on
	// the same way (the state says until when the call lingers); a
	// session given back by another instance within this time (a retry
	// that came back at once, elsewhere) teaches this instance like a
	// retry here. The streams close when the time is up, or as soon as
	// the upstream sends anything on the call's stream or ends it: it may
	// be answering a retry that reached an instance that could not relay
	// it, which then reopens the stream itself (a go-sdk server refuses
	// that instance's GET with 409 until the streams here close, and the
	// gateway tries again after 4ms, doubling, for up to 2s: such a retry
	// takes about 5ms more; a TypeScript SDK server hands the stream over
	// at once). An instance that cannot reach this one (it is down, or
	// the fleet lists no peers) resumes the call itself. The state is the
	// resumable one either way: any instance sharing `state_key` resumes
	// it, and the call survives this one.
	// Calls lingering when the gateway stops let go of their streams then
	// (a reload keeps them, as it keeps parked calls). A negative duration
	// (`-1`) closes the streams at `input_required`. At most 1s. Default:
	// 250ms (also when set to 0).
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
}

// SessionsConfig is the `sessions` object of the handler: the upstream
// sessions the gateway opens for modern clients in front of legacy
// servers, and the sessions it holds itself for legacy clients in front
// of modern servers, with their GET streams.
type SessionsConfig struct {
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
}

// TasksConfig is the `tasks` object of the handler: the tasks the
// gateway hosts in front of a legacy server for modern clients that
// declare the Tasks extension (`rules` and the options after it), and
// how long it follows a task a modern server made of a legacy client's
// call (`max_task_wait`).
type TasksConfig struct {
	// Which tools' calls may become tasks the gateway hosts, in front of
	// a legacy server, for modern clients that declare the Tasks extension
	// (`io.modelcontextprotocol/tasks`). One rule per tool (`tool` `*`
	// for every tool not named); a tool without a rule takes the
	// upstream's own `execution.taskSupport`, as its `tools/list` said
	// through the gateway to the same principal (a listing is never
	// applied to another principal's calls), else `forbidden`. Default:
	// none. Caddyfile: `task <tool> <forbidden|optional|required>
	// [<window>]`, repeatable.
	Rules []*TaskPolicy `json:"rules,omitempty"`

	// The window of the task rules that name none, and of the tools whose
	// rule comes from the upstream's `tools/list`: how long the gateway
	// holds a call before it turns it into a task. Zero or negative: the
	// task is made at once. Default: 1s.
	Window caddy.Duration `json:"task_window,omitempty"`

	// How long a task's record lives from its creation (the `ttlMs` its
	// client sees): its result stays readable until then, and a task still
	// running then is cancelled (its upstream call too); afterwards
	// `tasks/get` answers `-32602`. Must be positive. Default: 1h.
	TTL caddy.Duration `json:"task_ttl,omitempty"`

	// The `pollIntervalMs` suggested to clients polling a task (advice
	// only: polls are never refused for coming early). A negative duration
	// (`-1`) suggests none. An instance that took a task over from a lost
	// one reopens the call's stream upstream after five of these (5s with
	// none, at least 1s) with nothing heard. Default: 1s.
	PollInterval caddy.Duration `json:"task_poll_interval,omitempty"`

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

	// Where the records of the tasks the gateway hosts are kept, so that a
	// task outlives its instance: `storage` or `off`. `storage` is Caddy's
	// configured storage (the `storage` global option; by default
	// `file_system` under Caddy's data directory). A record holds what any
	// instance needs to answer `tasks/get` and to go on with the task (its
	// status, its questions waiting for the client, its result or error,
	// the instance owning it) and is sealed with `state_key`: whoever can
	// read or write the storage can neither read a result nor make an
	// instance resume a call of its choosing, and an instance without the
	// key that sealed a record cannot open it (with no `state_key`, the
	// random key made at start: not even this instance after a restart).
	// Another instance sharing the storage and `state_key` answers a
	// task's `tasks/get` from its record when the task's owner cannot be
	// reached, and takes the task over once the owner's `lease` has
	// lapsed. In a fleet, every instance must see the same storage:
	// configure one shared storage module for all of them (for example a
	// redis storage module built in with xcaddy), or put Caddy's data
	// directory on a volume they share; with a `file_system` of its own,
	// each instance reads only its own records. A record is written when
	// its task changes status, never on a poll, and deleted at its
	// `task_ttl`; a write that fails is logged (warn) and counted
	// (`task_store_events_total`), and the task goes on in memory. `off`:
	// a task lives in its instance's memory only, and dies with it (a
	// restart, a crash). `storage` needs `state_key`. Default: `storage`
	// when `state_key` is set, else `off`.
	// Caddyfile: `task_store`.
	Store string `json:"store,omitempty"`

	// How long an instance's claim (lease) on the tasks it owns lasts
	// without renewal, when `store` keeps task records: the instance
	// renews it every third of this (one storage write per period,
	// whatever the number of tasks) and releases it when it stops
	// gracefully, so that other instances take its tasks over at once.
	// The tasks of an instance that died without releasing it are taken
	// over once it lapses: a shorter lease makes that sooner and costs
	// more writes, and an instance that cannot renew its lease in time
	// (a storage slow or unreachable for two thirds of it, a long pause)
	// may see its tasks taken over while it still runs them. Not used
	// with `store` `off`. The REST face (`faces.rest`) renews each running
	// call's lease the same way, whatever `store` says. At least 1s.
	// Default: 15s.
	// Caddyfile: `task_lease`.
	Lease caddy.Duration `json:"lease,omitempty"`

	// The largest result (or error) of a task the gateway hosts, in bytes,
	// with or without `store`: a task whose tool answers with more fails,
	// with an error saying that its result was too large, instead of
	// holding the result (in memory until its `task_ttl`, and in its
	// record). At least 1, at most 67108864 (64MiB, what a record can
	// hold). Default: 4194304 (4MiB).
	// Caddyfile: `max_task_result <size>` (bytes, or a size such as `4MiB`).
	MaxResult int64 `json:"max_result,omitempty"`

	// How long the gateway follows a task for a legacy client in front of
	// a modern server (an upstream with `tasks on` answered its
	// `tools/call` with a task), counted from the task's creation; the
	// task's own `ttlMs`, when shorter, bounds it too. Then the task is
	// cancelled upstream (`tasks/cancel`) and the client gets `-32603`
	// saying the task did not end in time. Must be positive. Default: 1h.
	MaxTaskWait caddy.Duration `json:"max_task_wait,omitempty"`

	// How often an instance reads, from `store`, the record of a task
	// another instance runs, for a client listening for its status
	// changes (`subscriptions/listen` naming its taskId in
	// `notifications.taskIds`): the `notifications/tasks` comes up to this
	// long after the change (a task this instance runs pushes at once).
	// A status shorter than this may be passed over for the next one
	// (each notification carries the whole task, the last one always
	// arrives). Each listener costs one storage read per task per period.
	// Must be positive. Default: 500ms.
	// Caddyfile: `task_listen_poll`.
	ListenPoll caddy.Duration `json:"listen_poll,omitempty"`

	// The most taskIds one `subscriptions/listen` follows: those after
	// are left out of its acknowledgement. At least 1. Default: 100.
	// Caddyfile: `max_listen_task_ids`.
	MaxListenTaskIDs int `json:"max_listen_task_ids,omitempty"`

	// The most `subscriptions/listen` streams following tasks one
	// principal holds open on an instance: one more is refused with 429
	// (`-32603`). At least 1. Default: 10.
	// Caddyfile: `max_task_listeners_per_principal`.
	MaxTaskListenersPerPrincipal int `json:"max_task_listeners_per_principal,omitempty"`
}
