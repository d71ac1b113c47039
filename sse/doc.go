// Package sse reads and writes Server-Sent Events (text/event-stream) for a
// proxy that relays an upstream event stream to a client.
//
// [Reader] parses a stream following the WHATWG HTML "Interpreting an event
// stream" rules, with two deliberate differences that a proxy needs: blocks
// that carry only an id, only a retry or only an event type are dispatched
// (a browser would silently absorb them), and the stream is treated as bytes,
// not decoded as UTF-8, so that it is relayed unchanged.
//
// [Writer] encodes events and comments onto an [net/http.ResponseWriter],
// flushes after each one, and can inject keep-alive comments on idle streams.
//
// Anything a Reader returns can be re-encoded by a Writer and read back as an
// identical [Event].
package sse
