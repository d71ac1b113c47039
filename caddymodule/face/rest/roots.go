package rest

import (
	"context"
	"errors"
	"io/fs"
	"net/http"

	"github.com/tidwall/gjson"
	"go.uber.org/zap"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/caddymodule/face"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/seal"
)

// This file keeps a principal's roots (PUT <base>/roots): the answer the
// REST face gives, on the client's behalf, to a tool's roots/list
// question — a REST client has no way to be asked in the middle of a
// call, and its roots rarely change. Without roots of its own a principal
// has none (`{"roots":[]}`), as a saga client.

// roots is the answer to a roots/list question of princ's call.
func (f *Face) roots(ctx context.Context, princ [16]byte) []byte {
	ctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	key := f.rootsKey(princ)
	b, err := f.storage.Load(ctx, key)
	for _, old := range f.keysBefore(key, princ) { // where an older gateway kept them
		if !errors.Is(err, fs.ErrNotExist) {
			break
		}
		b, err = f.storage.Load(ctx, old)
	}
	if err != nil {
		return face.RootsNone
	}
	roots, err := seal.OpenRESTRoots(f.gw.Keyring(), princ, b)
	if err != nil {
		f.gw.Logger().Debug("REST face: stored roots do not open", zap.Error(err))
		return face.RootsNone
	}
	return roots
}

// putRoots sets the caller's roots: the body is a roots/list result,
// `{"roots": [{"uri": "file:///...", "name": "..."}]}`.
func (f *Face) putRoots(w http.ResponseWriter, r *http.Request) error {
	body, ok := f.readBody(w, r, false)
	if !ok {
		return nil
	}
	if !gjson.GetBytes(body, "roots").IsArray() {
		return writeProblem(w, http.StatusBadRequest, `the body must be a roots/list result: {"roots": [...]}`)
	}
	if err := translate.ValidateInputResponse(translate.MethodListRoots, body); err != nil {
		return writeProblem(w, http.StatusBadRequest, "the roots are not valid: "+err.Error())
	}
	princ := f.gw.Principal(r)
	sealed, err := seal.SealRESTRoots(f.gw.Keyring(), princ, body)
	if err != nil {
		return writeProblem(w, http.StatusRequestEntityTooLarge, "the roots are too large")
	}
	ctx, cancel := context.WithTimeout(r.Context(), storeTimeout)
	defer cancel()
	key := f.rootsKey(princ)
	if _, err := f.storage.Stat(ctx, key); errors.Is(err, fs.ErrNotExist) {
		if full := f.admitStore(int64(len(sealed))); full != nil {
			return writeProblem(w, full.status, full.detail)
		}
	}
	if err := f.storage.Store(ctx, key, sealed); err != nil {
		return f.storageProblem(w, err)
	}
	f.usage.wrote(princ, int64(len(sealed)))
	w.WriteHeader(http.StatusNoContent)
	return nil
}
