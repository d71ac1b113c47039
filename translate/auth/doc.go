// Package auth is the gateway's OAuth 2.1 resource server: it validates
// the JWT access tokens clients present against their issuer's keys (and,
// when configured, opaque ones by asking the issuer), and words the
// answers the MCP authorization specification asks of a protected
// resource. It has no Caddy and keeps no token: a Validator holds only
// the issuer's metadata, public keys and the SHA-256 of tokens it checked.
//
//   - answer.go: how the authorization server's answers (metadata, JWKS,
//     introspection) are read: foreign JSON, its nesting bounded by
//     jsonrpc.ValidJSON, then read with gjson, never decoded into structs;
//   - metadata.go: the issuer's metadata (RFC 8414
//     `/.well-known/oauth-authorization-server`, else OpenID Connect
//     discovery), fetched on first use and kept, not fetched again within
//     the refetch floor after a failure; sizes bounded before parsing;
//   - keys.go: the issuer's JWKS, fetched on first use, cached, and
//     fetched again for an unknown key id (at most once per refetch floor)
//     or once MaxCacheAge old;
//   - validate.go: Validate, the token's checks (length, an allowlist of
//     asymmetric algorithms, signature, `iss`, `aud` as the configured
//     resource (RFC 8707), `exp` and `nbf` with a leeway) and the Claims
//     it yields; a validated token is remembered (by its SHA-256) until it
//     expires or MaxCacheAge passes, so that a client's next request costs
//     no signature check;
//   - introspect.go: RFC 7662 introspection of opaque tokens (or every
//     token), its answer checked as a JWT's claims; remembered as a
//     validated JWT is, refusals for InactiveCacheAge; requests with one
//     token share one introspection, a bounded number are in flight, each
//     bounded in time and answer size;
//   - challenge.go: the `WWW-Authenticate` challenges (401 with
//     `resource_metadata`, 403 `insufficient_scope`) and the Protected
//     Resource Metadata document (RFC 9728).
//   - scope.go: ScopeRules, tools, prompts and resources by scope: which
//     names (URIs) a token's scopes reach (globs of federate.Filter's
//     syntax on the name the client sees; URI globs on the URI or a
//     template's text), the first name a request body calls or reads that
//     they do not (Refused: every copy of a repeated member, each message
//     of a batch), and a list answer without the entries they do not
//     reach (FilterList: cacheScope "private"; ErrUnfilterable for an
//     answer repeating a member where readers disagree);
//   - uriglob.go: the URI glob, path.Match's syntax where '*' and '?'
//     match '/' too, matched without recursion.
//
// JOSE is github.com/go-jose/go-jose/v4: one library for both the JWKS
// and the JWT, whose parser takes the allowed algorithms up front (a token
// naming another, `none` or HS256 among them, is refused before any key is
// looked at). The package exposes no third-party types.
package auth
