package caddymodule

import (
	"errors"
	"fmt"
	"net/url"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/caddymodule/face"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/auth"
)

// IntrospectionConfig is the `introspection` object of `auth`: opaque
// access tokens (or every token) are checked by asking the authorization
// server (RFC 7662) instead of by a JWT's signature. The answer must say
// `active: true`; then `iss` (when present) must be the issuer, `aud` must
// name the audience, `exp` (required) and `nbf` hold with 30 seconds of
// leeway, `sub` is required, `token_type` (when present) is `Bearer` and
// there is no `cnf` (a sender-constrained token is not a bearer token);
// `scope` then goes through `require_scope`. The principal and the
// `{http.auth.user.*}` placeholders are the answer's, as a JWT's claims.
//
// An active token is remembered (its SHA-256, in memory) until its `exp`,
// at most 5 minutes: a token the authorization server revokes may still be
// accepted that long. A refused one is refused without asking again for 10
// seconds. Requests with the same token share one introspection, and at
// most 16 introspections are in flight at once, each bounded by 10
// seconds and a 64 KiB answer; a token that is not made of RFC 6750's
// token characters is refused without asking. When the authorization
// server cannot answer (unreachable, slow, an error status, refusing the
// gateway's credentials, or an answer that is not an introspection), the
// client gets 503, not 401: its token may be fine. The client never sees
// the endpoint or its answer; the token is never logged.
type IntrospectionConfig struct {
	// The introspection endpoint, an absolute `http(s)` URL. Default: the
	// `introspection_endpoint` of the issuer's metadata.
	Endpoint string `json:"endpoint,omitempty"`

	// The gateway's client id at the authorization server. Required.
	ClientID string `json:"client_id,omitempty"`

	// The gateway's client secret; a placeholder such as
	// `{env.MCP_INTROSPECTION_SECRET}`, replaced at start, keeps it out of
	// the configuration (and of Caddy's `/config/` admin API).
	ClientSecret string `json:"client_secret,omitempty"`

	// How the gateway authenticates: `client_secret_basic` (HTTP Basic,
	// the default) or `client_secret_post` (in the form).
	ClientAuth string `json:"client_auth,omitempty"`

	// Which tokens are introspected: `opaque` (the default: a token not
	// shaped as a JWT, three dot-separated parts whose first is a JSON
	// object; a JWT is still validated by its signature) or `all` (every
	// token, so that the authorization server has the last word on a
	// revoked JWT too).
	Tokens string `json:"tokens,omitempty"`
}

// unmarshalCaddyfile parses
//
//	introspection {
//	    endpoint      <url>
//	    client_id     <id>
//	    client_secret <secret>
//	    client_auth   client_secret_basic|client_secret_post
//	    tokens        opaque|all
//	}
func (c *IntrospectionConfig) unmarshalCaddyfile(d *caddyfile.Dispenser) error {
	if d.NextArg() {
		return d.ArgErr()
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		var err error
		switch opt := d.Val(); opt {
		case "endpoint":
			err = face.ParseString(d, &c.Endpoint)
		case "client_id":
			err = face.ParseString(d, &c.ClientID)
		case "client_secret":
			err = face.ParseString(d, &c.ClientSecret)
		case "client_auth":
			err = face.ParseString(d, &c.ClientAuth)
		case "tokens":
			err = face.ParseString(d, &c.Tokens)
		default:
			return d.Errf("unrecognized auth introspection option %q", opt)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// validate checks the configuration, its placeholders replaced.
func (c *IntrospectionConfig) validate() error {
	if c.ClientID == "" {
		return errors.New("introspection: client_id is required")
	}
	if c.Endpoint != "" {
		u, err := url.Parse(c.Endpoint)
		if err != nil || u.Scheme != "https" && u.Scheme != "http" || u.Host == "" || u.Fragment != "" {
			return fmt.Errorf("introspection: endpoint %q: must be an http(s) URL", c.Endpoint)
		}
	}
	switch c.ClientAuth {
	case "", auth.ClientSecretBasic, auth.ClientSecretPost:
	default:
		return fmt.Errorf("introspection: client_auth %q: %s or %s", c.ClientAuth, auth.ClientSecretBasic, auth.ClientSecretPost)
	}
	switch c.Tokens {
	case "", auth.IntrospectOpaque, auth.IntrospectAll:
	default:
		return fmt.Errorf("introspection: tokens %q: %s or %s", c.Tokens, auth.IntrospectOpaque, auth.IntrospectAll)
	}
	return nil
}

// options are the validator's introspection options, {env.*} replaced;
// nil without introspection.
func (c *IntrospectionConfig) options() (*auth.Introspection, error) {
	if c == nil {
		return nil, nil
	}
	repl := caddy.NewReplacer()
	r := *c
	r.Endpoint, r.ClientID, r.ClientSecret = repl.ReplaceKnown(c.Endpoint, ""), repl.ReplaceKnown(c.ClientID, ""), repl.ReplaceKnown(c.ClientSecret, "")
	if err := r.validate(); err != nil {
		return nil, err
	}
	return &auth.Introspection{Endpoint: r.Endpoint, ClientID: r.ClientID, ClientSecret: r.ClientSecret, ClientAuth: r.ClientAuth, Tokens: r.Tokens}, nil
}
