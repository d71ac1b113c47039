package caddymodule

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// Request targets. The gateway serves paths only: a request line in
// absolute form (`POST http://host/path HTTP/1.1`, meant for proxies) is
// refused at the door, and a request forwarded to its owner instance is
// sent to a URL built from parts — scheme and host from the owner's
// configured or sealed base URL, path and query from the client's request
// — so that nothing a client sends can change where it goes.

// originalRequest is the request as the client sent it, before any Caddy
// rewrite (handle_path, uri strip_prefix).
func originalRequest(r *http.Request) *http.Request {
	if orig, ok := r.Context().Value(caddyhttp.OriginalRequestCtxKey).(http.Request); ok && orig.URL != nil {
		return &orig
	}
	return r
}

// checkOriginForm refuses a request whose request target is not a path
// (origin form, RFC 9112 §3.2.1): absolute form, authority form or `*`,
// or a target holding a '#' (a request target has no fragment; Go's server
// leaves it in the path or query, which a forwarded URL could not carry).
func checkOriginForm(r *http.Request) *jsonrpc.RPCError {
	orig := originalRequest(r)
	u := orig.URL
	if strings.HasPrefix(orig.RequestURI, "/") && !strings.Contains(orig.RequestURI, "#") &&
		u.Scheme == "" && u.Host == "" && u.User == nil && u.Opaque == "" {
		return nil
	}
	return &jsonrpc.RPCError{HTTPStatus: http.StatusBadRequest, Code: jsonrpc.InvalidRequest,
		Message: "Bad Request: the request target must be a path (origin form): not an absolute URL, and no '#'"}
}

// errForwardTarget: the owner's base URL or the request's target is not
// fit to build the forwarded request's URL from.
var errForwardTarget = errors.New("cannot build the forwarded request's URL")

// forwardURL builds the URL a request is forwarded to: scheme and host of
// base (an owner's base URL, `http[s]://host[:port]`), path and query of
// orig (the client's request URL, in origin form). It fails rather than
// guess: the result's scheme and host are always base's.
func forwardURL(base string, orig *url.URL) (*url.URL, error) {
	b, err := url.Parse(base)
	switch {
	case err != nil:
		return nil, fmt.Errorf("%w: owner address: %w", errForwardTarget, err)
	case b.Scheme != "http" && b.Scheme != "https":
		return nil, fmt.Errorf("%w: owner address: scheme %q", errForwardTarget, b.Scheme)
	case b.Host == "" || b.Hostname() == "" || b.User != nil || b.Opaque != "" || b.RawQuery != "" || b.Fragment != "" ||
		(b.Path != "" && b.Path != "/"):
		return nil, fmt.Errorf("%w: owner address is not scheme://host[:port]", errForwardTarget)
	case orig == nil || orig.Scheme != "" || orig.Host != "" || orig.User != nil || orig.Opaque != "" || orig.Fragment != "":
		return nil, fmt.Errorf("%w: the request target is not in origin form", errForwardTarget)
	}
	path := orig.EscapedPath()
	if !strings.HasPrefix(path, "/") {
		return nil, fmt.Errorf("%w: the request path does not begin with /", errForwardTarget)
	}
	out := &url.URL{Scheme: b.Scheme, Host: b.Host, Path: orig.Path, RawQuery: orig.RawQuery, ForceQuery: orig.ForceQuery}
	if orig.RawPath != "" && orig.RawPath == path {
		out.RawPath = orig.RawPath // keep the client's escaping (%2F)
	}
	if out.EscapedPath() != path {
		return nil, fmt.Errorf("%w: the request path does not survive re-encoding", errForwardTarget)
	}
	if strings.ContainsFunc(path+out.RawQuery, func(c rune) bool { return c <= ' ' || c == 0x7f }) {
		return nil, fmt.Errorf("%w: control character or space in the request target", errForwardTarget)
	}
	// A request target has no fragment (RFC 9112 §3.2.1), but Go's server
	// leaves a '#' in the query: written out and parsed again, the URL
	// would end its query there.
	if strings.Contains(out.RawQuery, "#") {
		return nil, fmt.Errorf("%w: '#' in the request's query", errForwardTarget)
	}
	return out, nil
}
