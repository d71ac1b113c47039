package caddymodule

import (
	"context"
	"net/http"
	"net/url"

	"github.com/tidwall/gjson"
	"go.uber.org/zap"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// This file registers the mcp_gateway directive, as Caddy's
// RegisterHandlerDirective does, keeping the directive's matcher in hand
// for one check: a REST face whose base path the matcher does not match
// is served nowhere — its requests never reach the handler, and Caddy
// answers them with an empty 200 — so adapting warns (the handler may
// still be right: the same block repeated in a route that does match it).

func parseDirective(h httpcaddyfile.Helper) ([]httpcaddyfile.ConfigValue, error) {
	if !h.Next() {
		return nil, h.ArgErr()
	}
	line := h.Line()
	matchers, err := h.ExtractMatcherSet()
	if err != nil {
		return nil, err
	}
	handler, err := parseCaddyfile(h)
	if err != nil {
		return nil, err
	}
	if m, ok := handler.(*Handler); ok && m.Faces.REST != nil {
		if restOutsideMatcher(m.Faces.REST.BasePath, matchers) {
			caddy.Log().Named("caddyfile").Warn("the mcp_gateway's rest base path is outside its path matcher: REST requests will not reach this handler (Caddy answers them with an empty 200); give the directive a matcher that also matches the base path, or serve the face from a route that does",
				zap.String("rest", m.Faces.REST.BasePath), zap.String("file", h.File()), zap.Int("line", line))
		}
	}
	return h.NewRoute(matchers, handler), nil
}

// restOutsideMatcher reports whether a directive matcher set with a path
// matcher (its only matcher: with others, nothing is said) matches
// neither base nor a request under it.
func restOutsideMatcher(base string, matchers caddy.ModuleMap) bool {
	raw, ok := matchers["path"]
	if base == "" || !ok || len(matchers) != 1 {
		return false
	}
	var paths caddyhttp.MatchPath
	for _, p := range gjson.ParseBytes(raw).Array() {
		paths = append(paths, p.String())
	}
	if paths.Provision(caddy.Context{}) != nil {
		return false
	}
	ctx := context.WithValue(context.Background(), caddy.ReplacerCtxKey, caddy.NewReplacer())
	for _, p := range []string{base, base + "/tools"} {
		r := (&http.Request{Method: http.MethodGet, URL: &url.URL{Path: p}}).WithContext(ctx)
		if matched, err := paths.MatchWithError(r); err != nil || matched {
			return false
		}
	}
	return true
}
