package auth

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/tidwall/gjson"
	"golang.org/x/sync/singleflight"
)

// Bounds and defaults of introspection.
const (
	// MaxIntrospectionBytes is the largest introspection answer read.
	MaxIntrospectionBytes = 64 << 10
	// DefaultIntrospectionTimeout bounds one introspection request,
	// waiting for a free slot included.
	DefaultIntrospectionTimeout = 10 * time.Second
	// DefaultMaxConcurrentIntrospections is how many introspection
	// requests a Validator has in flight at once, whatever the number of
	// distinct tokens presented.
	DefaultMaxConcurrentIntrospections = 16
	// InactiveCacheAge is how long a token the authorization server
	// called inactive (or whose answer was refused) is refused without
	// asking again.
	InactiveCacheAge = 10 * time.Second
)

// How the resource server authenticates to the introspection endpoint
// (RFC 7662 §2.1, with the client authentication of RFC 6749 §2.3.1).
const (
	ClientSecretBasic = "client_secret_basic"
	ClientSecretPost  = "client_secret_post"
)

// Which tokens are introspected.
const (
	// IntrospectOpaque: tokens that are not shaped as a JWT; a JWT is
	// validated by its signature.
	IntrospectOpaque = "opaque"
	// IntrospectAll: every token, a JWT too (the authorization server
	// then has the last word on revocation).
	IntrospectAll = "all"
)

// Introspection configures RFC 7662 token introspection.
type Introspection struct {
	// Endpoint is the introspection endpoint. Default: the issuer
	// metadata's `introspection_endpoint`.
	Endpoint string
	// ClientID and ClientSecret are the resource server's credentials at
	// the authorization server.
	ClientID, ClientSecret string
	// ClientAuth is ClientSecretBasic (default) or ClientSecretPost.
	ClientAuth string
	// Tokens is IntrospectOpaque (default) or IntrospectAll.
	Tokens string
	// Timeout bounds one introspection. Default:
	// DefaultIntrospectionTimeout.
	Timeout time.Duration
	// MaxConcurrent is how many introspections are in flight at once.
	// Default: DefaultMaxConcurrentIntrospections.
	MaxConcurrent int
}

// introspector asks the authorization server about tokens, one request
// per token at a time, a bounded number at once, and remembers refusals
// for a while.
type introspector struct {
	cfg       Introspection
	opts      *Options
	discovery *discovery
	client    *http.Client
	slots     chan struct{}
	recall    func(sum [sha256.Size]byte, now time.Time) (Claims, bool) // an active token's cached claims
	remember  func(sum [sha256.Size]byte, c Claims, now time.Time)      // caches them
	inactive  *lru.Cache[[sha256.Size]byte, time.Time]                  // refused tokens, until when
	flights   singleflight.Group                                        // by the token's SHA-256
}

func newIntrospector(cfg Introspection, o *Options, d *discovery,
	recall func([sha256.Size]byte, time.Time) (Claims, bool), remember func([sha256.Size]byte, Claims, time.Time),
) *introspector {
	if cfg.ClientAuth == "" {
		cfg.ClientAuth = ClientSecretBasic
	}
	if cfg.Tokens == "" {
		cfg.Tokens = IntrospectOpaque
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultIntrospectionTimeout
	}
	if cfg.MaxConcurrent <= 0 {
		cfg.MaxConcurrent = DefaultMaxConcurrentIntrospections
	}
	// A redirected POST would carry the token elsewhere: none is followed.
	client := *o.Client
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	inactive, _ := lru.New[[sha256.Size]byte, time.Time](o.CacheSize) // errors only for a size <= 0
	return &introspector{
		cfg: cfg, opts: o, discovery: d, client: &client,
		slots: make(chan struct{}, cfg.MaxConcurrent), recall: recall, remember: remember, inactive: inactive,
	}
}

// handles reports whether token is introspected rather than validated as
// a JWT.
func (in *introspector) handles(token string) bool {
	return in.cfg.Tokens == IntrospectAll || !jwtShaped(token)
}

// jwtShaped reports whether token has a JWS compact serialization's
// shape: three dot-separated parts, the first a base64url JSON object.
func jwtShaped(token string) bool {
	if strings.Count(token, ".") != 2 {
		return false
	}
	header, _, _ := strings.Cut(token, ".")
	b, err := base64.RawURLEncoding.DecodeString(header)
	return err == nil && json.Valid(b) && strings.HasPrefix(strings.TrimSpace(string(b)), "{")
}

// introspect returns the claims of token, whose SHA-256 is sum, as the
// authorization server tells them at now, and remembers them (or the
// refusal). Requests with the same token share one introspection, whose
// result is remembered before it ends, so that no second one starts
// for a token just checked; a caller whose ctx ends stops waiting, the
// introspection goes on for the others.
func (in *introspector) introspect(ctx context.Context, token string, sum [sha256.Size]byte, now time.Time) (Claims, error) {
	if !b64token(token) {
		return Claims{}, fmt.Errorf("%w: not a bearer token's characters (RFC 6750 §2.1)", ErrInvalidToken)
	}
	flight := in.flights.DoChan(string(sum[:]), func() (any, error) {
		// Looked at again within the flight: one that ended since the
		// caller's look at the cache has remembered its answer.
		if c, ok := in.recall(sum, now); ok {
			return c, nil
		}
		if until, ok := in.inactive.Get(sum); ok && now.Before(until) {
			return Claims{}, fmt.Errorf("%w: refused by introspection a moment ago", ErrInvalidToken)
		}
		c, err := in.ask(context.WithoutCancel(ctx), token, now)
		switch {
		case err == nil:
			in.remember(sum, c, now)
		case errors.Is(err, ErrInvalidToken):
			in.inactive.Add(sum, now.Add(InactiveCacheAge))
		}
		return c, err
	})
	select {
	case r := <-flight:
		return r.Val.(Claims), r.Err
	case <-ctx.Done():
		return Claims{}, fmt.Errorf("%w: introspection: %w", ErrUnavailable, ctx.Err())
	}
}

// b64token reports whether token is made of RFC 6750's b64token
// characters: anything else is refused without asking.
func b64token(token string) bool {
	body := strings.TrimRight(token, "=")
	if body == "" {
		return false
	}
	for _, c := range []byte(body) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-._~+/", c) >= 0) {
			return false
		}
	}
	return true
}

// answer is the part of an introspection answer read (RFC 7662 §2.2).
type answer struct {
	Active    bool
	Issuer    string
	Subject   string
	Audience  gjson.Result // a string or an array of strings
	Expiry    *int64
	NotBefore *int64
	Scope     string
	ClientID  string
	TokenType string
	Cnf       gjson.Result
}

// readAnswer reads an introspection answer: a JSON object whose `active`
// is a boolean, its other members of their RFC 7662 types when present.
func readAnswer(body []byte) (answer, bool) {
	r, ok := jsonObject(body)
	active := r.Get("active")
	if !ok || !active.IsBool() {
		return answer{}, false
	}
	a := answer{Active: active.Bool(), Audience: r.Get("aud"), Cnf: r.Get("cnf")}
	if !readStrings(r, stringField{"iss", &a.Issuer}, stringField{"sub", &a.Subject}, stringField{"scope", &a.Scope},
		stringField{"client_id", &a.ClientID}, stringField{"token_type", &a.TokenType}) {
		return answer{}, false
	}
	if a.Expiry, ok = intMember(r, "exp"); !ok {
		return answer{}, false
	}
	if a.NotBefore, ok = intMember(r, "nbf"); !ok {
		return answer{}, false
	}
	return a, true
}

// ask makes one introspection request, within the timeout and a free
// slot, and checks its answer.
func (in *introspector) ask(ctx context.Context, token string, now time.Time) (Claims, error) {
	ctx, cancel := context.WithTimeout(ctx, in.cfg.Timeout)
	defer cancel()
	select {
	case in.slots <- struct{}{}:
		defer func() { <-in.slots }()
	case <-ctx.Done():
		return Claims{}, fmt.Errorf("%w: introspection: too many in flight", ErrUnavailable)
	}
	endpoint := in.cfg.Endpoint
	if endpoint == "" {
		md, err := in.discovery.metadata(ctx)
		if err != nil {
			return Claims{}, err
		}
		if endpoint = md.IntrospectionEndpoint; endpoint == "" {
			return Claims{}, fmt.Errorf("%w: the issuer's metadata has no introspection_endpoint", ErrUnavailable)
		}
	}
	form := url.Values{"token": {token}, "token_type_hint": {"access_token"}}
	if in.cfg.ClientAuth == ClientSecretPost {
		form.Set("client_id", in.cfg.ClientID)
		form.Set("client_secret", in.cfg.ClientSecret)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return Claims{}, fmt.Errorf("%w: introspection: %w", ErrUnavailable, err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	if in.cfg.ClientAuth == ClientSecretBasic {
		req.SetBasicAuth(url.QueryEscape(in.cfg.ClientID), url.QueryEscape(in.cfg.ClientSecret))
	}
	resp, err := in.client.Do(req)
	if err != nil {
		return Claims{}, fmt.Errorf("%w: introspection: %w", ErrUnavailable, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return Claims{}, fmt.Errorf("%w: introspection: status %d", ErrUnavailable, resp.StatusCode)
	}
	body, err := readAtMost(resp.Body, MaxIntrospectionBytes)
	if err != nil {
		return Claims{}, fmt.Errorf("%w: introspection: %w", ErrUnavailable, err)
	}
	a, ok := readAnswer(body)
	if !ok {
		return Claims{}, fmt.Errorf("%w: introspection: not an introspection answer", ErrUnavailable)
	}
	return in.check(a, now)
}

// check applies to an introspection answer the checks a JWT gets.
func (in *introspector) check(a answer, now time.Time) (Claims, error) {
	leeway := in.opts.Leeway
	switch {
	case !a.Active:
		return Claims{}, fmt.Errorf("%w: inactive", ErrInvalidToken)
	case a.Issuer != "" && a.Issuer != in.opts.Issuer:
		return Claims{}, fmt.Errorf("%w: issued by %q", ErrInvalidToken, a.Issuer)
	case !audienceNames(a.Audience, in.opts.Audience):
		return Claims{}, fmt.Errorf("%w: not for this audience", ErrInvalidToken)
	case a.Expiry == nil:
		return Claims{}, fmt.Errorf("%w: no exp", ErrInvalidToken)
	case now.After(time.Unix(*a.Expiry, 0).Add(leeway)):
		return Claims{}, fmt.Errorf("%w: expired", ErrInvalidToken)
	case a.NotBefore != nil && now.Add(leeway).Before(time.Unix(*a.NotBefore, 0)):
		return Claims{}, fmt.Errorf("%w: not valid yet", ErrInvalidToken)
	case a.Subject == "":
		return Claims{}, fmt.Errorf("%w: no sub", ErrInvalidToken)
	case a.TokenType != "" && !strings.EqualFold(a.TokenType, "Bearer"):
		return Claims{}, fmt.Errorf("%w: token_type %q is not Bearer", ErrInvalidToken, a.TokenType)
	case a.Cnf.Type != gjson.Null:
		return Claims{}, fmt.Errorf("%w: sender-constrained (cnf), not a bearer token", ErrInvalidToken)
	}
	issuer := a.Issuer
	if issuer == "" {
		issuer = in.opts.Issuer
	}
	return Claims{Issuer: issuer, Subject: a.Subject, Scopes: strings.Fields(a.Scope), ClientID: a.ClientID, Expiry: time.Unix(*a.Expiry, 0)}, nil
}

// audienceNames reports whether aud, a string or an array of strings,
// names audience.
func audienceNames(aud gjson.Result, audience string) bool {
	if aud.Type == gjson.String {
		return aud.Str == audience
	}
	return aud.IsArray() && slices.ContainsFunc(aud.Array(), func(a gjson.Result) bool {
		return a.Type == gjson.String && a.Str == audience
	})
}
