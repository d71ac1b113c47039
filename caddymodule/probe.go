package caddymodule

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"runtime/debug"
	"time"

	"github.com/tidwall/gjson"
	"go.uber.org/zap"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/legacy"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
)

// maxProbeResponse bounds what the gateway reads of a probe's answer.
const maxProbeResponse = 1 << 20

// probeInBackground starts the era probe of u unless one is in flight, and
// returns a channel closed when that probe ends. The probe runs off the
// request path, bounded by health_timeout and by this configuration's
// life; no lock is held while it runs, and no request waits on it unless it
// chooses to (candidates). Concurrent callers share one probe.
func (h *Handler) probeInBackground(u *Upstream) <-chan struct{} {
	s := u.state
	s.probeMu.Lock()
	defer s.probeMu.Unlock()
	if s.probing != nil {
		return s.probing
	}
	done := make(chan struct{})
	s.probing = done
	go func() {
		defer func() {
			if err := recover(); err != nil {
				h.logger.Error("era probe panicked", zap.Any("error", err), zap.ByteString("stack", debug.Stack()))
			}
			s.probeMu.Lock()
			s.probing = nil
			s.probeMu.Unlock()
			close(done)
		}()
		ctx, cancel := context.WithTimeout(h.ctx, time.Duration(h.Health.Active.Timeout))
		defer cancel()
		h.probeEra(ctx, u)
	}()
	return done
}

// probeEra probes u and records its eras; an upstream that does not answer
// the probe is skipped for fail_duration, then probed again.
func (h *Handler) probeEra(ctx context.Context, u *Upstream) {
	if u.knownEras() != 0 {
		return
	}
	e, err := h.probe(ctx, u)
	if err != nil {
		if h.ctx.Err() != nil {
			return // the configuration was unloaded mid-probe: no verdict
		}
		if u.markDown(time.Now(), time.Duration(h.Health.Passive.FailDuration)) {
			h.events.emit(upstreamUnhealthy, u)
		}
		h.logger.Warn("probing upstream era failed", zap.String("upstream", u.URL), zap.Error(err))
		return
	}
	u.state.eras.Store(uint32(e))
	h.logger.Info("probed upstream era", zap.String("upstream", u.URL), zap.Stringer("era", e))
}

// probeLegacyVersion is the version a probe's initialize asks for (the
// newest of translate.LegacyVersions).
const probeLegacyVersion = "2025-11-25"

// The requests the gateway asks upstreams with (era probes, health checks).
const (
	discoverProbe = `{"jsonrpc":"2.0","id":"gateway-probe","method":"server/discover","params":{"_meta":{` +
		`"io.modelcontextprotocol/protocolVersion":"` + translate.ModernVersion + `",` +
		`"io.modelcontextprotocol/clientCapabilities":{},` +
		`"io.modelcontextprotocol/clientInfo":{"name":"caddy-mcp-gateway","version":"probe"}}}}`
	initializeProbe = `{"jsonrpc":"2.0","id":"gateway-probe","method":"initialize","params":{` +
		`"protocolVersion":"` + probeLegacyVersion + `","capabilities":{},` +
		`"clientInfo":{"name":"caddy-mcp-gateway","version":"probe"}}}`
	pingProbe = `{"jsonrpc":"2.0","id":"gateway-probe","method":"ping"}`
)

// discoverHeader is the header of a server/discover probe.
func discoverHeader() http.Header {
	hdr := http.Header{}
	hdr.Set("MCP-Protocol-Version", translate.ModernVersion)
	hdr.Set("Mcp-Method", "server/discover")
	return hdr
}

// probe asks u with `server/discover` (modern) and with `initialize`
// (legacy); a dual-era server answers both.
func (h *Handler) probe(ctx context.Context, u *Upstream) (eraSet, error) {
	var eras eraSet
	discover, err := h.probeCall(ctx, u, discoverHeader(), discoverProbe)
	if err != nil {
		return 0, err
	}
	for _, v := range discover.msg.Get("result.supportedVersions").Array() {
		if v.String() == translate.ModernVersion {
			eras |= speaksModern
		}
	}

	initialize, err := h.probeCall(ctx, u, http.Header{}, initializeProbe)
	if err != nil {
		return 0, err
	}
	if initialize.msg.Get("result.protocolVersion").Exists() {
		eras |= speaksLegacy
		if initialize.session != "" {
			h.endProbeSession(ctx, u, initialize.session)
		}
	}
	if eras == 0 {
		return 0, neitherEraError(discover.status, initialize.status)
	}
	return eras, nil
}

// neitherEraError says that an upstream answered neither probe, with the
// HTTP statuses it answered them with. 404 to both is most often a URL
// without the MCP endpoint's path (http://host:port instead of .../mcp).
func neitherEraError(discover, initialize int) error {
	const msg = "the upstream answered neither server/discover nor initialize"
	switch {
	case discover == http.StatusNotFound && initialize == http.StatusNotFound:
		return fmt.Errorf("%s (HTTP 404 to both): check the MCP endpoint's path in the upstream URL (such as /mcp)", msg)
	case discover == initialize:
		return fmt.Errorf("%s (HTTP %d to both)", msg, discover)
	default:
		return fmt.Errorf("%s (HTTP %d to server/discover, %d to initialize)", msg, discover, initialize)
	}
}

// probeAnswer is what a probe request was answered.
type probeAnswer struct {
	msg     gjson.Result // the JSON-RPC response, or none
	session string       // the Mcp-Session-Id header
	status  int          // the HTTP status
}

// probeCall POSTs one JSON-RPC request and returns its answer. An HTTP
// error status is not an error here: the body may still be a JSON-RPC
// error that tells the era.
func (h *Handler) probeCall(ctx context.Context, u *Upstream, hdr http.Header, body string) (probeAnswer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.URL, bytes.NewReader([]byte(body)))
	if err != nil {
		return probeAnswer{}, err
	}
	req.Header = hdr
	h.setProbeAuthorization(req.Header)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := h.client.Do(req)
	if err != nil {
		return probeAnswer{}, fmt.Errorf("probing %s: %w", u.URL, err)
	}
	defer resp.Body.Close()
	a := probeAnswer{status: resp.StatusCode}
	msg, err := readResponseMessage(resp, "gateway-probe")
	if err != nil {
		// Not JSON-RPC at all (an HTML 404, say): this era is not spoken.
		return a, nil
	}
	a.msg, a.session = msg, resp.Header.Get("Mcp-Session-Id")
	return a, nil
}

// endProbeSession deletes the session a probe's initialize opened.
func (h *Handler) endProbeSession(ctx context.Context, u *Upstream, sid string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, u.URL, nil)
	if err != nil {
		return
	}
	req.Header.Set("Mcp-Session-Id", sid)
	h.setProbeAuthorization(req.Header)
	if resp, err := h.client.Do(req); err == nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxProbeResponse))
		resp.Body.Close()
	}
}

// readResponseMessage reads the JSON-RPC response with the given string id
// from a JSON or SSE answer, reading at most maxProbeResponse bytes.
func readResponseMessage(resp *http.Response, id string) (gjson.Result, error) {
	limited := *resp
	limited.Body = io.NopCloser(io.LimitReader(resp.Body, maxProbeResponse))
	rd := legacy.NewMessageReader(&limited, maxProbeResponse)
	for {
		m, err := rd.Next()
		if err != nil {
			return gjson.Result{}, err
		}
		if !rd.IsStream() || m.Kind == jsonrpc.KindResponse && gjson.ParseBytes(m.ID).String() == id {
			return gjson.ParseBytes(m.Raw), nil
		}
	}
}
