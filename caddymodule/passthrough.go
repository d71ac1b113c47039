package caddymodule

import (
	"net/http"
	"strings"
	"time"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/legacy"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/seal"
)

// The two pass-through cells, where client and upstream speak the same
// era: a legacy client's session pinned to its upstream (servePinned,
// initializeLegacy), and a modern request sent statelessly to a modern
// upstream (serveModern). Both go through forward (proxy.go).

// JSON-RPC codes the legacy transport uses for session problems (the values
// the TypeScript SDK answers with, which legacy clients recognize).
const (
	codeSessionRequired = -32000
	codeSessionNotFound = -32001
)

// servePinned serves a request of a legacy client's pinned session (POST,
// the GET stream, DELETE) on up, the upstream its session id names, with
// the upstream's own session id. l.body is nil for GET and DELETE.
func (h *Handler) servePinned(w http.ResponseWriter, r *http.Request, l *learned, up *Upstream) error {
	hdr := legacyUpstreamHeader(r)
	if l.pin.Session != "" {
		hdr.Set("Mcp-Session-Id", string(l.pin.Session))
	}
	return h.forward(w, r, exchange{
		up: up, method: r.Method, header: hdr, body: l.body,
		answerSession: func(*Upstream, string) string { return l.sid },
	})
}

// initializeLegacy opens a new pinned session on up, chosen by the
// selection policy (or on another legacy upstream when up cannot take it:
// forward's failover). The pin is made from the initialize *response*, so
// the gateway id names the upstream session that really exists.
func (h *Handler) initializeLegacy(w http.ResponseWriter, r *http.Request, body []byte, up *Upstream) error {
	return h.forward(w, r, exchange{
		up: up, method: http.MethodPost, header: legacyUpstreamHeader(r), body: body,
		failover:   h.newFailover(w, r, speaksLegacy, "take the request", false),
		idempotent: true, // at worst an unused upstream session is left to expire
		answerSession: func(up *Upstream, upstreamSession string) string {
			return string(seal.SealPin(h.keyring, seal.Pin{
				Upstream:  up.URL,
				Session:   legacy.UpstreamSessionID(upstreamSession),
				Principal: h.principal(r),
				Issued:    time.Now(),
			}))
		},
	})
}

// legacyUpstreamHeader is upstreamHeader for a legacy request: without the
// 2026-07-28 routing headers (SEP-2243: Mcp-Method, Mcp-Name, Mcp-Param-*).
// Legacy has none, so the gateway checks nothing of what a legacy client
// sends in them; passed on, they would let it show a router or policy in
// front of the upstream that trusts them another method or tool than the
// body's.
func legacyUpstreamHeader(r *http.Request) http.Header {
	hdr := upstreamHeader(r)
	for k := range hdr {
		if isRoutingHeader(k) {
			delete(hdr, k)
		}
	}
	return hdr
}

// isRoutingHeader reports whether the header named k is one of SEP-2243's:
// Mcp-Method, Mcp-Name or Mcp-Param-<name>, in any case.
func isRoutingHeader(k string) bool {
	const param = "mcp-param-"
	return strings.EqualFold(k, translate.HeaderMethod) || strings.EqualFold(k, translate.HeaderName) ||
		len(k) >= len(param) && strings.EqualFold(k[:len(param)], param)
}

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
