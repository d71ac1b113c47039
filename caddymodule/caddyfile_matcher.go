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

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/auth"
)

// This file registers the mcp_gateway directive, as Caddy's
// RegisterHandlerDirective does, keeping the directive's matcher in hand
// for two checks: a REST face whose base path the matcher does not match,
// and `auth`'s protected resource metadata path likewise, are served
// nowhere — their requests never reach the handler, and Caddy answers
// them with an empty 200 — so adapting warns (the handler may still be
// right: the same block repeated in a route that does match it).

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
	if m, ok := handler.(*Handler); ok && m.Auth != nil {
		if u, err := url.Parse(m.Auth.Audience); err == nil && outsideMatcher(matchers, auth.MetadataPath(u.EscapedPath())) {
			caddy.Log().Named("caddyfile").Warn("the mcp_gateway's protected resource metadata path is outside its path matcher: clients will not find the authorization server; give the directive a named matcher that also matches it (@mcp path /mcp /.well-known/oauth-protected-resource/mcp)",
				zap.String("metadata", auth.MetadataPath(u.EscapedPath())), zap.String("file", h.File()), zap.Int("line", line))
		}
	}
	return h.NewRoute(matchers, handler), nil
}

// restOutsideMatcher reports whether the directive's matchers match
// neither base nor a request under it (see outsideMatcher).
func restOutsideMatcher(base string, matchers caddy.ModuleMap) bool {
	return base != "" && outsideMatcher(matchers, base, base+"/tools")
}

// outsideMatcher reports whether a directive matcher set with a path
// matcher (its only matcher: with others, nothing is said) matches none
// of the request paths.
func outsideMatcher(matchers caddy.ModuleMap, paths ...string) bool {
	raw, ok := matchers["path"]
	if !ok || len(matchers) != 1 {
		return false
	}
	var match caddyhttp.MatchPath
	for _, p := range gjson.ParseBytes(raw).Array() {
		match = append(match, p.String())
	}
	if match.Provision(caddy.Context{}) != nil {
		return false
	}
	ctx := context.WithValue(context.Background(), caddy.ReplacerCtxKey, caddy.NewReplacer())
	for _, p := range paths {
		r := (&http.Request{Method: http.MethodGet, URL: &url.URL{Path: p}}).WithContext(ctx)
		if matched, err := match.MatchWithError(r); err != nil || matched {
			return false
		}
	}
	return true
}
