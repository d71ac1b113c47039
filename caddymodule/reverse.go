package caddymodule

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/legacy"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/sse"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/reverse"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/seal"
)

// The reverse bridge: legacy clients in front of modern-only upstreams. The
// gateway terminates initialize, holds the session in a sealed id
// (seal.ClientSession), sends every request upstream statelessly and
// turns input_required rounds into in-line requests (translate.Reverse).

// reverses holds the reverse bridge: rounds waiting for a client's answer,
// the per-instance session facts (log levels, deleted sessions) and the
// server/discover cache outlive a config reload.
var reverses = caddy.NewUsagePool()

const reverseKey = "reverse"

// reverseState is the UsagePool value.
type reverseState struct {
	rv     *reverse.Bridge
	client *http.Client
}

// Destruct implements caddy.Destructor.
func (s *reverseState) Destruct() error {
	s.client.CloseIdleConnections()
	return nil
}

// provisionReverse takes (or makes) the shared reverse bridge and builds
// this handler's options from base (setDefaults), which seal and serve the
// sessions it opens.
func (h *Handler) provisionReverse(base reverse.Options) error {
	val, _, err := reverses.LoadOrNew(reverseKey, func() (caddy.Destructor, error) {
		client := newUpstreamClient(64)
		return &reverseState{rv: reverse.New(client, reverse.DefaultOptions()), client: client}, nil
	})
	if err != nil {
		return err
	}
	h.reverse = val.(*reverseState).rv
	h.reverseOpts = h.reverseOptions(base)
	return nil
}

// principal is who is calling, as requests bind it: the hash of the
// principal expression evaluated for r, or, for a request another instance
// forwarded here, the hash that instance evaluated (it ran the
// authentication; this instance may have skipped its own for a verified
// forwarded request, see acceptForwarded).
func (h *Handler) principal(r *http.Request) [16]byte {
	if f, ok := forwardedOf(r); ok {
		return f.principal
	}
	return translate.PrincipalHash(h.principalValue(r))
}

// principalValue evaluates the principal expression for r.
func (h *Handler) principalValue(r *http.Request) string {
	if repl, ok := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer); ok {
		return repl.ReplaceAll(h.Security.Principal, "")
	}
	return h.Security.Principal
}

// initializeReverse answers a legacy initialize with a gateway-held session
// in front of the modern upstream up, or of another one when up cannot be
// reached (up is then marked down, as for the other cells' new sessions).
func (h *Handler) initializeReverse(w http.ResponseWriter, r *http.Request, l *learned, up *Upstream) error {
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	defer h.streams.add(cancel)()
	msg, body := l.msg, l.body
	var resp []byte
	var sid seal.GatewaySessionID
	var rerr *jsonrpc.RPCError
	f := h.newFailover(w, r, speaksModern, "open a session", true)
	for {
		resp, sid, rerr = h.reverse.Initialize(ctx, reverse.InitRequest{
			Target: up.target, Principal: h.principal(r), Header: h.bridgedHeader(r), ID: msg.ID, Body: body, Options: h.reverseOpts,
		})
		// The session's server/discover did not reach the upstream, or
		// got no answer (it is read-only): open the session on another.
		if rerr == nil || ctx.Err() != nil || !legacy.Refused(rerr.Cause) && !legacy.Dropped(rerr.Cause) {
			break
		}
		next := f.next(up, rerr.Cause)
		if next == nil {
			break
		}
		up = next
	}
	if rerr != nil {
		served(r, translate.Served{Outcome: translate.OutcomeError})
		h.logUpstreamCause(up.URL, rerr.Cause)
		return jsonrpc.WriteError(w, msg.ID, rerr)
	}
	served(r, translate.Served{Outcome: translate.OutcomeComplete})
	w.Header().Set("Mcp-Session-Id", string(sid))
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(resp)
	return nil
}

// serveReverse serves a request, notification, client answer, GET or
// DELETE of a gateway-held session in front of up, the modern upstream its
// session id names. l.body is nil for GET and DELETE.
func (h *Handler) serveReverse(w http.ResponseWriter, r *http.Request, l *learned, up *Upstream) error {
	s := l.held
	switch r.Method {
	case http.MethodDelete:
		if rerr := h.reverse.Delete(s); rerr != nil {
			return jsonrpc.WriteError(w, nil, rerr)
		}
		w.WriteHeader(http.StatusOK)
		return nil
	case http.MethodGet:
		return h.listenReverse(w, r, s)
	}
	if l.msg.Kind == jsonrpc.KindResponse {
		// An answer to an in-line request this instance sent (decide
		// relays those of other instances).
		if rerr := h.reverse.Answer(s, l.body); rerr != nil {
			return jsonrpc.WriteError(w, nil, rerr)
		}
		w.WriteHeader(http.StatusAccepted)
		return nil
	}
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	defer h.calls.add(cancel)() // a call survives a reload
	sink := h.newSink(w, ctx)
	defer sink.close()
	res := h.reverse.Serve(ctx, s, reverse.Request{Message: l.msg, Header: h.bridgedHeader(r)}, sink)
	served(r, res)
	h.logUpstreamCause(up.URL, res.Cause)
	return nil
}

// listenReverse serves the standalone GET stream of a gateway-held session:
// list-changed and resource-updated notifications from an upstream
// subscriptions/listen.
func (h *Handler) listenReverse(w http.ResponseWriter, r *http.Request, s *reverse.Session) error {
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	defer h.streams.add(cancel)()
	var sw *sse.Writer
	err := h.reverse.Listen(ctx, s, h.bridgedHeader(r), func() {
		sse.SetHeaders(w.Header())
		w.WriteHeader(http.StatusOK)
		sw = sse.NewWriter(w)
		sw.WriteTimeout(time.Duration(h.Streams.WriteTimeout))
		_ = http.NewResponseController(w).Flush()
		sw.KeepAlive(time.Duration(h.Streams.KeepAliveInterval))
	}, func(msg []byte) error {
		return sw.WriteEvent(sse.Event{Data: msg, HasData: true})
	})
	if sw != nil {
		sw.Close()
		return nil
	}
	var rerr *jsonrpc.RPCError
	switch {
	case errors.Is(err, reverse.ErrSessionStreamOpen):
		return jsonrpc.WriteError(w, nil, &jsonrpc.RPCError{HTTPStatus: http.StatusConflict, Code: jsonrpc.InvalidRequest,
			Message: "Conflict: only one GET stream is allowed per session"})
	case errors.As(err, &rerr):
		h.logUpstreamCause(s.Upstream, rerr.Cause)
		return jsonrpc.WriteError(w, nil, rerr)
	}
	// The upstream offers no notifications: there is no stream.
	w.Header().Set("Allow", "POST, DELETE")
	w.WriteHeader(http.StatusMethodNotAllowed)
	return nil
}
