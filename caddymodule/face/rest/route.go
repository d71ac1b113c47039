package rest

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/seal"
)

// This file finds a request's route among the face's from its path under
// the base.

// route is a request's place among the face's routes.
type route struct {
	// kind is the route: "tools", "prompts", "resources",
	// "resources-templates", "resource", "prompt", "complete", "roots",
	// "openapi", "call", "advance", "cancel", "calls".
	kind string
	// name is the resource's or prompt's name; tool and id name a call.
	name string
	tool pathName
	id   pathName
}

// pathName is a tool name or a call id as a path segment: it names a
// storage key, so only [A-Za-z0-9_.-] of 1 to seal.MaxRESTName bytes,
// not starting with '.'.
type pathName string

// parsePathName checks a path segment (unescaped) as a pathName.
func parsePathName(s string) (pathName, bool) {
	if s == "" || len(s) > seal.MaxRESTName || s[0] == '.' {
		return "", false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return "", false
		}
	}
	return pathName(s), true
}

// errNotFound is a path under the base that names no route.
var errNotFound = errors.New("no such REST resource")

// errBadName is a name or id in the path the face refuses.
var errBadName = errors.New("invalid name in the path")

// parsePath finds the route of the path under the base (escaped, as
// sent: a segment holding an escaped '/' is one segment).
func parsePath(under string) (route, error) {
	var segs []string
	for s := range strings.SplitSeq(strings.TrimPrefix(under, "/"), "/") {
		u, err := url.PathUnescape(s)
		if err != nil {
			return route{}, fmt.Errorf("a path segment is not valid percent-encoding: %w", err)
		}
		segs = append(segs, u)
	}
	bad := func(what string) (route, error) {
		return route{}, fmt.Errorf("%w: the %s must be 1 to %d letters, digits, '_', '-' or '.' (not first)",
			errBadName, what, seal.MaxRESTName)
	}
	switch {
	case len(segs) == 1:
		switch segs[0] {
		case "tools", "prompts", "resources", "resources-templates", "complete", "roots":
			return route{kind: segs[0]}, nil
		case "openapi.json":
			return route{kind: "openapi"}, nil
		}
	case len(segs) == 2 && (segs[0] == "resources" || segs[0] == "prompts"):
		if segs[1] == "" || len(segs[1]) > 1024 || strings.ContainsFunc(segs[1], func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			return route{}, fmt.Errorf("%w: a name must be 1 to 1024 bytes without control characters", errBadName)
		}
		return route{kind: strings.TrimSuffix(segs[0], "s"), name: segs[1]}, nil
	case len(segs) >= 3 && segs[0] == "tools" && segs[2] == "calls":
		tool, ok := parsePathName(segs[1])
		if !ok {
			return bad("tool name")
		}
		if len(segs) == 3 {
			return route{kind: "calls", tool: tool}, nil
		}
		id, ok := parsePathName(segs[3])
		if !ok {
			return bad("call id")
		}
		switch {
		case len(segs) == 4:
			return route{kind: "call", tool: tool, id: id}, nil
		case len(segs) == 5 && (segs[4] == "advance" || segs[4] == "cancel"):
			return route{kind: segs[4], tool: tool, id: id}, nil
		}
	}
	return route{}, errNotFound
}

// methods are the HTTP methods of each route.
var methods = map[string]string{
	"tools": "GET", "prompts": "GET", "resources": "GET", "resources-templates": "GET", "openapi": "GET",
	"resource": "GET", "prompt": "POST", "complete": "POST", "roots": "PUT",
	"call": "GET, PUT, DELETE", "advance": "POST", "cancel": "POST", "calls": "GET",
}
