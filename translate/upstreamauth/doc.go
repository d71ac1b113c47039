// Package upstreamauth is the client side of OAuth 2.0 Token Exchange
// (RFC 8693) that the gateway uses to obtain a credential for an MCP
// server from the client's own token, so that the client's token never
// reaches the server (the MCP security best practices forbid "token
// passthrough").
//
// An Exchanger talks to one token endpoint for one server (its audience
// and resource): it sends the client's token as the subject token with the
// gateway's client credentials, and caches each answer per principal and
// subject token until shortly before its expires_in. Concurrent requests
// for the same entry share one exchange. Answers are bounded in size, the
// exchange in time, the cache in entries. Errors name what failed, never a
// token, the endpoint's answer or its URL.
//
// Files: exchange.go (the Exchanger, its cache and the RFC 8693 request).
// No Caddy.
package upstreamauth
