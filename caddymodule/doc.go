// Package caddymodule is the Caddy side of caddy-mcp-gateway: the
// http.handlers.mcp_gateway handler, its Caddyfile directive, the admin
// API, and the glue between Caddy and the Caddy-free packages (translate
// and its bridges, legacy, sse, jsonrpc). The faces (saga, REST,
// multi-turn SSE) are packages of their own below face/, which this
// package knows only through faces.go.
//
// What it owns, by file:
//
//   - Configuration: module.go (Handler, its top-level options and
//     placeholders), config.go (the option groups: health, fleet,
//     security, streams, parking, sessions, tasks), upstreams.go
//     (Upstream, its options, selection and failover), tasks.go (task
//     rules), servers.go (Server: the servers of a federated block),
//     servers_check.go (their checks, the same for the Caddyfile and
//     JSON), defaults.go (every default, in one place), caddyfile.go
//     (the directive, upstream blocks, value checks),
//     caddyfile_servers.go (server blocks, list_timeout),
//     caddyfile_groups.go (one Caddyfile helper per group) and
//     caddyfile_matcher.go (the directive's registration, and its
//     warning for a REST base path outside the matcher).
//   - Lifecycle: provision.go (Provision, Validate, Cleanup; the registries
//     that end streams and calls on unload and shutdown), stop.go (the
//     graceful stop: refusals while stopping, calls cancelled and waited
//     for, the lifecycle shared across reloads), transport.go
//     (the upstream and peer transports), dynamic.go and addrpolicy.go
//     (dynamic upstreams and the address ranges they may not have),
//     probe.go (era probes), health.go (passive and active health).
//   - The front door: auth.go (`auth`: the OAuth resource server, before
//     anything else; authenticated), auth_scope.go (its tool_scope,
//     prompt_scope and resource_scope: calls and reads out of the token's
//     scope refused from the body, lists filtered on their way out),
//     serve.go (ServeHTTP, dispatch:
//     origin, method, body, forwarding signature, then the faces and the
//     routing decision),
//     guard.go (Host and Origin checks, request targets, X-Forwarded-*),
//     quirks.go (accept_client_quirks: known clients' header bugs
//     repaired from the body),
//     route.go (decide: the cell, the upstream, a relay or a refusal).
//   - The cells: proxy.go (pass-through of both eras: the pin, Caddy's
//     transport, failover), bridge.go (the forward bridge's glue),
//     reverse.go (the reverse bridge's glue), upstream_auth.go
//     (upstream_auth: the Authorization every cell sends upstream, the
//     token exchange's glue) and caddyfile_upstream_auth.go (its
//     Caddyfile).
//   - A federated block (servers): federation.go (one inner handler per
//     server; the block's merged endpoint as its one upstream),
//     federation_serve.go (serveFederated: a modern request routed by
//     what its body names), federation_list.go (lists and
//     server/discover asked of every server and merged),
//     federation_cache.go (merged pages kept within their ttlMs),
//     federation_listen.go (subscriptions/listen merged),
//     federation_resources.go (which server a resource URI belongs to,
//     learned per principal), federation_tasks.go (taskIds put in the
//     block's namespace in answers), inprocess.go (the round tripper by
//     which the block's reverse bridge reaches its merged endpoint).
//   - The fleet: fleet.go (who is where; keys this instance lacks),
//     relay.go (a request forwarded to its owner, signed), giveback.go
//     (upstream sessions handed back between instances).
//   - The faces: faces.go (FacesConfig, the table of enabled faces the
//     front door asks, the face.Gateway they are given), once.go (a
//     face's token used once across the fleet: use records in Caddy's
//     storage).
//   - Observability: observe.go (cells, outcomes, the log line of a call),
//     metrics.go (the caddy_mcp_gateway_* series), traces.go (a span per
//     request under Caddy's tracing, translate/traces), admin.go
//     (admin.api.mcp_gateway: parked calls, sessions, tasks, upstreams
//     and their servers).
package caddymodule
