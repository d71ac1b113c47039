package caddymodule

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyevents"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// Passive health, with reverse_proxy's knobs: every failure of an upstream
// — a connection it refused or dropped, an answer with an
// `unhealthy_status`, an answer slower than `unhealthy_latency` — is
// counted for `fail_duration`; when `max_fails` of them are counted at
// once, the upstream is skipped for new sessions and modern requests for
// `fail_duration`, and its era is probed again before it takes work.

// Health events: when health takes an upstream out of selection (a passive
// mark at max_fails, a failed era probe, health_fails failed active
// checks) the handler emits `unhealthy` through Caddy's events app, and
// when active checks take it back, `healthy`, as reverse_proxy does for
// its hosts. The event's data names the upstream: {"host": its URL}. The
// end of a passive mark (fail_duration passing) emits nothing: nothing
// happens then, the upstream is simply a candidate again.
const (
	upstreamHealthy   = "healthy"
	upstreamUnhealthy = "unhealthy"
)

// healthEvents emits the health events of one configuration's upstreams
// through the events app (zero: none is emitted).
type healthEvents struct {
	app *caddyevents.App
	ctx caddy.Context // the handler's: the events' origin module
}

// emit emits the event name (upstreamHealthy, upstreamUnhealthy) for u.
func (e healthEvents) emit(name string, u *Upstream) {
	if e.app != nil {
		e.app.Emit(e.ctx, name, map[string]any{"host": u.URL}) // not JSON: the events app takes a map
	}
}

// countFailure counts one passive failure of u (why says what, for the
// log) and takes u out of selection when it reaches max_fails.
func (h *Handler) countFailure(u *Upstream, why string, cause error) {
	now := time.Now()
	window := time.Duration(h.Health.Passive.FailDuration)
	s := u.state
	s.failMu.Lock()
	kept := s.failures[:0]
	for _, t := range s.failures {
		if now.UnixNano()-t < int64(window) {
			kept = append(kept, t)
		}
	}
	kept = append(kept, now.UnixNano())
	tripped := len(kept) >= max(h.Health.Passive.MaxFails, 1)
	if tripped {
		kept = kept[:0]
	}
	s.failures = kept
	s.failMu.Unlock()
	if !tripped {
		h.logger.Debug("upstream failure counted", zap.String("upstream", u.URL), zap.String("failure", why), zap.Error(cause))
		return
	}
	if u.markDown(now, window) {
		h.events.emit(upstreamUnhealthy, u)
	}
	h.logger.Warn("upstream marked unhealthy", zap.String("upstream", u.URL), zap.String("failure", why),
		zap.Int("max_fails", max(h.Health.Passive.MaxFails, 1)), zap.Duration("fail_duration", window), zap.Error(cause))
}

// observeAnswer counts the passive failures an upstream's answer shows: a
// status listed in unhealthy_status, or response headers that took longer
// than unhealthy_latency to arrive.
func (h *Handler) observeAnswer(u *Upstream, resp *http.Response, latency time.Duration) {
	for _, code := range h.Health.Passive.UnhealthyStatus {
		if caddyhttp.StatusCodeMatches(resp.StatusCode, code) {
			h.countFailure(u, "unhealthy_status", nil)
			return
		}
	}
	if h.Health.Passive.UnhealthyLatency > 0 && latency > time.Duration(h.Health.Passive.UnhealthyLatency) {
		h.countFailure(u, "unhealthy_latency", nil)
	}
}

// waitAny waits until one of chans is closed (true), or until ctx ends or
// bound fires (false).
func waitAny(ctx context.Context, bound <-chan time.Time, chans []<-chan struct{}) bool {
	if len(chans) == 1 {
		select {
		case <-chans[0]:
			return true
		case <-ctx.Done():
		case <-bound:
		}
		return false
	}
	one := make(chan struct{}, len(chans))
	stop := make(chan struct{})
	defer close(stop)
	for _, ch := range chans {
		go func() {
			select {
			case <-ch:
				one <- struct{}{}
			case <-stop:
			}
		}()
	}
	select {
	case <-one:
		return true
	case <-ctx.Done():
	case <-bound:
	}
	return false
}

// startHealthChecks checks every upstream (the static ones, and those the
// dynamic source returns at each round) now and then every
// health_interval, until ctx (the configuration) ends. Results feed the
// same up/down state that selection and passive health use.
func (h *Handler) startHealthChecks(ctx context.Context) {
	if h.Health.Active.Interval <= 0 {
		return
	}
	go func() {
		defer func() {
			if err := recover(); err != nil {
				h.logger.Error("active health checker panicked", zap.Any("error", err), zap.ByteString("stack", debug.Stack()))
			}
		}()
		ticker := time.NewTicker(time.Duration(h.Health.Active.Interval))
		defer ticker.Stop()
		for {
			h.checkAll(ctx)
			select {
			case <-ticker.C:
			case <-ctx.Done():
				return
			}
		}
	}()
}

// checkAll checks the upstreams concurrently and waits for every check.
func (h *Handler) checkAll(ctx context.Context) {
	var wg sync.WaitGroup
	ups := h.Upstreams
	if h.dynamic != nil {
		ups = append(slices.Clip(ups), h.dynamic.get(backgroundRequest(ctx))...)
	}
	for _, u := range ups {
		wg.Go(func() { h.checkUpstream(ctx, u) })
	}
	wg.Wait()
}

// checkUpstream runs one check of u and records its result. health_fails
// failed checks in a row mark u down until a later check passes (or, if
// checks stop, for two intervals); health_passes passing checks in a row
// take a down upstream back at once.
func (h *Handler) checkUpstream(ctx context.Context, u *Upstream) {
	timeout := time.Duration(h.Health.Active.Timeout)
	cctx, cancel := context.WithTimeout(ctx, timeout)
	err := h.healthCheck(cctx, u)
	cancel()
	if ctx.Err() != nil {
		return // the configuration was unloaded mid-check: no verdict
	}
	h.metrics.healthCheck(u.URL, err == nil)
	now := time.Now()
	wasUp := u.available(now)
	s := u.state
	downFor := 2*time.Duration(h.Health.Active.Interval) + timeout
	if err != nil {
		s.activePasses.Store(0)
		if n := s.activeFails.Add(1); int(n) < max(h.Health.Active.Fails, 1) {
			h.logger.Debug("upstream failed a health check", zap.String("upstream", u.URL),
				zap.Int32("in_a_row", n), zap.Int("health_fails", h.Health.Active.Fails), zap.Error(err))
			return
		}
		// probed again when it answers: it may come back as another server
		if u.markDown(now, downFor) {
			h.events.emit(upstreamUnhealthy, u)
		}
		if wasUp {
			h.logger.Warn("upstream failed its health check", zap.String("upstream", u.URL), zap.Error(err))
		}
		return
	}
	s.activeFails.Store(0)
	n := s.activePasses.Add(1)
	if wasUp {
		return
	}
	if int(n) < max(h.Health.Active.Passes, 1) {
		// Still down: keep it down until enough checks passed in a row.
		until := now.Add(downFor).UnixNano()
		if s.downUntil.Load() < until {
			s.downUntil.Store(until)
		}
		return
	}
	if s.downUntil.Swap(0) > now.UnixNano() {
		h.events.emit(upstreamHealthy, u)
	}
	h.logger.Info("upstream passed its health check", zap.String("upstream", u.URL))
}

// healthCheck asks u in the era it speaks: server/discover for a modern
// (or dual-era) upstream, initialize and ping for a legacy one. An `auto`
// upstream whose era is not known is probed instead (the probe asks both).
func (h *Handler) healthCheck(ctx context.Context, u *Upstream) error {
	eras := u.knownEras()
	if eras == 0 {
		// The probe requests may make (probeInBackground) shares this one.
		select {
		case <-h.probeInBackground(u):
		case <-ctx.Done():
			return fmt.Errorf("probing the era: %w", ctx.Err())
		}
		if u.knownEras() == 0 {
			return errors.New("the era probe failed")
		}
		return nil
	}
	if eras.has(speaksModern) {
		a, err := h.probeCall(ctx, u, discoverHeader(), discoverProbe)
		if err != nil {
			return err
		}
		if !a.msg.Get("result").IsObject() {
			return fmt.Errorf("server/discover: no result (HTTP %d)", a.status)
		}
		return nil
	}
	a, err := h.probeCall(ctx, u, http.Header{}, initializeProbe)
	if err != nil {
		return err
	}
	version := a.msg.Get("result.protocolVersion").String()
	if version == "" {
		return fmt.Errorf("initialize: no result (HTTP %d)", a.status)
	}
	hdr := http.Header{}
	hdr.Set("MCP-Protocol-Version", version)
	if a.session != "" {
		hdr.Set("Mcp-Session-Id", a.session)
		defer h.endProbeSession(ctx, u, a.session)
	}
	a, err = h.probeCall(ctx, u, hdr, pingProbe)
	if err != nil {
		return err
	}
	if !a.msg.Get("result").Exists() {
		return fmt.Errorf("ping: no result (HTTP %d: %s)", a.status, clipText(a.msg.Get("error.message").String(), 200))
	}
	return nil
}

// clipText shortens s to at most n bytes for a log line.
func clipText(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
