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

// serveModern forwards a modern (2026-07-28) request, validated already,
// statelessly to the modern upstream up, or to another modern one when up
// cannot take it (forward's failover).
func (h *Handler) serveModern(w http.ResponseWriter, r *http.Request, l *learned, up *Upstream) error {
	return h.forward(w, r, exchange{
		up: up, method: http.MethodPost, header: upstreamHeader(r), body: l.body,
		failover:   h.newFailover(w, r, speaksModern, "take the request", false),
		idempotent: readOnly[l.breq.Method],
		failID:     l.breq.ID,
		listen:     l.breq.Method == "subscriptions/listen",
	})
}
