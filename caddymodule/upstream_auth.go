package caddymodule

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/caddyserver/caddy/v2"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/upstreamauth"
)

// The modes of upstream_auth.
const (
	upstreamAuthNone        = "none"
	upstreamAuthPassthrough = "passthrough"
	upstreamAuthBearer      = "bearer"
	upstreamAuthExchange    = "exchange"
)

// UpstreamAuth is what the gateway sends an MCP server as `Authorization`
// (in every cell: both pass-throughs, both bridges, and the forward
// bridge's pooled sessions, which are never shared between two
// credentials). A request relayed to another instance of the fleet keeps
// the client's header: that instance applies its own `upstream_auth`; when
// it cannot be reached and this instance serves the request (a call
// resumed, a task served from its record or taken over), this one applies
// its own. A hosted task's later requests use its upstream session's
// credential, the one obtained for the request that opened it (in memory
// only: no token is ever stored).
type UpstreamAuth struct {
	// `none`: no `Authorization` upstream. `passthrough`: the client's own
	// header, as received ("token passthrough": the server sees, and could
	// replay, the client's credential; with the gateway's `auth` on, it is
	// logged once at warn as unsafe). `bearer`: `Bearer <token>`, the same
	// for every client. `exchange`: an RFC 8693 token exchange of the
	// client's bearer token for one meant for this server (see
	// `exchange`). Default: `none` for a request the gateway's `auth`
	// authenticated, else `passthrough` (today's behaviour: without `auth`,
	// Caddy authenticates in front and the server is trusted with the
	// client's header).
	Mode string `json:"mode,omitempty"`

	// The token of `bearer`: a literal or a placeholder such as
	// `{env.MCP_SERVER_TOKEN}`, evaluated once when the configuration is
	// loaded. Never logged. Caddy's admin API (`/config/`) returns the
	// configuration as written: a placeholder keeps the token out of it.
	Token string `json:"token,omitempty"`

	// The token exchange of `exchange`.
	Exchange *TokenExchange `json:"exchange,omitempty"`
}

// TokenExchange configures an RFC 8693 token exchange: the client's bearer
// token (the subject token, of type access_token) is exchanged at
// `token_endpoint`, with the gateway's client credentials (HTTP Basic), for
// a token whose audience is the server's. Each answer is cached per
// principal, subject token and server until 30 seconds (or a tenth of its
// life) before its `expires_in` (one without `expires_in` is not cached);
// concurrent requests share one exchange. When the exchange fails (the
// endpoint refuses, cannot be reached within `timeout`, or answers
// something else than a bearer token) the client gets 502 naming the
// server, never the endpoint's answer or its URL; the gateway's log says
// why (never with a token).
type TokenExchange struct {
	// The authorization server's token endpoint: an absolute `http` or
	// `https` URL. Required. Placeholders (`{env.*}`) are evaluated once.
	TokenEndpoint string `json:"token_endpoint,omitempty"`
	// The gateway's client id at the authorization server. Required.
	ClientID string `json:"client_id,omitempty"`
	// The gateway's client secret; a placeholder such as
	// `{env.MCP_GATEWAY_CLIENT_SECRET}` keeps it out of the configuration
	// (and of Caddy's `/config/` admin API).
	ClientSecret string `json:"client_secret,omitempty"`
	// The `audience` asked for: the server's logical name at the
	// authorization server. `audience` or `resource` is required.
	Audience string `json:"audience,omitempty"`
	// The `resource` asked for (RFC 8707): the server's URL.
	Resource string `json:"resource,omitempty"`
	// How long one exchange may take. Default: 10s.
	Timeout caddy.Duration `json:"timeout,omitempty"`
	// How many exchanged tokens are cached at most (least recently used
	// first out). Default: 10000.
	MaxEntries int `json:"max_entries,omitempty"`
}

// upstreamCredentials is the provisioned form of an UpstreamAuth.
type upstreamCredentials struct {
	mode      string // "" when not configured: the default applies per request
	bearer    string // "Bearer <token>" of bearer
	exchanger *upstreamauth.Exchanger
	unsafe    sync.Once // passthrough with auth logged once
}

// provisionUpstreamAuth validates a and makes its runtime form.
func provisionUpstreamAuth(a *UpstreamAuth) (*upstreamCredentials, error) {
	c := &upstreamCredentials{}
	if a == nil {
		return c, nil
	}
	repl := caddy.NewReplacer()
	c.mode = a.Mode
	if a.Token != "" && a.Mode != upstreamAuthBearer {
		return nil, errors.New("upstream_auth: token is only for mode bearer")
	}
	if a.Exchange != nil && a.Mode != upstreamAuthExchange {
		return nil, errors.New("upstream_auth: exchange is only for mode exchange")
	}
	switch a.Mode {
	case "", upstreamAuthNone, upstreamAuthPassthrough:
	case upstreamAuthBearer:
		tok := repl.ReplaceAll(a.Token, "")
		if tok == "" || strings.ContainsAny(tok, "\r\n\x00 ") {
			return nil, errors.New("upstream_auth bearer: the token is empty or not a single header value")
		}
		c.bearer = "Bearer " + tok
	case upstreamAuthExchange:
		x := a.Exchange
		if x == nil {
			return nil, errors.New("upstream_auth exchange: token_endpoint, client_id and audience or resource are required")
		}
		if x.Timeout < 0 || x.MaxEntries < 0 {
			return nil, errors.New("upstream_auth exchange: timeout and max_entries must not be negative")
		}
		ex, err := upstreamauth.New(upstreamauth.Config{
			TokenEndpoint: repl.ReplaceAll(x.TokenEndpoint, ""),
			ClientID:      repl.ReplaceAll(x.ClientID, ""),
			ClientSecret:  repl.ReplaceAll(x.ClientSecret, ""),
			Audience:      repl.ReplaceAll(x.Audience, ""),
			Resource:      repl.ReplaceAll(x.Resource, ""),
			Timeout:       time.Duration(x.Timeout),
			MaxEntries:    x.MaxEntries,
		})
		if err != nil {
			return nil, fmt.Errorf("upstream_auth exchange: %w", err)
		}
		c.exchanger = ex
	default:
		return nil, fmt.Errorf("upstream_auth: unknown mode %q (none, passthrough, bearer or exchange)", a.Mode)
	}
	return c, nil
}

// upstreamAuthMode is the mode that applies to r.
func (h *Handler) upstreamAuthMode(r *http.Request) string {
	c := h.upstreamCreds
	switch {
	case h.fed != nil:
		// A federated block's own upstream is its merged endpoint, in
		// process (its reverse bridge's legacy clients): the servers
		// behind it apply their own upstream_auth to the client's header.
		return upstreamAuthPassthrough
	case c != nil && c.mode != "":
		if c.mode == upstreamAuthPassthrough && authenticated(r) {
			c.unsafe.Do(func() {
				h.logger.Warn("upstream_auth passthrough with auth: the clients' tokens go to the MCP server (token passthrough), which can replay them",
					zap.String("server", h.serverName))
			})
		}
		return c.mode
	case authenticated(r):
		return upstreamAuthNone
	}
	return upstreamAuthPassthrough
}

// exchangedKey carries, in a request's context, the credential an exchange
// obtained for it (withUpstreamCredential).
type exchangedKey struct{}

// withUpstreamCredential obtains r's exchanged credential when the mode is
// exchange, before r's cell sends anything upstream (or, on the instance a
// client reached, before it serves a request it could not relay to its
// owner: serveBridgedHere); a failure is the client's 502 naming the
// server. (A forwarded request whose token is not its principal's never
// gets here: acceptForwarded refuses it, forwardedTokenMismatch.)
func (h *Handler) withUpstreamCredential(r *http.Request) (*http.Request, *jsonrpc.RPCError) {
	if h.upstreamAuthMode(r) != upstreamAuthExchange {
		return r, nil
	}
	subject, ok := bearerToken(r.Header.Get("Authorization"))
	p := h.principal(r)
	var tok string
	var err error
	if ok {
		tok, err = h.upstreamCreds.exchanger.Token(r.Context(), hex.EncodeToString(p[:]), subject)
	}
	if !ok || err != nil {
		switch {
		case !ok: // the client's doing: not worth a warning per request
			h.logger.Debug("upstream credential not obtained: the request has no bearer token to exchange", zap.String("server", h.serverName))
		case r.Context().Err() == nil:
			h.logger.Warn("upstream credential not obtained", zap.String("server", h.serverName), zap.Error(err))
		}
		name := "the MCP server"
		if h.serverName != "" {
			name = "MCP server " + strconv.Quote(h.serverName)
		}
		return r, &jsonrpc.RPCError{HTTPStatus: http.StatusBadGateway, Code: jsonrpc.InternalError,
			Message: "the gateway could not obtain a credential for " + name + " (the gateway's log says why)"}
	}
	return r.WithContext(context.WithValue(r.Context(), exchangedKey{}, "Bearer "+tok)), nil
}

// forwardedTokenMismatch reports whether r, forwarded here by another
// instance, carries a token this instance validated (auth) for another
// principal than the one the forwarding header names, which the request is
// served as (principal). Each instance signs the principal it evaluated
// for the very token it forwards, so the two agree unless a holder of the
// fleet's key made the header: serving it would let that token resume,
// read or cancel the named principal's work (its parked call, its task),
// or have it exchanged for a credential in that principal's call. The
// principal expression must evaluate the same on every instance for a
// forwarded request (the default with auth, the token's issuer and
// subject, does).
func (h *Handler) forwardedTokenMismatch(r *http.Request) bool {
	f, forwarded := forwardedOf(r)
	return forwarded && authenticated(r) && f.principal != translate.PrincipalHash(h.principalValue(r))
}

// bearerToken returns the token of an `Authorization: Bearer <token>`.
func bearerToken(v string) (string, bool) {
	scheme, tok, ok := strings.Cut(v, " ")
	tok = strings.TrimSpace(tok)
	return tok, ok && strings.EqualFold(scheme, "Bearer") && tok != ""
}

// setUpstreamAuthorization sets hdr's Authorization, a header sent to an
// upstream on behalf of r, as upstream_auth says: hdr holds the client's
// own (or none) when called.
func (h *Handler) setUpstreamAuthorization(hdr http.Header, r *http.Request) {
	switch h.upstreamAuthMode(r) {
	case upstreamAuthPassthrough:
		return
	case upstreamAuthBearer:
		hdr.Set("Authorization", h.upstreamCreds.bearer)
	case upstreamAuthExchange:
		if v, ok := r.Context().Value(exchangedKey{}).(string); ok {
			hdr.Set("Authorization", v)
			return
		}
		hdr.Del("Authorization") // not obtained for this request: nothing
	default:
		hdr.Del("Authorization")
	}
}

// setProbeAuthorization sets the Authorization of the gateway's own
// requests (era probes, health checks), made for no client: the `bearer`
// token, else none.
func (h *Handler) setProbeAuthorization(hdr http.Header) {
	if c := h.upstreamCreds; c != nil && c.mode == upstreamAuthBearer {
		hdr.Set("Authorization", c.bearer)
	}
}
