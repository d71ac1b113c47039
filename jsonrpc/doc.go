// Package jsonrpc is the JSON-RPC 2.0 layer both protocol eras build on:
//
//   - the message envelope: Message and its Kind, read leniently from an
//     upstream by ParseMessage (Classify once ValidJSON passed) and
//     strictly from a client by Peek (jsonrpc.go, message.go);
//   - the error a client is answered with: RPCError, ErrorResponse and the
//     JSON-RPC and MCP error codes (jsonrpc.go);
//   - the depth check every validation of untrusted JSON goes through:
//     ValidJSON, CheckJSONDepth, MaxJSONDepth (depth.go);
//   - the splice editor that edits foreign JSON in place: Members,
//     ScanMembers, ObjectHas, InsertMember, SetMember, AppendMember,
//     AppendMembers, AppendObject, RemoveMembers, Splice, ApplySplices
//     (splice.go, build.go);
//   - what the gateway writes its own JSON with: Marshal, Quote, Request,
//     and AppendCanonical for a key compared by value (build.go).
//
// It imports nothing of this module, so that legacy (the legacy era's
// upstream sessions) and translate (the modern era and both bridges) can
// both build on it without either era's package depending on the other.
//
// # The JSON rule
//
// The gateway handles JSON one way, everywhere (translate/..., legacy/...,
// caddymodule/):
//
//  1. Foreign JSON (a client's body, an upstream's answer, event or
//     capabilities, anything a peer wrote) is read with gjson and, when the
//     gateway must change it, edited by splicing with this package's editor.
//     It is never decoded with encoding/json, into a map or a struct (the
//     operator's configuration is not foreign JSON: Caddy decodes it). Parts
//     the gateway does not edit are copied byte for byte (key order,
//     whitespace, number spelling and string escapes included); an object
//     whose members the editor removes or sets is re-written compactly at
//     its own level only. Members the gateway adds go at the end of their
//     object.
//  2. JSON the gateway builds it builds from structs, written with
//     encoding/json (Marshal, or json.Marshal where HTML escaping does not
//     matter). A foreign part inside goes in a json.RawMessage field, which
//     encoding/json copies compactly, or, for an envelope around a large
//     foreign part (a result, params), the envelope is written by appending
//     with every string quoted by Quote and the part spliced in verbatim
//     (ErrorResponse, translate.ResultResponse). A struct's fields are in
//     the order the members are sent in. Text fixed at compile time (a
//     probe body) may stay a literal.
//  3. A map is used only for data: a JSON object whose member names are
//     values rather than a schema's field names, such as inputResponses
//     and inputRequests (input key → answer or request) or a capability's
//     extensions (extension id → settings). Such an object is read with
//     gjson into a map of raw values, and may be written back with Marshal
//     (its keys then sorted).
//  4. Of repeated member names the first counts, everywhere, because gjson
//     reads the first: a map of data keeps the first of a repeated key,
//     SetMember sets the first copy, in its place, and drops the others,
//     AppendCanonical keeps the first. Where a repeated name could
//     make the gateway and a peer act on different values (the envelope,
//     params a header is read from, an upstream result the gateway
//     reshapes), the message is refused instead (Peek, ScanMembers).
//  5. All untrusted JSON is checked with ValidJSON (or CheckJSONDepth
//     first) before anything walks it, so no walk recurses deeper than
//     MaxJSONDepth.
package jsonrpc
