package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// Bounds on what the issuer serves, checked before anything is parsed.
const (
	// MaxMetadataBytes is the largest authorization server metadata
	// document read.
	MaxMetadataBytes = 64 << 10
	// MaxJWKSBytes is the largest JWKS read.
	MaxJWKSBytes = 256 << 10
)

// ErrUnavailable wraps a failure to learn the issuer's keys (its metadata
// or JWKS could not be fetched or read): the token may be valid, the
// gateway cannot tell.
var ErrUnavailable = errors.New("the authorization server's keys are unavailable")

// keys is an issuer's metadata and JWKS, fetched on first use.
type keys struct {
	issuer string
	client *http.Client
	floor  time.Duration
	now    func() time.Time

	mu        sync.Mutex
	jwksURI   string
	set       jose.JSONWebKeySet
	fetched   time.Time // the last JWKS fetch (or attempt); zero: never
	lastError error     // the last attempt's failure, answered for unknown keys until the floor passes
}

// key returns the public key named kid (any key when kid is empty and the
// set has exactly one) for alg. The JWKS is fetched when none is cached,
// when the cached one is older than MaxCacheAge (so a key the issuer
// withdraws stops being used), and when kid is unknown — never twice
// within the floor, so a flood of tokens naming made-up key ids costs the
// issuer one fetch per floor. When a fetch fails, the set fetched last
// (if any) stays in use.
func (k *keys) key(ctx context.Context, kid, alg string) (*jose.JSONWebKey, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	age := k.now().Sub(k.fetched)
	if key := k.find(kid, alg); key != nil && age < MaxCacheAge {
		return key, nil
	}
	if !k.fetched.IsZero() && age < k.floor {
		if k.lastError != nil {
			return nil, k.lastError
		}
		return nil, errUnknownKey
	}
	k.fetched = k.now()
	k.lastError = k.refresh(ctx)
	if key := k.find(kid, alg); key != nil {
		return key, nil
	}
	if k.lastError != nil {
		return nil, k.lastError
	}
	return nil, errUnknownKey
}

var errUnknownKey = errors.New("no key of the issuer matches the token's key id and algorithm")

// find looks kid up in the cached set: a public, valid key whose `alg`,
// when it has one, is the token's. Symmetric keys are never used.
func (k *keys) find(kid, alg string) *jose.JSONWebKey {
	var found []jose.JSONWebKey
	if kid == "" {
		found = k.set.Keys
	} else {
		found = k.set.Key(kid)
	}
	var match *jose.JSONWebKey
	for i := range found {
		key := &found[i]
		if !key.IsPublic() || !key.Valid() || key.Use == "enc" || key.Algorithm != "" && key.Algorithm != alg {
			continue
		}
		if match != nil && kid == "" {
			return nil // several candidates without a key id: ambiguous
		}
		match = key
	}
	return match
}

// refresh fetches the metadata (once) and the JWKS. Called with mu held.
func (k *keys) refresh(ctx context.Context) error {
	if k.jwksURI == "" {
		uri, err := k.discover(ctx)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		k.jwksURI = uri
	}
	body, err := k.get(ctx, k.jwksURI, MaxJWKSBytes)
	if err != nil {
		return fmt.Errorf("%w: jwks: %w", ErrUnavailable, err)
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(body, &set); err != nil {
		return fmt.Errorf("%w: jwks: %w", ErrUnavailable, err)
	}
	k.set = set
	return nil
}

// discover reads the issuer's metadata, RFC 8414's well-known location
// first (the path inserted after the host), then OpenID Connect's (the
// path appended), and returns its jwks_uri. The document's issuer must be
// the configured one (RFC 8414 §3.3).
func (k *keys) discover(ctx context.Context) (string, error) {
	u, err := url.Parse(k.issuer)
	if err != nil {
		return "", err
	}
	path := strings.TrimSuffix(u.Path, "/")
	locations := []string{
		u.Scheme + "://" + u.Host + "/.well-known/oauth-authorization-server" + path,
		u.Scheme + "://" + u.Host + path + "/.well-known/openid-configuration",
	}
	var errs []error
	for _, loc := range locations {
		body, err := k.get(ctx, loc, MaxMetadataBytes)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		var md struct {
			Issuer  string `json:"issuer"`
			JWKSURI string `json:"jwks_uri"`
		}
		if err := json.Unmarshal(body, &md); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", loc, err))
			continue
		}
		if md.Issuer != k.issuer {
			errs = append(errs, fmt.Errorf("%s: issuer %q is not the configured %q", loc, md.Issuer, k.issuer))
			continue
		}
		if md.JWKSURI == "" {
			errs = append(errs, fmt.Errorf("%s: no jwks_uri", loc))
			continue
		}
		return md.JWKSURI, nil
	}
	return "", errors.Join(errs...)
}

// get reads url's body, at most limit bytes, from a 200 answer.
func (k *keys) get(ctx context.Context, url string, limit int64) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := k.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: status %d", url, resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", url, err)
	}
	if int64(len(body)) > limit {
		return nil, fmt.Errorf("%s: larger than %d bytes", url, limit)
	}
	return body, nil
}
