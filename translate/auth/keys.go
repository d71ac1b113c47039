package auth

import (
	"context"
	"errors"
	"fmt"
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

// ErrUnavailable wraps a failure to check a token with the authorization
// server (its metadata or JWKS could not be fetched or read, or its
// introspection endpoint did not answer): the token may be valid, the
// gateway cannot tell.
var ErrUnavailable = errors.New("the authorization server is unavailable")

// keys is an issuer's JWKS, fetched on first use.
type keys struct {
	discovery *discovery
	floor     time.Duration
	now       func() time.Time

	mu        sync.Mutex
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
	md, err := k.discovery.metadata(ctx)
	if err != nil {
		return err
	}
	if md.JWKSURI == "" {
		return fmt.Errorf("%w: the issuer's metadata has no jwks_uri", ErrUnavailable)
	}
	body, err := get(ctx, k.discovery.client, md.JWKSURI, MaxJWKSBytes)
	if err != nil {
		return fmt.Errorf("%w: jwks: %w", ErrUnavailable, err)
	}
	set, err := readJWKS(body)
	if err != nil {
		return fmt.Errorf("%w: jwks: %w", ErrUnavailable, err)
	}
	k.set = set
	return nil
}

// readJWKS reads a JWK Set (RFC 7517 §5): an object whose `keys` is an
// array; each key is parsed by go-jose, and one it cannot parse makes the
// set unusable, as a set that does not parse.
func readJWKS(body []byte) (jose.JSONWebKeySet, error) {
	r, ok := jsonObject(body)
	keys := r.Get("keys")
	if !ok || !keys.IsArray() {
		return jose.JSONWebKeySet{}, errors.New("not a JWK Set")
	}
	var set jose.JSONWebKeySet
	for _, raw := range keys.Array() {
		var k jose.JSONWebKey
		if err := k.UnmarshalJSON([]byte(raw.Raw)); err != nil {
			return jose.JSONWebKeySet{}, err
		}
		set.Keys = append(set.Keys, k)
	}
	return set, nil
}
