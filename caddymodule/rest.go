package caddymodule

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/certmagic"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/seal"
)

// This file is the REST face (option `rest`, issue 29): SEP-1597's HTTP
// REST transport served in front of every upstream. As the saga face, it
// is a translation onto the gateway's own modern path: every REST
// operation becomes one or more modern requests the gateway makes through
// its own dispatch (rest_rpc.go) — routing, the principal, relays between
// instances, the forward bridge in front of legacy servers and
// pass-through to modern ones apply unchanged. Tool calls are durable
// resources whose records live in Caddy's storage (rest_store.go,
// rest_call.go, rest_run.go); lists, resources, prompts and completions
// are answered at once (rest_lists.go); the OpenAPI document is made from
// tools/list (rest_openapi.go).

// restFace is a handler's REST face.
type restFace struct {
	base    string
	storage certmagic.Storage
}

// provisionREST sets up the REST face when `rest` is on.
func (h *Handler) provisionREST(ctx caddy.Context) error {
	h.rest = nil
	if h.REST.BasePath == "" {
		return nil
	}
	if err := checkRESTBase(h.REST.BasePath); err != nil {
		return err
	}
	if len(h.Fleet.StateKeys) == 0 {
		return errors.New("rest needs state_key: the REST face's call records are sealed, and with the random key " +
			"made at start no other instance (nor this one after a restart) could read them: " + makeKeyHint)
	}
	h.rest = &restFace{base: h.REST.BasePath, storage: ctx.Storage()}
	go h.restSweep(ctx)
	return nil
}

// isREST reports whether r is for the REST face: its path is under the
// base. A request another instance forwarded (an internal MCP request of
// its REST face, relayed to the owner of its call) is MCP.
func (h *Handler) isREST(r *http.Request) bool {
	if h.rest == nil || r.Header.Get(seal.ForwardedHeader) != "" {
		return false
	}
	p := r.URL.Path
	return p == h.rest.base || strings.HasPrefix(p, h.rest.base+"/")
}

// restRoute is a request's place among the face's routes.
type restRoute struct {
	// kind is the route: "tools", "prompts", "resources",
	// "resources-templates", "resource", "prompt", "complete", "roots",
	// "openapi", "call", "advance", "cancel", "calls".
	kind string
	// name is the resource's or prompt's name; tool and id name a call.
	name string
	tool restName
	id   restName
}

// restName is a tool name or a call id as a path segment: it names a
// storage key, so only [A-Za-z0-9_.-] of 1 to seal.MaxRESTName bytes, not
// starting with '.'.
type restName string

// parseRESTName checks a path segment (unescaped) as a restName.
func parseRESTName(s string) (restName, bool) {
	if s == "" || len(s) > seal.MaxRESTName || s[0] == '.' {
		return "", false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return "", false
		}
	}
	return restName(s), true
}

// errRESTNotFound is a path under the base that names no route.
var errRESTNotFound = errors.New("no such REST resource")

// parseRESTPath finds the route of the path under the base (escaped, as
// sent: a segment holding an escaped '/' is one segment).
func parseRESTPath(rest string) (restRoute, error) {
	var segs []string
	for s := range strings.SplitSeq(strings.TrimPrefix(rest, "/"), "/") {
		u, err := url.PathUnescape(s)
		if err != nil {
			return restRoute{}, fmt.Errorf("a path segment is not valid percent-encoding: %w", err)
		}
		segs = append(segs, u)
	}
	bad := func(what string) (restRoute, error) {
		return restRoute{}, fmt.Errorf("%w: the %s must be 1 to %d letters, digits, '_', '-' or '.' (not first)",
			errRESTBadName, what, seal.MaxRESTName)
	}
	switch {
	case len(segs) == 1:
		switch segs[0] {
		case "tools", "prompts", "resources", "resources-templates", "complete", "roots":
			return restRoute{kind: segs[0]}, nil
		case "openapi.json":
			return restRoute{kind: "openapi"}, nil
		}
	case len(segs) == 2 && (segs[0] == "resources" || segs[0] == "prompts"):
		if segs[1] == "" || len(segs[1]) > 1024 || strings.ContainsFunc(segs[1], func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			return restRoute{}, fmt.Errorf("%w: a name must be 1 to 1024 bytes without control characters", errRESTBadName)
		}
		return restRoute{kind: strings.TrimSuffix(segs[0], "s"), name: segs[1]}, nil
	case len(segs) >= 3 && segs[0] == "tools" && segs[2] == "calls":
		tool, ok := parseRESTName(segs[1])
		if !ok {
			return bad("tool name")
		}
		if len(segs) == 3 {
			return restRoute{kind: "calls", tool: tool}, nil
		}
		id, ok := parseRESTName(segs[3])
		if !ok {
			return bad("call id")
		}
		switch {
		case len(segs) == 4:
			return restRoute{kind: "call", tool: tool, id: id}, nil
		case len(segs) == 5 && (segs[4] == "advance" || segs[4] == "cancel"):
			return restRoute{kind: segs[4], tool: tool, id: id}, nil
		}
	}
	return restRoute{}, errRESTNotFound
}

// errRESTBadName is a name or id in the path the face refuses.
var errRESTBadName = errors.New("invalid name in the path")

// restMethods are the HTTP methods of each route.
var restMethods = map[string]string{
	"tools": "GET", "prompts": "GET", "resources": "GET", "resources-templates": "GET", "openapi": "GET",
	"resource": "GET", "prompt": "POST", "complete": "POST", "roots": "PUT",
	"call": "GET, PUT", "advance": "POST", "cancel": "POST", "calls": "GET",
}

// serveREST answers a request of the REST face, and logs it at debug
// level.
func (h *Handler) serveREST(w http.ResponseWriter, r *http.Request) error {
	start := time.Now()
	sw := &statusWriter{ResponseWriter: w}
	err := h.serveRESTRoute(sw, r)
	if c := h.logger.Check(zapcore.DebugLevel, "REST request"); c != nil {
		c.Write(zap.String("method", r.Method), zap.String("path", clipText(r.URL.Path, 256)),
			zap.Int("status", sw.status), zap.Duration("duration", time.Since(start)))
	}
	return err
}

// serveRESTRoute routes a request of the REST face.
func (h *Handler) serveRESTRoute(w http.ResponseWriter, r *http.Request) error {
	if rerr := checkOriginForm(r); rerr != nil {
		return writeProblem(w, http.StatusBadRequest, rerr.Message)
	}
	if rerr := h.checkOrigin(r); rerr != nil {
		return writeProblem(w, rerr.HTTPStatus, rerr.Message)
	}
	rt, err := parseRESTPath(strings.TrimPrefix(r.URL.EscapedPath(), h.rest.base))
	if errors.Is(err, errRESTNotFound) {
		return writeProblem(w, http.StatusNotFound, "no such resource under the REST base")
	}
	if err != nil {
		return writeProblem(w, http.StatusBadRequest, err.Error())
	}
	allowed := restMethods[rt.kind]
	method := r.Method
	if method == http.MethodHead && strings.Contains(allowed, "GET") {
		method = http.MethodGet
	}
	if !strings.Contains(allowed, method) {
		w.Header().Set("Allow", allowed)
		return writeProblem(w, http.StatusMethodNotAllowed, r.Method+" is not allowed here (allowed: "+allowed+")")
	}
	switch rt.kind {
	case "tools", "prompts", "resources", "resources-templates":
		return h.restList(w, r, rt.kind)
	case "resource":
		return h.restResource(w, r, rt.name)
	case "prompt":
		return h.restPrompt(w, r, rt.name)
	case "complete":
		return h.restComplete(w, r)
	case "roots":
		return h.restPutRoots(w, r)
	case "openapi":
		return h.restOpenAPI(w, r)
	case "calls":
		return h.restListCalls(w, r, rt.tool)
	case "call":
		if method == http.MethodPut {
			return h.restPutCall(w, r, rt.tool, rt.id)
		}
		return h.restGetCall(w, r, rt.tool, rt.id)
	case "advance":
		return h.restAdvance(w, r, rt.tool, rt.id)
	default: // cancel
		return h.restCancel(w, r, rt.tool, rt.id)
	}
}

// problem is an RFC 9457 problem details object.
type problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
}

// writeProblem answers with an application/problem+json of status.
func writeProblem(w http.ResponseWriter, status int, detail string) error {
	b, _ := json.Marshal(problem{Type: "about:blank", Title: http.StatusText(status), Status: status, Detail: detail})
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(b)
	return nil
}

// writeRESTJSON answers with v as JSON.
func writeRESTJSON(w http.ResponseWriter, r *http.Request, status int, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return writeProblem(w, http.StatusInternalServerError, "the answer could not be encoded")
	}
	return writeRESTBytes(w, r, status, "application/json", b)
}

// writeRESTBytes answers with b of content type ct (no body for HEAD).
func writeRESTBytes(w http.ResponseWriter, r *http.Request, status int, ct string, b []byte) error {
	w.Header().Set("Content-Type", ct)
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		_, _ = w.Write(b)
	}
	return nil
}

// readRESTBody reads a JSON request body: 415 for another content type,
// 413 beyond max_request_body, 400 for invalid JSON. An empty body is
// allowed when emptyOK (and read as nil).
func (h *Handler) readRESTBody(w http.ResponseWriter, r *http.Request, emptyOK bool) ([]byte, bool) {
	if r.ContentLength == 0 && emptyOK {
		return nil, true
	}
	if !isJSONContentType(r.Header.Get("Content-Type")) {
		_ = writeProblem(w, http.StatusUnsupportedMediaType, "the body must be application/json")
		return nil, false
	}
	body, rerr := readBody(w, r, h.Security.MaxRequestBody)
	if rerr != nil {
		_ = writeProblem(w, rerr.HTTPStatus, rerr.Message)
		return nil, false
	}
	if len(body) == 0 && emptyOK {
		return nil, true
	}
	if jsonrpc.ValidJSON(body) != nil {
		_ = writeProblem(w, http.StatusBadRequest, "the body is not valid JSON")
		return nil, false
	}
	return body, true
}

// isJSONContentType reports whether ct is application/json or a +json
// type.
func isJSONContentType(ct string) bool {
	mt, _, _ := strings.Cut(strings.ToLower(strings.TrimSpace(ct)), ";")
	mt = strings.TrimSpace(mt)
	return mt == "application/json" || strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json")
}
