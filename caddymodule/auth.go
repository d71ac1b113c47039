package caddymodule

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/caddymodule/face"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/auth"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/seal"
)

// AuthConfig is the `auth` object of the handler: the gateway as the
// OAuth 2.1 resource server of the MCP servers behind it. Every request
// must carry `Authorization: Bearer <token>`, a JWT access token the
// issuer signed for this resource (or, with `introspection`, an opaque
// token the issuer says is active for it), or it is refused with 401 and a
// `WWW-Authenticate: Bearer resource_metadata="…"` challenge that points
// MCP clients to this resource's metadata (RFC 9728), from which they
// find the authorization server and get a token.
//
// Checked, in order: the token's length (at most 8 KiB); its algorithm
// (RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384 or EdDSA: never
// `none` or a shared-secret HMAC); its signature, by the key of the
// issuer's JWKS its `kid` names (the JWKS is found from the issuer's RFC
// 8414 metadata, else its OpenID Connect discovery document, fetched on
// first use, cached, and fetched again when 5 minutes old or for a `kid`
// it does not have, at most once every 30 seconds); `iss` (the issuer),
// `aud` (the audience), `exp` (required) and `nbf` with 30 seconds of
// leeway; `sub` (required); then `require_scope`. A valid token is
// remembered (its SHA-256, in memory, up to 10000) until it expires or for
// 5 minutes, so that a client's next requests cost no signature check.
// The token is never logged, stored or sent to the admin API.
//
// With `auth`, the principal (security.principal) defaults to the token's
// issuer and subject, and the validated claims are placeholders, as
// Caddy's own authentication sets them:
//
// Placeholder | Description
// ------------|------------
// `{http.auth.user.id}` | The token's `sub`
// `{http.auth.user.iss}` | The token's `iss`
// `{http.auth.user.sub}` | The token's `sub`
// `{http.auth.user.scope}` | The token's scopes, space-separated
// `{http.auth.user.client_id}` | The token's `client_id` (else `azp`), when it has one
// `{http.auth.user.exp}` | The token's expiry, in Unix seconds
//
// The metadata is served, to a GET, at `/.well-known/oauth-protected-resource`
// followed by the audience's path (`/.well-known/oauth-protected-resource/mcp`
// for `https://mcp.example.com/mcp`): the directive's matcher must let
// that path reach the handler (`@mcp path /mcp /.well-known/oauth-protected-resource/mcp`).
type AuthConfig struct {
	// The authorization server's issuer identifier, an `https` (or, for
	// tests, `http`) URL; `{env.*}` placeholders are replaced at start. Its metadata is read from
	// `/.well-known/oauth-authorization-server` (RFC 8414), else from
	// `/.well-known/openid-configuration`, and must name this same issuer;
	// a token's `iss` must be it. Required.
	Issuer string `json:"issuer,omitempty"`

	// This resource's identifier (RFC 8707), the gateway's MCP endpoint URL
	// as clients call it, e.g. `https://mcp.example.com/mcp`: a token's
	// `aud` must name it, so a token the issuer made for another resource is
	// refused. It is the `resource` of the metadata, and its path says
	// where the metadata is served. `{env.*}` placeholders are replaced at
	// start. Required.
	Audience string `json:"audience,omitempty"`

	// Opaque tokens (or every token) checked by RFC 7662 introspection at
	// the authorization server. Default: none, every token must be a JWT.
	Introspection *IntrospectionConfig `json:"introspection,omitempty"`

	// Scopes every request's token must have all of; one without them is
	// refused with 403 and `error="insufficient_scope"` naming them. They
	// are the metadata's `scopes_supported`. Default: none.
	RequireScope []string `json:"require_scope,omitempty"`

	// Tools by scope: a tool whose name (as the client sees it: a
	// federated block's prefixed name) matches a rule's pattern is absent
	// from the `tools/list` of a token without the rule's scope, on every
	// page, and a call to it (its name read from the request's body, never
	// from `Mcp-Name`) is answered as one to a tool no server has: -32602
	// `Unknown tool: <name>`. A tool matching several rules needs all
	// their scopes. Lists a rule applies to say `cacheScope: private`.
	// The rules' scopes are added to the metadata's `scopes_supported`.
	// The same decision holds for every way a tool is called: the MCP
	// endpoint in both eras, tasks, the faces (REST, saga, multi-turn),
	// and retries relayed to, or resumed on, another instance. Default:
	// none (every tool for every token). Caddyfile:
	// `tool_scope <pattern> <scope>`, repeatable.
	ToolScope []ScopeRule `json:"tool_scope,omitempty"`

	// Prompts by scope, as `tool_scope` for tools: `prompts/list`,
	// `prompts/get` and `completion/complete`'s `ref/prompt`; a refused
	// prompt is answered -32602 `Unknown prompt: <name>`. Default: none.
	// Caddyfile: `prompt_scope <pattern> <scope>`, repeatable.
	PromptScope []ScopeRule `json:"prompt_scope,omitempty"`

	// Resources by scope, as `tool_scope` for tools, by URI: a resource
	// whose `uri` matches a rule's pattern is absent from the
	// `resources/list` of a token without the rule's scope, a resource
	// template whose `uriTemplate` (its text, `{id}` and all) matches is
	// absent from `resources/templates/list`, and a `resources/read`,
	// `resources/subscribe`, `resources/unsubscribe` or
	// `subscriptions/listen` naming a matching URI (or a
	// `completion/complete` naming a matching template) is answered as
	// for a resource no server has: `Resource not found` with the URI in
	// `data.uri`, -32602 to a 2026-07-28 request and -32002 to a
	// 2025-11-25 one; its `notifications/resources/updated` are dropped
	// from the token's streams. The pattern is a glob on the URI as the
	// client sees it (federated blocks do not rename URIs) where `*`
	// matches any run of characters, `/` included, `?` any one, `[...]`
	// one of a class and `\` escapes the next (`\?` for a literal `?`);
	// it holds no `{` or `}`: write `*` where a template has an
	// expression, e.g. `test://template/*` covers the template
	// `test://template/{id}/data` and every URI it expands to. Default:
	// none. Caddyfile: `resource_scope <uri-pattern> <scope>`,
	// repeatable.
	ResourceScope []ScopeRule `json:"resource_scope,omitempty"`
}

// unmarshalCaddyfile parses
//
//	auth {
//	    issuer        <url>
//	    audience      <url>
//	    introspection { ... }
//	    require_scope <scopes...>
//	    tool_scope    <pattern> <scope>
//	    prompt_scope  <pattern> <scope>
//	    resource_scope <uri-pattern> <scope>
//	}
func (c *AuthConfig) unmarshalCaddyfile(d *caddyfile.Dispenser) error {
	if d.NextArg() {
		return d.ArgErr()
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		var err error
		switch opt := d.Val(); opt {
		case "issuer":
			err = face.ParseString(d, &c.Issuer)
		case "audience":
			err = face.ParseString(d, &c.Audience)
		case "introspection":
			if c.Introspection != nil {
				return d.Err("auth: introspection already specified")
			}
			c.Introspection = new(IntrospectionConfig)
			err = c.Introspection.unmarshalCaddyfile(d)
		case "require_scope":
			c.RequireScope, err = appendArgs(d, c.RequireScope)
		case "tool_scope":
			err = unmarshalScopeRule(d, &c.ToolScope)
		case "prompt_scope":
			err = unmarshalScopeRule(d, &c.PromptScope)
		case "resource_scope":
			err = unmarshalScopeRule(d, &c.ResourceScope)
		default:
			return d.Errf("unrecognized auth option %q", opt)
		}
		if err != nil {
			return err
		}
	}
	if c.Introspection != nil && !strings.Contains(c.Introspection.Endpoint+c.Introspection.ClientID, "{") {
		if err := c.Introspection.validate(); err != nil {
			return d.Errf("auth: %v", err)
		}
	}
	if strings.Contains(c.Issuer+c.Audience, "{") {
		return nil // placeholders ({env.*}): checked once replaced, at provision
	}
	if err := c.validate(); err != nil {
		return d.Errf("auth: %v", err)
	}
	return nil
}

// validate checks the configuration (Validate and the Caddyfile both).
func (c *AuthConfig) validate() error {
	for _, f := range []struct{ name, v string }{{"issuer", c.Issuer}, {"audience", c.Audience}} {
		if f.v == "" {
			return fmt.Errorf("%s is required", f.name)
		}
		u, err := url.Parse(f.v)
		if err != nil || u.Scheme != "https" && u.Scheme != "http" || u.Host == "" || u.Fragment != "" || u.RawQuery != "" {
			return fmt.Errorf("%s %q: must be an http(s) URL without query or fragment", f.name, f.v)
		}
	}
	for _, s := range c.RequireScope {
		if strings.ContainsAny(s, "\" \\") {
			return fmt.Errorf("require_scope %q: a scope has no spaces, quotes or backslashes", s)
		}
	}
	return c.checkScopeRules() // auth_scope.go
}

// authPrincipal is the principal with `auth` unless `principal` is
// set: the token's issuer and subject (an issuer URL has no space, so
// the pair is unambiguous).
const authPrincipal = "{http.auth.user.iss} {http.auth.user.sub}"

// resourceServer is the provisioned `auth`.
type resourceServer struct {
	cfg          *AuthConfig
	validator    *auth.Validator
	metadataPath string // where the metadata is served on this host
	metadataURL  string // the same, absolute: the challenges' resource_metadata
	metadata     []byte
	warned       atomic.Int64 // when the authorization server was last logged unavailable (Unix ns)

	rules auth.ScopeRules // tool_scope, prompt_scope (auth_scope.go)
}

// provisionAuth builds the resource server; nothing is fetched yet.
func (h *Handler) provisionAuth() error {
	if h.Auth == nil {
		return nil
	}
	repl := caddy.NewReplacer() // {env.*}
	h.Auth.Issuer, h.Auth.Audience = repl.ReplaceKnown(h.Auth.Issuer, ""), repl.ReplaceKnown(h.Auth.Audience, "")
	if err := h.Auth.validate(); err != nil {
		return fmt.Errorf("auth: %w", err)
	}
	introspection, err := h.Auth.Introspection.options()
	if err != nil {
		return fmt.Errorf("auth: %w", err)
	}
	u, _ := url.Parse(h.Auth.Audience)
	path := auth.MetadataPath(u.EscapedPath())
	h.auth = &resourceServer{
		cfg: h.Auth,
		validator: auth.New(auth.Options{
			Issuer: h.Auth.Issuer, Audience: h.Auth.Audience,
			Client:        &http.Client{Timeout: 10 * time.Second},
			Introspection: introspection,
		}),
		metadataPath: path,
		metadataURL:  u.Scheme + "://" + u.Host + path,
		metadata:     auth.MetadataDocument(h.Auth.Audience, h.Auth.Issuer, h.Auth.scopesSupported()),
		rules:        h.Auth.scopeRules(),
	}
	return nil
}

// authenticatedKey marks a request whose token the gateway validated.
type authenticatedKey struct{}

// authenticated reports whether the gateway itself authenticated r (it
// has `auth` and r's token passed): the client's credentials are then the
// gateway's to keep, never an upstream's to see.
func authenticated(r *http.Request) bool {
	v, _ := r.Context().Value(authenticatedKey{}).(bool)
	return v
}

// instanceNoticeKey marks a POST that carries no token but another
// instance's forwarding signature: the session notice an instance sends
// when it gives a parked call's upstream session back (giveback.go) is
// made after the client's request, so it has no client token to carry.
// dispatch serves such a request only once the signature verified and
// only as that notice (instanceNotice); anything else is refused with 401.
type instanceNoticeKey struct{}

// refuseNoToken answers a request without a bearer token: 401, with the
// challenge that points the client to the resource's metadata.
func (h *Handler) refuseNoToken(w http.ResponseWriter) error {
	w.Header().Set("WWW-Authenticate", auth.Challenge(h.auth.metadataURL, false))
	return jsonrpc.WriteError(w, nil, jsonrpc.Errorf(http.StatusUnauthorized, jsonrpc.InvalidRequest, "Unauthorized: a bearer token is required"))
}

// instanceNotice reports whether authenticate let r through without a
// token, as a possible instance notice.
func instanceNotice(r *http.Request) bool {
	v, _ := r.Context().Value(instanceNoticeKey{}).(bool)
	return v
}

// authenticate serves the resource metadata, or checks r's token: it
// reports whether it answered r itself (a refusal or the metadata), and
// returns r marked authenticated, with the claims' placeholders set,
// otherwise. Without `auth` it passes r through.
func (h *Handler) authenticate(w http.ResponseWriter, r *http.Request) (*http.Request, bool, error) {
	rs := h.auth
	if rs == nil {
		return r, false, nil
	}
	if r.URL.Path == rs.metadataPath {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			return r, true, jsonrpc.WriteError(w, nil, jsonrpc.Errorf(http.StatusMethodNotAllowed, jsonrpc.InvalidRequest, "Method Not Allowed"))
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "max-age=3600")
		_, err := w.Write(rs.metadata)
		return r, true, err
	}
	if r.Method == http.MethodPost && len(r.Header.Values("Authorization")) == 0 &&
		h.fleet.auth != nil && len(r.Header.Values(seal.ForwardedHeader)) == 1 {
		return r.WithContext(context.WithValue(r.Context(), instanceNoticeKey{}, true)), false, nil
	}
	scheme, token, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	if !strings.EqualFold(scheme, "Bearer") || token == "" || len(r.Header.Values("Authorization")) > 1 {
		return r, true, h.refuseNoToken(w)
	}
	claims, err := rs.validator.Validate(r.Context(), strings.TrimSpace(token))
	switch {
	case errors.Is(err, auth.ErrUnavailable):
		// Once per refetch floor, not once per request.
		if now, last := time.Now().UnixNano(), rs.warned.Load(); now-last >= int64(auth.DefaultRefetchFloor) && rs.warned.CompareAndSwap(last, now) {
			h.logger.Warn("cannot validate access tokens: the authorization server is unavailable", zap.String("issuer", rs.cfg.Issuer), zap.Error(err))
		}
		return r, true, jsonrpc.WriteError(w, nil, jsonrpc.Errorf(http.StatusServiceUnavailable, jsonrpc.InternalError, "Service Unavailable: the access token cannot be checked now"))
	case err != nil:
		if ce := h.logger.Check(zap.DebugLevel, "access token refused"); ce != nil {
			ce.Write(zap.Error(err)) // the reason; never the token
		}
		w.Header().Set("WWW-Authenticate", auth.Challenge(rs.metadataURL, true))
		return r, true, jsonrpc.WriteError(w, nil, jsonrpc.Errorf(http.StatusUnauthorized, jsonrpc.InvalidRequest, "Unauthorized: invalid access token"))
	}
	for _, s := range rs.cfg.RequireScope {
		if !claims.HasScope(s) {
			w.Header().Set("WWW-Authenticate", auth.ScopeChallenge(rs.metadataURL, rs.cfg.RequireScope))
			return r, true, jsonrpc.WriteError(w, nil, jsonrpc.Errorf(http.StatusForbidden, jsonrpc.InvalidRequest, "Forbidden: the access token lacks scope %q", s))
		}
	}
	if repl, ok := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer); ok {
		repl.Set("http.auth.user.id", claims.Subject)
		repl.Set("http.auth.user.iss", claims.Issuer)
		repl.Set("http.auth.user.sub", claims.Subject)
		repl.Set("http.auth.user.scope", strings.Join(claims.Scopes, " "))
		repl.Set("http.auth.user.client_id", claims.ClientID)
		repl.Set("http.auth.user.exp", strconv.FormatInt(claims.Expiry.Unix(), 10))
	}
	return withGranted(r.WithContext(context.WithValue(r.Context(), authenticatedKey{}, true)), claims.Scopes), false, nil
}
