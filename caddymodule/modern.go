package caddymodule

import (
	"net/http"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
)

// supportedModern lists the modern protocol versions the gateway serves.
var supportedModern = []string{translate.ModernVersion}

// readOnly lists the modern methods that change nothing upstream, so that
// sending one again after a dropped connection is safe.
var readOnly = map[string]bool{
	"server/discover": true, "tools/list": true, "prompts/list": true, "resources/list": true,
	"resources/templates/list": true, "completion/complete": true,
}

// serveModern validates a modern (2026-07-28) request and forwards it,
// statelessly, to a modern upstream.
func (h *Handler) serveModern(w http.ResponseWriter, r *http.Request, body []byte) error {
	req, rerr := translate.ValidateModern(r.Method, r.Header, body, supportedModern)
	if rerr != nil {
		return writeRPCError(w, requestID(body), rerr)
	}
	if translate.RemovedMethod(req.Method) {
		return writeRPCError(w, req.ID, translate.NewMethodNotFound(req.Method))
	}
	breq := translate.Request{Principal: h.principal(r), ModernRequest: req, Options: h.bridgeOpts}
	if owner, ok := h.bridge.ParkedElsewhere(&breq); ok {
		// A retry for a call another instance parked.
		return h.relay(w, r, body, req.ID, owner)
	}
	up := h.selectUpstream(r, w, speaksModern)
	if up == nil {
		if legacyUp := h.selectUpstream(r, w, speaksLegacy); legacyUp != nil {
			setPlaceholder(r, "cell", cellForward)
			return h.serveBridged(w, r, breq, legacyUp)
		}
		return writeRPCError(w, req.ID, &translate.RPCError{
			HTTPStatus: http.StatusServiceUnavailable, Code: translate.InternalError,
			Message: "no upstream MCP server is available",
		})
	}
	setPlaceholder(r, "cell", cellModern)
	return h.forward(w, r, exchange{
		up: up, method: http.MethodPost, header: upstreamHeader(r), body: body,
		reselect:   func() *Upstream { return h.selectUpstream(r, w, speaksModern) },
		idempotent: readOnly[req.Method],
		failID:     req.ID,
		listen:     req.Method == "subscriptions/listen",
	})
}
