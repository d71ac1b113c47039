package caddymodule

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime/debug"
	"sync"
	"time"

	"go.uber.org/zap"
)

// startHealthChecks checks every upstream now and then every
// health_interval, until ctx (the configuration) ends. Results feed the
// same up/down state that selection and passive health use.
func (h *Handler) startHealthChecks(ctx context.Context) {
	if h.HealthInterval <= 0 {
		return
	}
	go func() {
		defer func() {
			if err := recover(); err != nil {
				h.logger.Error("active health checker panicked", zap.Any("error", err), zap.ByteString("stack", debug.Stack()))
			}
		}()
		ticker := time.NewTicker(time.Duration(h.HealthInterval))
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
	for _, u := range h.Upstreams {
		wg.Go(func() { h.checkUpstream(ctx, u) })
	}
	wg.Wait()
}

// checkUpstream runs one check of u and records its result: a failed
// upstream is down until a later check passes (or, if checks stop, for two
// intervals), a passing one is up at once.
func (h *Handler) checkUpstream(ctx context.Context, u *Upstream) {
	timeout := time.Duration(h.HealthTimeout)
	cctx, cancel := context.WithTimeout(ctx, timeout)
	err := h.healthCheck(cctx, u)
	cancel()
	if ctx.Err() != nil {
		return // the configuration was unloaded mid-check: no verdict
	}
	h.metrics.healthCheck(u.URL, err == nil)
	now := time.Now()
	wasUp := u.available(now)
	if err != nil {
		u.state.downUntil.Store(now.Add(2*time.Duration(h.HealthInterval) + timeout).UnixNano())
		u.state.eras.Store(0) // probed again when it answers: it may come back as another server
		if wasUp {
			h.logger.Warn("upstream failed its health check", zap.String("upstream", u.URL), zap.Error(err))
		}
		return
	}
	u.state.downUntil.Store(0)
	if !wasUp {
		h.logger.Info("upstream passed its health check", zap.String("upstream", u.URL))
	}
}

// healthCheck asks u in the era it speaks: server/discover for a modern
// (or dual-era) upstream, initialize and ping for a legacy one. An `auto`
// upstream whose era is not known is probed instead (the probe asks both).
func (h *Handler) healthCheck(ctx context.Context, u *Upstream) error {
	eras := u.knownEras()
	if eras == 0 {
		probed, err := h.probe(ctx, u)
		if err != nil {
			return err
		}
		u.state.eras.Store(uint32(probed))
		return nil
	}
	if eras.has(speaksModern) {
		res, _, err := h.probeCall(ctx, u, discoverHeader(), discoverProbe)
		if err != nil {
			return err
		}
		if !res.Get("result").IsObject() {
			return errors.New("server/discover: no result")
		}
		return nil
	}
	res, sid, err := h.probeCall(ctx, u, http.Header{}, initializeProbe)
	if err != nil {
		return err
	}
	version := res.Get("result.protocolVersion").String()
	if version == "" {
		return errors.New("initialize: no result")
	}
	hdr := http.Header{}
	hdr.Set("MCP-Protocol-Version", version)
	if sid != "" {
		hdr.Set("Mcp-Session-Id", sid)
		defer h.endProbeSession(ctx, u, sid)
	}
	res, _, err = h.probeCall(ctx, u, hdr, pingProbe)
	if err != nil {
		return err
	}
	if !res.Get("result").Exists() {
		return fmt.Errorf("ping: no result (%s)", clipText(res.Get("error.message").String(), 200))
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
