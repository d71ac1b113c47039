package caddymodule

import (
	"context"
	"net/http"
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
