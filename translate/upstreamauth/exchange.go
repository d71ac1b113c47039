package upstreamauth

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/tidwall/gjson"
	"golang.org/x/sync/singleflight"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
)

// The RFC 8693 values the gateway sends.
const (
	GrantTypeTokenExchange = "urn:ietf:params:oauth:grant-type:token-exchange"
	TokenTypeAccessToken   = "urn:ietf:params:oauth:token-type:access_token"
)

// Defaults of Config's bounds.
const (
	DefaultTimeout     = 10 * time.Second
	DefaultMaxEntries  = 10000
	DefaultMaxResponse = 64 << 10
	// An exchanged token is used until this long before it expires, or a
	// tenth of its life when that is shorter.
	refreshMargin = 30 * time.Second
)

// Config describes one token endpoint and what is asked of it.
type Config struct {
	TokenEndpoint string // the authorization server's token endpoint (absolute http or https URL)
	ClientID      string // the gateway's client id there
	ClientSecret  string // the gateway's client secret (HTTP Basic, RFC 6749 §2.3.1)
	Audience      string // the RFC 8693 audience asked for (the server's logical name); may be empty if Resource is set
	Resource      string // the RFC 8707 resource asked for (the server's URL); may be empty if Audience is set
	Timeout       time.Duration
	MaxEntries    int          // cached tokens at most
	MaxResponse   int64        // bytes of an answer read at most
	Client        *http.Client // nil: a client of its own
}

// ErrExchange is wrapped by every error of Token: the server's credential
// could not be obtained.
var ErrExchange = errors.New("token exchange failed")

// Exchanger obtains and caches exchanged tokens for one server. Safe for
// concurrent use.
type Exchanger struct {
	cfg   Config
	cache *lru.Cache[[32]byte, entry]
	now   func() time.Time
	// flights shares one exchange between the concurrent requests of a
	// principal and subject token (by cache key).
	flights singleflight.Group
}

type entry struct {
	token   string
	refresh time.Time // used until then
}

// New returns an Exchanger for cfg, with its defaults filled in.
func New(cfg Config) (*Exchanger, error) {
	u, err := url.Parse(cfg.TokenEndpoint)
	if err != nil || u.Host == "" || u.Scheme != "http" && u.Scheme != "https" {
		return nil, errors.New("token_endpoint must be an absolute http or https URL")
	}
	if cfg.ClientID == "" {
		return nil, errors.New("client_id is required")
	}
	if cfg.Audience == "" && cfg.Resource == "" {
		return nil, errors.New("audience or resource is required")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.MaxEntries <= 0 {
		cfg.MaxEntries = DefaultMaxEntries
	}
	if cfg.MaxResponse <= 0 {
		cfg.MaxResponse = DefaultMaxResponse
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	cache, err := lru.New[[32]byte, entry](cfg.MaxEntries)
	if err != nil {
		return nil, fmt.Errorf("token cache: %w", err)
	}
	return &Exchanger{cfg: cfg, cache: cache, now: time.Now}, nil
}

// Token returns the credential for the server on behalf of principal,
// whose own access token is subject: a cached one while it is fresh, else
// a new exchange (one at a time per principal and subject). The cache key
// is a hash of both, so a token is only ever given for the subject token
// the authorization server accepted.
func (e *Exchanger) Token(ctx context.Context, principal, subject string) (string, error) {
	if subject == "" {
		return "", fmt.Errorf("%w: the request has no bearer token to exchange", ErrExchange)
	}
	key := cacheKey(principal, subject)
	if c, ok := e.cache.Get(key); ok && e.now().Before(c.refresh) {
		return c.token, nil
	}
	// Detached from ctx: joiners must not fail because the first caller
	// left; the exchange's own timeout bounds it.
	flight := e.flights.DoChan(string(key[:]), func() (any, error) {
		return e.exchange(context.WithoutCancel(ctx), key, subject)
	})
	select {
	case r := <-flight:
		return r.Val.(string), r.Err
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// Len is the number of cached tokens.
func (e *Exchanger) Len() int { return e.cache.Len() }

func cacheKey(principal, subject string) [32]byte {
	h := sha256.New()
	fmt.Fprintf(h, "%d:%s", len(principal), principal)
	h.Write([]byte(subject))
	var k [32]byte
	h.Sum(k[:0])
	return k
}

// tokenAnswer is the part of a token endpoint's answer read (RFC 8693 §2.2.1).
type tokenAnswer struct {
	AccessToken string
	TokenType   string
	ExpiresIn   int64
}

// readTokenAnswer reads a token endpoint's answer (RFC 8693 §2.2.1), foreign
// JSON: read with gjson once jsonrpc.ValidJSON has bounded its nesting, its
// members of their types when present.
func readTokenAnswer(body []byte) (tokenAnswer, bool) {
	if jsonrpc.ValidJSON(body) != nil {
		return tokenAnswer{}, false
	}
	r := gjson.ParseBytes(body)
	token, kind, life := r.Get("access_token"), r.Get("token_type"), r.Get("expires_in")
	if !r.IsObject() || token.Type != gjson.String || (kind.Type != gjson.String && kind.Type != gjson.Null) ||
		(life.Type != gjson.Number && life.Type != gjson.Null) {
		return tokenAnswer{}, false
	}
	return tokenAnswer{AccessToken: token.Str, TokenType: kind.Str, ExpiresIn: life.Int()}, true
}

// exchange makes one RFC 8693 request and caches its answer under key.
func (e *Exchanger) exchange(ctx context.Context, key [32]byte, subject string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, e.cfg.Timeout)
	defer cancel()
	form := url.Values{
		"grant_type":           {GrantTypeTokenExchange},
		"subject_token":        {subject},
		"subject_token_type":   {TokenTypeAccessToken},
		"requested_token_type": {TokenTypeAccessToken},
	}
	if e.cfg.Audience != "" {
		form.Set("audience", e.cfg.Audience)
	}
	if e.cfg.Resource != "" {
		form.Set("resource", e.cfg.Resource)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.cfg.TokenEndpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return "", fmt.Errorf("%w: building the request", ErrExchange)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	req.SetBasicAuth(url.QueryEscape(e.cfg.ClientID), url.QueryEscape(e.cfg.ClientSecret))
	start := e.now()
	resp, err := e.cfg.Client.Do(req)
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err // without the URL
		}
		return "", fmt.Errorf("%w: token endpoint unreachable: %w", ErrExchange, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, e.cfg.MaxResponse+1))
	switch {
	case err != nil:
		return "", fmt.Errorf("%w: reading the answer: %w", ErrExchange, err)
	case int64(len(body)) > e.cfg.MaxResponse:
		return "", fmt.Errorf("%w: answer larger than %d bytes", ErrExchange, e.cfg.MaxResponse)
	case resp.StatusCode != http.StatusOK:
		return "", fmt.Errorf("%w: token endpoint answered HTTP %d", ErrExchange, resp.StatusCode)
	}
	a, ok := readTokenAnswer(body)
	if !ok || a.AccessToken == "" {
		return "", fmt.Errorf("%w: the answer has no access_token", ErrExchange)
	}
	if a.TokenType != "" && !strings.EqualFold(a.TokenType, "bearer") && !strings.EqualFold(a.TokenType, "N_A") {
		return "", fmt.Errorf("%w: the token_type is not Bearer", ErrExchange)
	}
	if strings.ContainsAny(a.AccessToken, "\r\n\x00") {
		return "", fmt.Errorf("%w: the access_token is not a header value", ErrExchange)
	}
	if a.ExpiresIn > 0 {
		life := time.Duration(min(a.ExpiresIn, int64(365*24*3600))) * time.Second
		margin := min(refreshMargin, life/10)
		e.cache.Add(key, entry{token: a.AccessToken, refresh: start.Add(life - margin)})
	}
	return a.AccessToken, nil
}
