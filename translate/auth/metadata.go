package auth

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// issuerMetadata is what the resource server reads of the authorization
// server's metadata (RFC 8414 §2).
type issuerMetadata struct {
	Issuer                string
	JWKSURI               string
	IntrospectionEndpoint string
}

// readMetadata reads an issuer's metadata document: a JSON object whose
// members the gateway uses are strings when present.
func readMetadata(body []byte) (*issuerMetadata, bool) {
	r, ok := jsonObject(body)
	if !ok {
		return nil, false
	}
	var md issuerMetadata
	ok = readStrings(r, stringField{"issuer", &md.Issuer}, stringField{"jwks_uri", &md.JWKSURI},
		stringField{"introspection_endpoint", &md.IntrospectionEndpoint})
	return &md, ok
}

// discovery is the issuer's metadata, fetched on first use and kept once
// read; after a failure it is not fetched again within the floor.
type discovery struct {
	issuer string
	client *http.Client
	floor  time.Duration
	now    func() time.Time

	mu    sync.Mutex
	md    *issuerMetadata
	tried time.Time // the last failed attempt
	err   error     // its failure, answered until the floor passes
}

// metadata returns the issuer's metadata, fetching it when it has none.
func (d *discovery) metadata(ctx context.Context) (*issuerMetadata, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.md != nil {
		return d.md, nil
	}
	if !d.tried.IsZero() && d.now().Sub(d.tried) < d.floor {
		return nil, d.err
	}
	md, err := d.fetch(ctx)
	if err != nil {
		d.tried, d.err = d.now(), fmt.Errorf("%w: %w", ErrUnavailable, err)
		return nil, d.err
	}
	d.md = md
	return md, nil
}

// fetch reads the issuer's metadata, RFC 8414's well-known location
// first (the path inserted after the host), then OpenID Connect's (the
// path appended). The document's issuer must be the configured one (RFC
// 8414 §3.3).
func (d *discovery) fetch(ctx context.Context) (*issuerMetadata, error) {
	u, err := url.Parse(d.issuer)
	if err != nil {
		return nil, err
	}
	path := strings.TrimSuffix(u.Path, "/")
	locations := []string{
		u.Scheme + "://" + u.Host + "/.well-known/oauth-authorization-server" + path,
		u.Scheme + "://" + u.Host + path + "/.well-known/openid-configuration",
	}
	var errs []error
	for _, loc := range locations {
		body, err := get(ctx, d.client, loc, MaxMetadataBytes)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		md, ok := readMetadata(body)
		if !ok {
			errs = append(errs, fmt.Errorf("%s: not an authorization server's metadata", loc))
			continue
		}
		if md.Issuer != d.issuer {
			errs = append(errs, fmt.Errorf("%s: issuer %q is not the configured %q", loc, md.Issuer, d.issuer))
			continue
		}
		return md, nil
	}
	return nil, errors.Join(errs...)
}

// get reads url's body, at most limit bytes, from a 200 answer.
func get(ctx context.Context, client *http.Client, url string, limit int64) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: status %d", url, resp.StatusCode)
	}
	body, err := readAtMost(resp.Body, limit)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", url, err)
	}
	return body, nil
}

// readAtMost reads r whole, failing when it has more than limit bytes.
func readAtMost(r io.Reader, limit int64) ([]byte, error) {
	body, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(body)) > limit {
		return nil, fmt.Errorf("larger than %d bytes", limit)
	}
	return body, nil
}
