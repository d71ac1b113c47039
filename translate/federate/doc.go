// Package federate is what a gateway endpoint joining several MCP servers
// (a federation: named servers, each with its upstreams, in its own era)
// needs that is not Caddy's: names, merged lists, cursors, task ids,
// server/discover and resource routing. It speaks the modern era
// (2026-07-28) only: the caller reaches every server through a handler of
// that era, and legacy clients reach the federation through the reverse
// bridge. It holds no connections and never logs: it takes and returns
// bytes and plain values, and says what it left out (Hidden) for the
// caller to log. It imports jsonrpc, translate/seal and gjson, never
// Caddy.
//
// By file:
//
//   - names.go: ServerName, CheckServerName, CheckPrefix, ValidToolName,
//     Filter (the tool globs), Server and Set (NewSet refuses what would
//     route ambiguously), Set.Route (a shown name to its server and own
//     name), Set.Prefixed (a server's name to its shown one), ToolShown.
//   - list.go: Merge, one page of tools/list, prompts/list,
//     resources/list or resources/templates/list merged from the servers'
//     answers (Part), with each server's nextCursor and what was hidden.
//   - cursor.go: NextCursor and OpenCursor, the merged list's nextCursor
//     (a seal.FederatedCursor: each server's own cursor, bound to the list
//     and the principal, for CursorLifetime).
//   - tasks.go: WrapTaskID, Set.UnwrapTaskID, WrapTaskIDs: task ids
//     namespaced by server.
//   - discover.go: MergeDiscover, the federation's server/discover.
//   - uri.go: MatchTemplate (RFC 6570, loosely, in linear passes) and
//     Claims (which server a resource URI belongs to).
//   - rename.go: String and SetString, reading and rewriting a request's
//     name (params.name, params.ref.name, params.uri, params.taskId).
//
// The protocol facts it relies on:
//
//   - Tool names (SEP-986, the 2025-11-25 and later specifications, "Tool
//     names"): SHOULD be 1 to 128 characters of A-Z, a-z, 0-9, '_', '-'
//     and '.', case-sensitive. A shown name (prefix + the server's name)
//     is held to that rule; a prefix is of those characters. Prompt names
//     have no such rule; they are prefixed and held to it all the same.
//   - server/discover (2026-07-28) answers supportedVersions,
//     capabilities (with extensions, where the Tasks extension
//     io.modelcontextprotocol/tasks is declared), instructions,
//     _meta["io.modelcontextprotocol/serverInfo"], resultType, and the
//     caching hints ttlMs and cacheScope.
//   - Caching hints: every complete result of server/discover and the four
//     lists carries ttlMs (an integer >= 0; missing or negative reads as
//     0) and cacheScope ("public": reusable for any user; "private": only
//     in the same authorization context). A merge is as fresh as its
//     stalest part and public only when every part is.
//   - Mcp-Name: the header a request names its target by, for tools/call
//     and prompts/get params.name, resources/read params.uri, and the
//     Tasks extension's tasks/get, tasks/update and tasks/cancel
//     params.taskId. The caller routes by the body (String), rewrites it
//     (SetString), and sets the header the server expects to the same
//     rewritten value.
//   - Tasks (the extension): a CreateTaskResult, a tasks/get result
//     (DetailedTask) and the params of notifications/tasks (sent on
//     subscriptions/listen to those who listed the task in
//     notifications.taskIds) carry the task's id as a top-level taskId.
//     The client is shown "<server>:<id>" (WrapTaskIDs) and the server
//     gets its own id back (UnwrapTaskID). The server name in a task id
//     only routes: a client may write another server's name before an id
//     and reach that server with it. Keeping one principal from
//     another's task is each server's own check, and, for the tasks the
//     gateway hosts itself, its per-server sealing of their ids.
//   - Resources keep their URIs (two servers' URIs are told apart by
//     Claims: an exact listing first, then templates, the first server in
//     configuration order winning); a URI two servers list is shown once,
//     the first's.
//
// JSON follows the rule of package jsonrpc: what servers send is read
// with gjson and edited by splicing (an entry's bytes are kept but for
// its renamed key), never decoded with encoding/json.
package federate
