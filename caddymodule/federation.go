package caddymodule

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/hashicorp/golang-lru/v2/expirable"
	"github.com/tidwall/gjson"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/caddymodule/face"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/federate"
)

// A block with `servers` is federated: one handler per server (an inner
// handler, provisioned from the block's options with the server's
// upstreams and a keyring of its own, seal.Keyring.ForServer) does what
// a block of one server does, and the block's handler (the outer one)
// stands in front of them as one modern server:
//
//   - a modern request (federation_*.go) is routed to its server by what
//     its body names (a prefixed tool or prompt name, a resource URI, a
//     namespaced taskId), rewritten for that server and served by its
//     inner handler; a listing or server/discover is asked of every
//     server and merged;
//   - a legacy client is served by the outer handler's own reverse
//     bridge, in front of one modern upstream: the merged endpoint
//     itself, reached in-process (inprocess.go). Every cell per server
//     follows: a legacy server behind the forward bridge of its inner
//     handler, a modern one passed through.
//
// The outer handler's front door (origin, Host, body, forwarding
// signature, stopping) is the only one a request passes; the inner
// handlers are asked past it (route).

// federation is what the outer handler of a federated block holds.
type federation struct {
	servers     []*Handler // the inner handlers, in configuration order
	set         *federate.Set
	listTimeout time.Duration
	claims      *expirable.LRU[[16]byte, claimsEntry] // federation_resources.go
	lists       listCache                             // federation_cache.go
}

// federatedUpstream is the one upstream of a federated block's outer
// handler: its own merged endpoint, served in-process. The host is
// reserved (.invalid): nothing is ever sent there.
const federatedUpstream = "http://federated.mcp-gateway.invalid/mcp"

// provisionServers provisions one inner handler per server, then makes the
// outer handler's own upstream the merged endpoint. It runs first in
// Provision, on the options as configured.
func (h *Handler) provisionServers(ctx caddy.Context) error {
	servers := make([]federate.Server, len(h.Servers))
	for i, s := range h.Servers {
		servers[i] = federate.Server{Name: federate.ServerName(s.Name), Prefix: s.effectivePrefix()}
		if s.Tools != nil {
			servers[i].Tools = federate.Filter{Include: s.Tools.Include, Exclude: s.Tools.Exclude}
		}
	}
	set, err := federate.NewSet(servers)
	if err != nil {
		return fmt.Errorf("servers: %w", err)
	}
	f := &federation{set: set, listTimeout: time.Duration(h.Federation.ListTimeout), claims: newClaimsCache(), lists: newListCache()}
	if f.listTimeout <= 0 {
		f.listTimeout = defaultListTimeout
	}
	for _, s := range h.Servers {
		in := h.innerFor(s)
		if err := in.Provision(ctx); err != nil {
			return fmt.Errorf("server %s: %w", s.Name, err)
		}
		if err := in.Validate(); err != nil {
			return fmt.Errorf("server %s: %w", s.Name, err)
		}
		f.servers = append(f.servers, in)
	}
	h.fed = f
	h.Upstreams = []*Upstream{{URL: federatedUpstream, Era: eraModern}}
	// Health checks are the servers': the merged endpoint is always
	// there, and a slow or failing server's answers, passed through to it
	// (the multi-turn face's route), must not take it out of selection
	// for the legacy clients' sessions.
	h.Health.Active = ActiveHealthChecks{}
	h.Health.Passive.UnhealthyStatus, h.Health.Passive.UnhealthyLatency = nil, 0
	return nil
}

// innerFor is the inner handler of server s: the block's options, the
// server's upstreams and their options, no faces (the block serves them,
// over the merged catalog).
func (h *Handler) innerFor(s *Server) *Handler {
	in := &Handler{
		Upstreams: s.Upstreams, DynamicUpstreamsRaw: s.DynamicUpstreamsRaw, DynamicEndpoint: s.DynamicEndpoint,
		DynamicRefuse: s.DynamicRefuse, SelectionPolicyRaw: s.SelectionPolicyRaw, TransportRaw: s.TransportRaw,
		Health: h.Health, Fleet: h.Fleet, Security: h.Security, Streams: h.Streams,
		Parking: h.Parking, Sessions: h.Sessions, Tasks: h.Tasks,
		UpstreamAuth: cmp.Or(s.UpstreamAuth, h.UpstreamAuth),
		serverName:   s.Name,
	}
	return in
}

// serverContextKey carries, in the context of a request a server's inner
// handler serves, the request the block received and its body: what a
// relay to another instance sends (the other instance routes it to the
// same server again).
type serverContextKey struct{}

// blockRequest is the request a federated block received.
type blockRequest struct {
	r    *http.Request
	body []byte
	ids  *taskIDWriter // puts the server's taskIds in the block's namespace; nil when none may come
}

// blockRequestOf returns the request a federated block received, when r is
// one of its servers' rewrite of it.
func blockRequestOf(r *http.Request) (blockRequest, bool) {
	b, ok := r.Context().Value(serverContextKey{}).(blockRequest)
	return b, ok
}

// withBlockRequest marks ctx as serving, for a server, the block's request
// r whose body is body, answered through ids (nil when none).
func withBlockRequest(ctx context.Context, r *http.Request, body []byte, ids *taskIDWriter) context.Context {
	return context.WithValue(ctx, serverContextKey{}, blockRequest{r: r, body: body, ids: ids})
}

// serveInProcess serves a request of the block's own reverse bridge (a
// legacy client's, turned modern) on the merged endpoint: past the front
// door, which the client's request passed. With tracing on, it is a span
// under the client's request's, naming the server it reached.
func (h *Handler) serveInProcess(w http.ResponseWriter, r *http.Request) {
	r, rt := withRoute(r)
	rt.era = eraModern
	r, span := startSpan(r) // traces.go; nil without tracing
	sw := &face.StatusWriter{ResponseWriter: w}
	var body []byte
	defer func() { h.endSpan(span, r, rt, sw.Status, body) }() // an aborted answer's too
	body, rerr := readBody(sw, r, h.Security.MaxRequestBody)
	if rerr != nil {
		_ = jsonrpc.WriteError(sw, nil, rerr)
		return
	}
	rt.method = clipText(gjson.GetBytes(body, "method").String(), translate.MaxMethodLength)
	_ = h.serveFederated(sw, r, body)
}
