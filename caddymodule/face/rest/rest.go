// Package rest is the REST face (option `rest`, issue 29): SEP-1597's
// HTTP REST transport served in front of every upstream. As the saga
// face, it is a translation onto the gateway's own modern path: every
// REST operation becomes one or more modern requests the gateway makes
// through its own routing (face.Client; rpc.go) — relays between
// instances, the forward bridge in front of legacy servers and
// pass-through to modern ones apply unchanged. Tool calls are durable
// resources whose records live in Caddy's storage (store.go, call.go,
// run.go), bounded per principal and in all (quota.go), run in front of a
// legacy server as tasks the gateway hosts, so that another instance
// carries them on (carry.go); lists, resources, prompts and completions
// are answered at once (lists.go); the OpenAPI document is made from
// tools/list (openapi.go, its shared schemas in openapi_schemas.go).
package rest

import (
	"errors"
	"net/http"
	"strings"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/certmagic"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/caddymodule/face"
)

// Face is the REST face of one handler.
type Face struct {
	gw      face.Gateway
	cfg     Config // defaulted
	storage certmagic.Storage
	usage   *usage // the estimates of what is kept (quota.go)
}

// New makes the face, or nil when cfg is nil (off). It gives cfg's
// options left unset their defaults, checks them, and starts the sweeper
// of expired call records (which counts the store too), which ends with
// ctx.
func New(ctx caddy.Context, cfg *Config, gw face.Gateway) (face.Face, error) {
	if cfg == nil {
		return nil, nil
	}
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if !gw.Limits().SharedKey {
		return nil, errors.New("rest needs state_key: the REST face's call records are sealed, and with the random key " +
			"made at start no other instance (nor this one after a restart) could read them: " +
			"make one with `openssl rand -base64 32` and give every instance the same")
	}
	f := &Face{gw: gw, cfg: *cfg, storage: ctx.Storage(), usage: newUsage()}
	go f.sweep(ctx)
	return f, nil
}

// Name implements face.Face.
func (*Face) Name() string { return "rest" }

// ServePath implements face.PathFace: it serves the requests whose path
// is under the base, and logs each at debug level.
func (f *Face) ServePath(w http.ResponseWriter, r *http.Request) (bool, error) {
	if p := r.URL.Path; p != f.cfg.BasePath && !strings.HasPrefix(p, f.cfg.BasePath+"/") {
		return false, nil
	}
	start := time.Now()
	sw := &face.StatusWriter{ResponseWriter: w}
	err := f.serve(sw, r)
	if c := f.gw.Logger().Check(zapcore.DebugLevel, "REST request"); c != nil {
		c.Write(zap.String("method", r.Method), zap.String("path", clip(r.URL.Path, 256)),
			zap.Int("status", sw.Status), zap.Duration("duration", time.Since(start)))
	}
	return true, err
}

// serve routes a request of the face.
func (f *Face) serve(w http.ResponseWriter, r *http.Request) error {
	if rerr := f.gw.CheckRequest(r); rerr != nil {
		return writeProblem(w, rerr.HTTPStatus, rerr.Message)
	}
	if f.gw.Stopping() {
		w.Header().Set("Retry-After", face.StoppingRetryAfter)
		return writeProblem(w, http.StatusServiceUnavailable, face.StoppingMessage)
	}
	rt, err := parsePath(strings.TrimPrefix(r.URL.EscapedPath(), f.cfg.BasePath))
	if errors.Is(err, errNotFound) {
		return writeProblem(w, http.StatusNotFound, "no such resource under the REST base")
	}
	if err != nil {
		return writeProblem(w, http.StatusBadRequest, err.Error())
	}
	allowed := methods[rt.kind]
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
		return f.list(w, r, rt.kind)
	case "resource":
		return f.resource(w, r, rt.name)
	case "prompt":
		return f.prompt(w, r, rt.name)
	case "complete":
		return f.complete(w, r)
	case "roots":
		return f.putRoots(w, r)
	case "openapi":
		return f.openAPI(w, r)
	case "calls":
		return f.listCalls(w, r, rt.tool)
	case "call":
		switch method {
		case http.MethodPut:
			return f.putCall(w, r, rt.tool, rt.id)
		case http.MethodDelete:
			return f.deleteCall(w, r, rt.tool, rt.id)
		}
		return f.getCall(w, r, rt.tool, rt.id)
	case "advance":
		return f.advance(w, r, rt.tool, rt.id)
	default: // cancel
		return f.cancel(w, r, rt.tool, rt.id)
	}
}

// clip is s cut to n bytes, marked when cut.
func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// Interface guards
var _ face.PathFace = (*Face)(nil)
