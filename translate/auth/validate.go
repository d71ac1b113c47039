package auth

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	lru "github.com/hashicorp/golang-lru/v2"
)

// MaxTokenLength is the longest access token read; a longer one is
// refused before it is parsed.
const MaxTokenLength = 8 << 10

// Defaults of Options.
const (
	DefaultRefetchFloor = 30 * time.Second
	DefaultLeeway       = 30 * time.Second
	DefaultCacheSize    = 10000
)

// MaxCacheAge is the longest a validated token is taken as valid without
// being checked again, whatever its expiry: a key the issuer withdraws
// stops being trusted within it.
const MaxCacheAge = 5 * time.Minute

// Algorithms are the signature algorithms a token may use: asymmetric
// ones only, so a key the issuer publishes can never double as a shared
// secret.
var Algorithms = []jose.SignatureAlgorithm{
	jose.RS256, jose.RS384, jose.RS512,
	jose.PS256, jose.PS384, jose.PS512,
	jose.ES256, jose.ES384, jose.EdDSA,
}

// ErrInvalidToken wraps every reason a token is refused: the client gets
// 401 with `error="invalid_token"`.
var ErrInvalidToken = errors.New("invalid token")

// Options configure a Validator.
type Options struct {
	// Issuer is the authorization server's issuer identifier: its metadata
	// is looked up from it, and a token's `iss` must be it.
	Issuer string
	// Audience is this resource's identifier: a token's `aud` must name it.
	Audience string
	// Client fetches the issuer's metadata and keys. Default:
	// http.DefaultClient.
	Client *http.Client
	// RefetchFloor is the least time between two JWKS fetches. Default:
	// DefaultRefetchFloor.
	RefetchFloor time.Duration
	// Leeway is the clock skew allowed on `exp` and `nbf`. Default:
	// DefaultLeeway.
	Leeway time.Duration
	// Now is the clock. Default: time.Now.
	Now func() time.Time
	// CacheSize is how many validated tokens are remembered (by their
	// SHA-256, never the token), so that a client's next request with the
	// same token costs no signature check. Default: DefaultCacheSize.
	CacheSize int
	// Introspection, when set, checks opaque tokens (or every token) by
	// asking the authorization server (RFC 7662) instead of validating a
	// JWT's signature.
	Introspection *Introspection
}

// Claims are what a valid token says about its bearer.
type Claims struct {
	Issuer   string
	Subject  string
	Scopes   []string // `scope` (space-separated) or `scp` (an array)
	ClientID string   // `client_id`, or `azp`
	Expiry   time.Time
}

// HasScope reports whether the token was granted scope.
func (c Claims) HasScope(scope string) bool {
	for _, s := range c.Scopes {
		if s == scope {
			return true
		}
	}
	return false
}

// Validator checks access tokens for one issuer and audience. It is safe
// for concurrent use.
type Validator struct {
	opts       Options
	keys       *keys
	introspect *introspector // nil: JWTs only
	cache      *lru.Cache[[sha256.Size]byte, cached]
}

// cached is a validated token's claims, and until when they are trusted
// without another check.
type cached struct {
	claims Claims
	until  time.Time
}

// New returns a Validator for o. Nothing is fetched until the first token
// is validated.
func New(o Options) *Validator {
	if o.Client == nil {
		o.Client = http.DefaultClient
	}
	if o.RefetchFloor <= 0 {
		o.RefetchFloor = DefaultRefetchFloor
	}
	if o.Leeway <= 0 {
		o.Leeway = DefaultLeeway
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.CacheSize <= 0 {
		o.CacheSize = DefaultCacheSize
	}
	cache, _ := lru.New[[sha256.Size]byte, cached](o.CacheSize) // errors only for a size <= 0
	d := &discovery{issuer: o.Issuer, client: o.Client, floor: o.RefetchFloor, now: o.Now}
	v := &Validator{opts: o, keys: &keys{discovery: d, floor: o.RefetchFloor, now: o.Now}, cache: cache}
	if o.Introspection != nil {
		v.introspect = newIntrospector(*o.Introspection, &v.opts, d, v.recall, v.remember)
	}
	return v
}

// Validate checks token and returns its claims: a JWT by its signature,
// an opaque token (or every token, as Introspection says) by asking the
// authorization server. A token refused for what it is wraps
// ErrInvalidToken; one that could not be checked because the
// authorization server is out of reach wraps ErrUnavailable. Errors never
// contain the token.
func (v *Validator) Validate(ctx context.Context, token string) (Claims, error) {
	if len(token) > MaxTokenLength {
		return Claims{}, fmt.Errorf("%w: longer than %d bytes", ErrInvalidToken, MaxTokenLength)
	}
	sum := sha256.Sum256([]byte(token))
	now := v.opts.Now()
	if c, ok := v.recall(sum, now); ok {
		return c, nil
	}
	if v.introspect != nil && v.introspect.handles(token) {
		return v.introspect.introspect(ctx, token, sum, now) // remembered by the introspection
	}
	c, err := v.validate(ctx, token, now)
	if err != nil {
		return Claims{}, err
	}
	v.remember(sum, c, now)
	return c, nil
}

// recall returns the cached claims of the token whose SHA-256 is sum, if
// they are still trusted at now.
func (v *Validator) recall(sum [sha256.Size]byte, now time.Time) (Claims, bool) {
	c, ok := v.cache.Get(sum)
	if ok && !now.Before(c.until) {
		v.cache.Remove(sum)
		return Claims{}, false
	}
	return c.claims, ok
}

// remember caches the claims of the token whose SHA-256 is sum, checked
// at now, until it expires or MaxCacheAge passes.
func (v *Validator) remember(sum [sha256.Size]byte, c Claims, now time.Time) {
	until := now.Add(MaxCacheAge)
	if exp := c.Expiry.Add(v.opts.Leeway); exp.Before(until) {
		until = exp
	}
	v.cache.Add(sum, cached{claims: c, until: until})
}

// validate checks token at now, with no cache.
func (v *Validator) validate(ctx context.Context, token string, now time.Time) (Claims, error) {
	tok, err := jwt.ParseSigned(token, Algorithms)
	if err != nil {
		return Claims{}, fmt.Errorf("%w: not a JWT signed with an allowed algorithm", ErrInvalidToken)
	}
	if len(tok.Headers) != 1 {
		return Claims{}, fmt.Errorf("%w: not exactly one signature", ErrInvalidToken)
	}
	h := tok.Headers[0]
	// The keys are fetched for every later request too: one client's
	// cancellation must not fail the fetch.
	key, err := v.keys.key(context.WithoutCancel(ctx), h.KeyID, h.Algorithm)
	if errors.Is(err, ErrUnavailable) {
		return Claims{}, err
	}
	if err != nil {
		return Claims{}, fmt.Errorf("%w: %w", ErrInvalidToken, err)
	}
	var std jwt.Claims
	var extra struct {
		Scope    string   `json:"scope"`
		Scp      []string `json:"scp"`
		ClientID string   `json:"client_id"`
		AZP      string   `json:"azp"`
	}
	if err := tok.Claims(key.Key, &std, &extra); err != nil {
		return Claims{}, fmt.Errorf("%w: bad signature or claims", ErrInvalidToken)
	}
	if std.Expiry == nil {
		return Claims{}, fmt.Errorf("%w: no exp", ErrInvalidToken)
	}
	if std.Subject == "" {
		return Claims{}, fmt.Errorf("%w: no sub", ErrInvalidToken)
	}
	expected := jwt.Expected{Issuer: v.opts.Issuer, AnyAudience: jwt.Audience{v.opts.Audience}, Time: now}
	if err := std.ValidateWithLeeway(expected, v.opts.Leeway); err != nil {
		return Claims{}, fmt.Errorf("%w: %w", ErrInvalidToken, err)
	}
	c := Claims{Issuer: std.Issuer, Subject: std.Subject, Scopes: extra.Scp, ClientID: extra.ClientID, Expiry: std.Expiry.Time()}
	if extra.Scope != "" {
		c.Scopes = strings.Fields(extra.Scope)
	}
	if c.ClientID == "" {
		c.ClientID = extra.AZP
	}
	return c, nil
}
