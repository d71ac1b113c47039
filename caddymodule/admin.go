package caddymodule

import (
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/legacy"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/forward"
)

func init() {
	caddy.RegisterModule(adminAPI{})
}

// adminAPI is a read-only admin endpoint for the MCP gateway:
//
//	GET /mcp_gateway/upstreams  the upstreams: probed era, passive health, sessions,
//	                            the federated block's server each is of
//	GET /mcp_gateway/sessions   the forward bridge's upstream sessions per upstream
//	GET /mcp_gateway/parked     one entry per call parked here, holding its stream
//	                            ("holding": "stream") or, resume on, nothing
//	                            ("holding": "nothing", "resumable": true)
//	                            (no principals, ids or payloads)
//	GET /mcp_gateway/tasks      one entry per task the forward bridge holds (no taskIds,
//	                            principals, arguments or results: salted digests instead)
//
// It reads only process-wide state, never a handler instance: the admin
// server is rebuilt before the apps on every config load.
type adminAPI struct{}

// CaddyModule returns the Caddy module information.
func (adminAPI) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "admin.api.mcp_gateway",
		New: func() caddy.Module { return new(adminAPI) },
	}
}

// Routes returns the admin routes.
func (a adminAPI) Routes() []caddy.AdminRoute {
	return []caddy.AdminRoute{
		{Pattern: "/mcp_gateway/upstreams", Handler: caddy.AdminHandlerFunc(a.upstreams)},
		{Pattern: "/mcp_gateway/sessions", Handler: caddy.AdminHandlerFunc(a.sessions)},
		{Pattern: "/mcp_gateway/parked", Handler: caddy.AdminHandlerFunc(a.parked)},
		{Pattern: "/mcp_gateway/tasks", Handler: caddy.AdminHandlerFunc(a.tasks)},
	}
}

// upstreamInfo is one entry of /mcp_gateway/upstreams.
type upstreamInfo struct {
	URL       string     `json:"url"`
	Era       string     `json:"era"` // as configured, else as probed: legacy, modern, dual, or unknown (not probed yet)
	Healthy   bool       `json:"healthy"`
	DownUntil *time.Time `json:"down_until,omitempty"`
	Sessions  int        `json:"bridge_sessions"`
	// Server is the name of the federated block's server the upstream
	// belongs to (absent for a block without servers).
	Server string `json:"server,omitempty"`
}

func (a adminAPI) upstreams(w http.ResponseWriter, r *http.Request) error {
	if err := onlyGET(r); err != nil {
		return err
	}
	stats := bridgeStats()
	var out []upstreamInfo
	upstreamStates.Range(func(_, v any) bool {
		s := v.(*upstreamState)
		if s.url == federatedUpstream {
			return true // a federated block's merged endpoint, in-process
		}
		era := eraSet(s.configured.Load())
		if era == 0 {
			era = eraSet(s.eras.Load())
		}
		server, _ := s.server.Load().(string)
		info := upstreamInfo{URL: s.url, Era: era.String(), Healthy: true, Sessions: stats[s.url].Open, Server: server}
		if until := s.downUntil.Load(); until > time.Now().UnixNano() {
			t := time.Unix(0, until)
			info.Healthy, info.DownUntil = false, &t
		}
		out = append(out, info)
		return true
	})
	slices.SortFunc(out, func(x, y upstreamInfo) int { return strings.Compare(x.URL, y.URL) })
	return writeJSON(w, out)
}

func (a adminAPI) sessions(w http.ResponseWriter, r *http.Request) error {
	if err := onlyGET(r); err != nil {
		return err
	}
	return writeJSON(w, bridgeStats())
}

func (a adminAPI) parked(w http.ResponseWriter, r *http.Request) error {
	return writeFromBridges(w, r, (*forward.Bridge).ParkedCalls)
}

func (a adminAPI) tasks(w http.ResponseWriter, r *http.Request) error {
	return writeFromBridges(w, r, (*forward.Bridge).TaskList)
}

// writeFromBridges answers a GET with the entries list gives of every
// forward bridge of the process, gathered in one JSON array ([] for none).
func writeFromBridges[T any](w http.ResponseWriter, r *http.Request, list func(*forward.Bridge) []T) error {
	if err := onlyGET(r); err != nil {
		return err
	}
	out := []T{}
	bridges.Range(func(_, v any) bool {
		out = append(out, list(v.(*bridgeState).bridge)...)
		return true
	})
	return writeJSON(w, out)
}

func bridgeStats() map[string]legacy.UpstreamStats {
	out := map[string]legacy.UpstreamStats{}
	bridges.Range(func(_, v any) bool {
		for k, st := range v.(*bridgeState).pool.StatsByUpstream() {
			out[k] = st
		}
		return true
	})
	return out
}

func onlyGET(r *http.Request) error {
	if r.Method != http.MethodGet {
		return caddy.APIError{HTTPStatus: http.StatusMethodNotAllowed, Err: errMethodNotAllowed}
	}
	return nil
}

var errMethodNotAllowed = errors.New("method not allowed: use GET")

func writeJSON(w http.ResponseWriter, v any) error {
	w.Header().Set("Content-Type", "application/json")
	return json.NewEncoder(w).Encode(v)
}

// Interface guards
var _ caddy.AdminRouter = (*adminAPI)(nil)
