package caddymodule

import (
	"net/http"
	"time"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/legacy"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
)

// JSON-RPC codes the legacy transport uses for session problems (the values
// the TypeScript SDK answers with, which legacy clients recognize).
const (
	codeSessionRequired = -32000
	codeSessionNotFound = -32001
)

// serveLegacy serves a legacy client pinned to a legacy upstream: initialize
// opens an upstream session and hands the client a sealed gateway session id
// naming it; every later request (POST, the GET stream, DELETE) is routed
// by opening that id. body is nil for GET and DELETE.
func (h *Handler) serveLegacy(w http.ResponseWriter, r *http.Request, body []byte) error {
	var id []byte
	if body != nil {
		msg, err := translate.Peek(body)
		if err != nil {
			return writeRPCError(w, msg.ID, asRPCError(err))
		}
		id = msg.ID
		if msg.Method == "initialize" && r.Header.Get("Mcp-Session-Id") == "" {
			return h.initializeLegacy(w, r, body)
		}
	}
	sid := r.Header.Get("Mcp-Session-Id")
	if sid == "" {
		return writeRPCError(w, id, &translate.RPCError{
			HTTPStatus: http.StatusBadRequest, Code: codeSessionRequired,
			Message: "Bad Request: Mcp-Session-Id header is required",
		})
	}
	pin, err := legacy.OpenPin(h.keyring, legacy.GatewaySessionID(sid))
	var up *Upstream
	if err == nil {
		if pin.Principal == h.principal(r) {
			// Another principal's session id is as good as unknown.
			up = h.upstreamByURL(pin.Upstream)
		}
	} else if rs, rup := h.openReverse(r, sid); rs != nil {
		// Not a pin: a session the gateway holds itself in front of a
		// modern upstream (the reverse bridge, reverse.go).
		return h.serveReverse(w, r, body, rs, rup)
	}
	if up == nil {
		// Unknown, forged, sealed under a retired key, another principal's,
		// or pinned to an upstream no longer configured: the client must
		// initialize again.
		return writeRPCError(w, id, &translate.RPCError{
			HTTPStatus: http.StatusNotFound, Code: codeSessionNotFound,
			Message: "Session not found",
		})
	}
	if r.Method == http.MethodDelete && pin.Session == "" {
		// The upstream keeps no session: there is nothing to end.
		w.Header().Set("Allow", "GET, POST")
		w.WriteHeader(http.StatusMethodNotAllowed)
		return nil
	}
	setPlaceholder(r, "cell", cellPinned)
	hdr := upstreamHeader(r)
	if pin.Session != "" {
		hdr.Set("Mcp-Session-Id", string(pin.Session))
	}
	return h.forward(w, r, exchange{
		up: up, method: r.Method, header: hdr, body: body,
		answerSession: func(*Upstream, string) string { return sid },
	})
}

// initializeLegacy opens a new pinned session on an upstream chosen by the
// selection policy. The pin is made from the initialize *response*, so the
// gateway id names the upstream session that really exists.
func (h *Handler) initializeLegacy(w http.ResponseWriter, r *http.Request, body []byte) error {
	up := h.selectUpstream(r, w, speaksLegacy)
	if up == nil {
		if modernUp := h.selectUpstream(r, w, speaksModern); modernUp != nil {
			// Only modern upstreams: the gateway holds the session itself
			// (the reverse bridge, reverse.go).
			return h.initializeReverse(w, r, body, modernUp)
		}
		return writeRPCError(w, requestID(body), &translate.RPCError{
			HTTPStatus: http.StatusServiceUnavailable, Code: translate.InternalError,
			Message: "no upstream speaking the legacy MCP protocol is available",
		})
	}
	setPlaceholder(r, "cell", cellPinned)
	return h.forward(w, r, exchange{
		up: up, method: http.MethodPost, header: upstreamHeader(r), body: body,
		reselect:   func() *Upstream { return h.selectUpstream(r, w, speaksLegacy) },
		idempotent: true, // at worst an unused upstream session is left to expire
		answerSession: func(up *Upstream, upstreamSession string) string {
			return string(legacy.SealPin(h.keyring, legacy.Pin{
				Upstream:  up.URL,
				Session:   legacy.UpstreamSessionID(upstreamSession),
				Principal: h.principal(r),
				Issued:    time.Now(),
			}))
		},
	})
}
