// Package face is what a face of the gateway may ask of the mcp_gateway
// handler, and what the faces share.
//
// A face is another way to reach the MCP servers behind the gateway than
// MCP's own endpoint: the tool-call saga (package saga), the HTTP REST
// face (package rest), multi-turn SSE for legacy clients (package
// multiturn). Each is a codec, not a fork: it turns what its client sends
// into modern MCP requests that the gateway serves as it serves a
// client's (routing, the principal, relays between instances, the forward
// bridge in front of legacy servers, pass-through to modern ones), and
// turns the answers back.
//
// What a face may ask of the gateway is the Gateway interface: serve an
// internal request, the principal, the keyring, the instance, the logger,
// the limits, a token's single use across the fleet (UseOnce), the span
// of its request (Traced: the tool call it serves, and the link to the
// call's first request, whose span the face's token or record carries on
// to its later ones). What the
// gateway asks of a face is one or more of the hooks (PathFace,
// MessageFace, SessionFace, RouteFace); the front door keeps a table of
// the enabled faces and asks each hook in turn, and names none.
//
// What the faces share:
//   - the in-process client (Client): a modern request built on the
//     client request's behalf, served by the gateway into a Recorder, and
//     its JSON-RPC response read back (from JSON or from an SSE stream);
//   - the round driver (Drive): make a tool call, and retry it with the
//     answers the face gives itself (roots, a cancelled question), until
//     it completes, fails, or asks what the face leaves to its client —
//     at most max_rounds times;
//   - the inputs' kinds (Kind) and the answers a face gives on a
//     client's behalf (RootsNone).
//
// The reverse bridge's two loops (translate/reverse) do not use Drive:
// they are the engine of a cell, not a face over one — they stream each
// upstream answer to the client as it comes, send a request again
// without counting a round when the upstream's tool header annotations
// changed, count the gateway's own overhead, and follow tasks; Drive
// works on whole answers recorded in-process.
package face
