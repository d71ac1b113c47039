package caddymodule

import (
	"context"
	"net/http"

	"github.com/tidwall/gjson"
	"go.uber.org/zap"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/seal"
)

// This file keeps a principal's roots (PUT <base>/roots): the answer the
// REST face gives, on the client's behalf, to a tool's roots/list
// question — a REST client has no way to be asked in the middle of a
// call, and its roots rarely change. Without roots of its own a principal
// has none (`{"roots":[]}`), as a saga client.

// restRoots is the answer to a roots/list question of princ's call.
func (h *Handler) restRoots(ctx context.Context, princ [16]byte) []byte {
	ctx, cancel := context.WithTimeout(ctx, restStoreTimeout)
	defer cancel()
	b, err := h.rest.storage.Load(ctx, restRootsKey(princ))
	if err != nil {
		return rootsNone
	}
	roots, err := seal.OpenRESTRoots(h.keyring, princ, b)
	if err != nil {
		h.logger.Debug("REST face: stored roots do not open", zap.Error(err))
		return rootsNone
	}
	return roots
}

// restPutRoots sets the caller's roots: the body is a roots/list result,
// `{"roots": [{"uri": "file:///...", "name": "..."}]}`.
func (h *Handler) restPutRoots(w http.ResponseWriter, r *http.Request) error {
	body, ok := h.readRESTBody(w, r, false)
	if !ok {
		return nil
	}
	if !gjson.GetBytes(body, "roots").IsArray() {
		return writeProblem(w, http.StatusBadRequest, `the body must be a roots/list result: {"roots": [...]}`)
	}
	if err := translate.ValidateInputResponse(translate.MethodListRoots, body); err != nil {
		return writeProblem(w, http.StatusBadRequest, "the roots are not valid: "+err.Error())
	}
	princ := h.principal(r)
	sealed, err := seal.SealRESTRoots(h.keyring, princ, body)
	if err != nil {
		return writeProblem(w, http.StatusRequestEntityTooLarge, "the roots are too large")
	}
	ctx, cancel := context.WithTimeout(r.Context(), restStoreTimeout)
	defer cancel()
	if err := h.rest.storage.Store(ctx, restRootsKey(princ), sealed); err != nil {
		return h.restStorageProblem(w, err)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
