package caddymodule

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/forward"
)

// Upstream is one MCP server behind the gateway.
type Upstream struct {
	// The URL of the server's MCP endpoint, for example
	// `http://127.0.0.1:3001/mcp`. Scheme http or https. Required.
	URL string `json:"url,omitempty"`

	// The protocol era the server speaks: `legacy` (2025-11-25 and earlier,
	// with `initialize` and sessions), `modern` (2026-07-28, stateless), or
	// `auto`: the gateway asks the server with `server/discover` and falls
	// back to `initialize`, caches the answer, and asks again after the
	// upstream fails. A server answering both is dual-era and receives each
	// client in the client's own era. Default: `auto`.
	Era string `json:"era,omitempty"`

	// How the gateway, in front of this server when it speaks legacy,
	// gathers the questions (elicitation, sampling, roots) the server asks
	// in-line in one call, before it answers the modern client
	// `input_required`. `learn`: the first round of a tool, prompt or
	// resource waits `gather_window` for sibling questions; one that asked
	// a single question then takes the questions already there, without
	// waiting, on its later rounds, while one that showed it asks several at
	// once (two or more in a round, or one arriving while its call waited
	// for the client) keeps waiting `gather_window`. `always`: every round
	// waits `gather_window`, for a server whose tools ask one question at
	// a time on some calls and several at once on others. Default: `learn`.
	Gather string `json:"gather,omitempty"`

	// When each session the gateway opens on this server for modern
	// clients' calls (when the server speaks legacy) opens the session's
	// standalone GET stream, where a legacy server may send requests and
	// notifications outside any call. `learn`: a call of a tool, prompt or
	// resource not seen asking yet opens it, as a legacy client would, so
	// that questions the server sends there still reach the client; one
	// that asked on its call's own stream, and never on the GET stream,
	// opens none (servers built on the go-sdk's `req.Session`, the
	// TypeScript SDK's `extra.sendRequest` or the Python SDK's `ctx.elicit`
	// ask there); one that asked on the GET stream opens it for good. In
	// front of a resumable server this saves a connection and a GET per
	// call (a call that parks holding nothing closes its session's
	// stream). `on` opens it with every session and keeps it: for a server
	// whose tool asks on its own stream on some calls and on the GET stream
	// on others. `off` never opens it — one connection and one goroutine
	// less per session, half of what a held parked call holds — for a
	// server that asks on the call's own stream; in front of one that does
	// not, a call waiting for such a question never gets it.
	// `subscriptions/listen` always opens one. Default: `learn`.
	GetStream string `json:"get_stream,omitempty"`

	// Whether a modern client's call to this server, when it speaks legacy,
	// parks without holding anything when the server's streams are
	// resumable (2025-11-25: the call's stream carries event ids, and a GET
	// with Last-Event-ID replays what followed — go-sdk and TypeScript SDK
	// servers configured with an event store). `on`: at `input_required`
	// the gateway closes the call's stream and its session's GET stream,
	// and seals what the retry needs into the `requestState`; the retry, on
	// any instance sharing `state_key`, posts the answers and reopens the
	// stream with Last-Event-ID. The call survives the instance that
	// parked it. Until the state is used there or expires, the parking
	// instance keeps a place toward `max_parked` and
	// `max_parked_per_principal` and the session (no stream open, still
	// counted by `max_sessions_per_principal`), which a retry reaching it
	// goes on with; the admin API's `/mcp_gateway/parked` lists the call
	// there with `"holding": "nothing"` and `"resumable": true`. `off`, or
	// a server whose events carry no ids: the call parks holding its
	// stream (`"holding": "stream"`). Default: `on`.
	Resume string `json:"resume,omitempty"`

	// Whether legacy clients' `tools/call`, sent to this server when it
	// speaks modern (the reverse bridge), declare the 2026-07-28 Tasks
	// extension (`io.modelcontextprotocol/tasks`) in their per-request
	// capabilities. `on`: the server may answer with a task, which the
	// gateway follows for the legacy client (polling `tasks/get`, asking
	// an `input_required` task's questions in-line and answering them with
	// `tasks/update`, cancelling it with `tasks/cancel` when the client
	// cancels) until the task ends or `max_task_wait` passes; the client
	// sees one blocking call. `off`: no task is declared, so the server
	// runs the call without one, or refuses a tool that needs a task
	// (`-32021`, relayed to the client: a 2025 client gets `-32600` with
	// the server's message). Default: `on`.
	Tasks string `json:"tasks,omitempty"`

	state  *upstreamState
	proxy  *reverseproxy.Upstream // what the selection policy sees
	target translate.Target       // what the bridges' requests to it carry (guard.go)
}

// era values of Upstream.Era.
const (
	eraAuto   = "auto"
	eraLegacy = "legacy"
	eraModern = "modern"
)

// eraSet is the set of protocol eras an upstream speaks.
type eraSet uint8

const (
	speaksLegacy eraSet = 1 << iota
	speaksModern
)

func (e eraSet) has(o eraSet) bool { return e&o != 0 }

func (e eraSet) String() string {
	switch e {
	case speaksLegacy:
		return eraLegacy
	case speaksModern:
		return eraModern
	case speaksLegacy | speaksModern:
		return "dual"
	}
	return "unknown"
}

// upstreamState is what the gateway learns about an upstream: its eras (when
// probed) and its health, passive and active. It is shared by every
// configuration that names the same URL (a static upstream, or an address
// a dynamic source returned) and survives config reloads.
type upstreamState struct {
	url       string
	downUntil atomic.Int64 // unix nanoseconds; 0 = up

	eras       atomic.Uint32
	configured atomic.Uint32 // the eras the last provisioned config names; 0 for auto
	// server is the name of the federated block's server the last
	// provisioned config lists it under (a string; "" for a block
	// without servers), for the admin API.
	server atomic.Value

	// probeMu guards probing only, never a probe: probing is closed when
	// the era probe in flight (probe.go) ends, nil when none is.
	probeMu sync.Mutex
	probing chan struct{}

	// failMu guards failures, the times (unix nanoseconds) of the passive
	// failures counted within the last fail_duration (health.go).
	failMu   sync.Mutex
	failures []int64

	// Consecutive results of active health checks (health.go).
	activePasses, activeFails atomic.Int32
}

// Destruct implements caddy.Destructor.
func (s *upstreamState) Destruct() error { return nil }

// upstreamStates holds the state of every upstream named by a loaded config.
var upstreamStates = caddy.NewUsagePool()

// checkURL reports what is wrong with the upstream's URL, if anything.
func (u *Upstream) checkURL() error {
	if u.URL == "" {
		return errors.New("upstream URL is required")
	}
	parsed, err := url.Parse(u.URL)
	if err != nil {
		return fmt.Errorf("upstream %q: %w", u.URL, err)
	}
	if parsed.Scheme != "http" && parsed.Scheme != "https" {
		return fmt.Errorf("upstream %q: scheme must be http or https", u.URL)
	}
	if parsed.Host == "" {
		return fmt.Errorf("upstream %q: no host", u.URL)
	}
	if parsed.User != nil || parsed.Fragment != "" {
		return fmt.Errorf("upstream %q: user info and fragments are not allowed", u.URL)
	}
	return nil
}

// gather values of Upstream.Gather.
const (
	gatherLearn  = "learn"
	gatherAlways = "always"
)

// checkGather reports whether g is a valid value of Upstream.Gather.
func checkGather(g string) error {
	switch g {
	case "", gatherLearn, gatherAlways:
		return nil
	}
	return fmt.Errorf("unknown gather %q (want learn or always)", g)
}

// checkOnOff reports whether v is "", "on" or "off".
func checkOnOff(name, v string) error {
	switch v {
	case "", "on", "off":
		return nil
	}
	return fmt.Errorf("unknown %s %q (want on or off)", name, v)
}

// getStreamMode is the translate value of Upstream.GetStream.
func getStreamMode(v string) translate.GetStream {
	switch v {
	case "on":
		return translate.GetStreamOn
	case "off":
		return translate.GetStreamOff
	}
	return translate.GetStreamLearn
}

// checkGetStream reports whether v is a valid value of Upstream.GetStream.
func checkGetStream(v string) error {
	switch v {
	case "", "learn", "on", "off":
		return nil
	}
	return fmt.Errorf("unknown get_stream %q (want learn, on or off)", v)
}

// checkEra reports whether era is a valid value of Upstream.Era.
func checkEra(era string) error {
	switch era {
	case "", eraAuto, eraLegacy, eraModern:
		return nil
	}
	return fmt.Errorf("unknown era %q (want auto, legacy or modern)", era)
}

// provision checks u and takes its process-wide state; server is the name
// of the federated block's server u belongs to ("" for none).
func (u *Upstream) provision(server string) error {
	if err := u.checkURL(); err != nil {
		return err
	}
	if err := checkEra(u.Era); err != nil {
		return fmt.Errorf("upstream %q: %w", u.URL, err)
	}
	if u.Era == "" {
		u.Era = eraAuto
	}
	if err := checkGather(u.Gather); err != nil {
		return fmt.Errorf("upstream %q: %w", u.URL, err)
	}
	if err := checkGetStream(u.GetStream); err != nil {
		return fmt.Errorf("upstream %q: %w", u.URL, err)
	}
	if err := checkOnOff("tasks", u.Tasks); err != nil {
		return fmt.Errorf("upstream %q: %w", u.URL, err)
	}
	if err := checkOnOff("resume", u.Resume); err != nil {
		return fmt.Errorf("upstream %q: %w", u.URL, err)
	}
	val, _, err := upstreamStates.LoadOrNew(u.URL, func() (caddy.Destructor, error) {
		return &upstreamState{url: u.URL}, nil
	})
	if err != nil {
		return err
	}
	u.state = val.(*upstreamState)
	u.state.configured.Store(uint32(u.configuredEras()))
	u.state.server.Store(server)
	u.proxy = &reverseproxy.Upstream{Host: new(reverseproxy.Host), Dial: u.URL}
	return nil
}

// upstreamTarget sets u.target, what the bridges' requests to u carry: its
// URL and per-upstream options, and, when the forward bridge keeps its own
// connections under a transport that reaches u through a proxy from the
// environment (viaProxy), the transport as the bridge's client for u. It
// runs once per upstream, after the transport is provisioned: in Provision
// for the static upstreams, when the dynamic source first returns it for a
// dynamic one.
func (h *Handler) upstreamTarget(u *Upstream) {
	u.target = translate.Target{
		Upstream:     u.URL,
		GetStream:    getStreamMode(u.GetStream),
		Resume:       u.Resume != "off",
		GatherAlways: u.Gather == gatherAlways,
		NoTasks:      u.Tasks == "off",
	}
	if h.viaProxy != nil && h.viaProxy(u) {
		u.target.Client = h.client
		h.logger.Info("transport: the forward bridge reaches this upstream through the transport itself (a proxy from the environment applies)",
			zap.String("upstream", u.URL))
	}
}

// configuredEras is what the config says, or 0 for auto.
func (u *Upstream) configuredEras() eraSet {
	switch u.Era {
	case eraLegacy:
		return speaksLegacy
	case eraModern:
		return speaksModern
	}
	return 0
}

// knownEras returns the eras of u if configured or already probed, else 0.
func (u *Upstream) knownEras() eraSet {
	if e := u.configuredEras(); e != 0 {
		return e
	}
	return eraSet(u.state.eras.Load())
}

// available reports whether passive health lets u take new work.
func (u *Upstream) available(now time.Time) bool {
	return now.UnixNano() >= u.state.downUntil.Load()
}

// markDown takes u out of selection until now+d at least (an earlier mark
// that lasts longer is kept), and forgets its probed era so that it is
// probed again when it comes back. It reports whether u was up until this
// mark: of the marks made at once, only one takes it down.
func (u *Upstream) markDown(now time.Time, d time.Duration) (tookDown bool) {
	until := now.Add(d).UnixNano()
	for {
		cur := u.state.downUntil.Load()
		if cur >= until {
			break
		}
		if u.state.downUntil.CompareAndSwap(cur, until) {
			tookDown = cur <= now.UnixNano()
			break
		}
	}
	u.state.eras.Store(0)
	return tookDown
}

// upstreams returns the upstreams of this configuration for r: the static
// ones, then those the dynamic source returns now (dynamic.go).
func (h *Handler) upstreams(r *http.Request) []*Upstream {
	if h.dynamic == nil {
		return h.Upstreams
	}
	return append(slices.Clip(h.Upstreams), h.dynamic.get(r)...)
}

// candidates returns the upstreams, other than those in exclude, that
// health lets take new work and that speak era. An upstream whose era is
// not known yet (`auto`, not probed, or forgotten after it failed) is not a
// candidate: its era probe runs in the background (probeInBackground). The
// request waits, holding no lock, only when no available upstream's era is
// known at all: until the first of the probes in flight ends, for at most
// health_timeout (the bound of one probe) in all its choices.
func (h *Handler) candidates(r *http.Request, want eraSet, exclude []*Upstream) []*Upstream {
	rt := routeOf(r)
	var bound *time.Timer
	for {
		now := time.Now()
		var out []*Upstream
		var pending []<-chan struct{}
		known := false
		for _, u := range h.upstreams(r) {
			if slices.Contains(exclude, u) || !u.available(now) {
				continue
			}
			eras := u.knownEras()
			if eras == 0 {
				pending = append(pending, h.probeInBackground(u))
				continue
			}
			known = true
			if eras.has(want) {
				out = append(out, u)
			}
		}
		if len(out) > 0 || len(pending) == 0 || known || h.ctx.Err() != nil {
			return out // (an unloaded configuration's probes end at once)
		}
		if bound == nil {
			if rt.probeWait.IsZero() {
				rt.probeWait = now.Add(time.Duration(h.Health.Active.Timeout))
			}
			bound = time.NewTimer(time.Until(rt.probeWait))
			defer bound.Stop()
		}
		if !waitAny(r.Context(), bound.C, pending) {
			return nil
		}
	}
}

// selectUpstream picks, with the selection policy, an upstream speaking era
// for a new session or a modern request, other than those in exclude (the
// ones this request already failed on). It returns nil when none is
// available.
func (h *Handler) selectUpstream(r *http.Request, w http.ResponseWriter, want eraSet, exclude ...*Upstream) *Upstream {
	ups := h.candidates(r, want, exclude)
	switch len(ups) {
	case 0:
		return nil
	case 1:
		return ups[0]
	}
	pool := make(reverseproxy.UpstreamPool, len(ups))
	for i, u := range ups {
		pool[i] = u.proxy
	}
	chosen := h.selector.Select(pool, r, w)
	for _, u := range ups {
		if u.proxy == chosen {
			return u
		}
	}
	return nil
}

// upstreamByURL finds the upstream with exactly this URL among those of
// this configuration for r: a static one, or one the dynamic source returns
// now. An upstream that left the dynamic set is not found, as one removed
// from the configuration is not.
func (h *Handler) upstreamByURL(r *http.Request, u string) *Upstream {
	for _, up := range h.upstreams(r) {
		if up.URL == u {
			return up
		}
	}
	return nil
}

// Failover among upstreams: a request whose upstream could not take it
// (nothing of it reached the upstream, or an idempotent one got no answer)
// moves to another upstream of the era it needs, the same way wherever that
// happens: pass-through (forward's exchange.failover), a forward-bridge
// session being opened (bridgeFailover), a reverse-bridge initialize
// (initializeReverse). What went wrong, which the client reads only in
// general terms, is logged here.

// failover is one request's moves among upstreams.
type failover struct {
	h    *Handler
	w    http.ResponseWriter
	r    *http.Request
	want eraSet
	// what the upstream could not do, for the log ("take the request",
	// "open a session").
	what string
	// follow: the request's route names the upstream from the start (the
	// bridges), so it follows the moves; pass-through's names the one that
	// answered (forward sets it).
	follow bool
	tried  []*Upstream
}

// newFailover starts the failover of r, which needs an upstream speaking
// want.
func (h *Handler) newFailover(w http.ResponseWriter, r *http.Request, want eraSet, what string, follow bool) *failover {
	return &failover{h: h, w: w, r: r, want: want, what: what, follow: follow}
}

// next is called when up could not take the request (cause): it counts a
// passive failure of up (which marks it down at max_fails), logs it, and
// returns another upstream the selection policy picks among those of the
// era the request needs, never one it already tried; nil when none is left.
func (f *failover) next(up *Upstream, cause error) *Upstream {
	f.h.countFailure(up, "connection", cause)
	f.h.logger.Warn("upstream could not "+f.what+"; trying another", zap.String("upstream", up.URL), zap.Error(cause))
	f.tried = append(f.tried, up)
	next := f.h.selectUpstream(f.r, f.w, f.want, f.tried...)
	if next != nil && f.follow {
		routeOf(f.r).up = next
	}
	return next
}

// bridgeFailover returns breq's Failover: the upstream *up that could not
// open a session (nothing of the request reached it) is given up for
// another legacy upstream (failover.next), whose Target breq then
// carries. *up follows the moves.
func (h *Handler) bridgeFailover(w http.ResponseWriter, r *http.Request, up **Upstream) func(*forward.Request, error) bool {
	f := h.newFailover(w, r, speaksLegacy, "open a session", true)
	return func(breq *forward.Request, cause error) bool {
		next := f.next(*up, cause)
		if next == nil {
			return false
		}
		*up = next
		breq.Target = next.target
		return true
	}
}

// logUpstreamCause logs, at warn level, the upstream failure behind an
// error a bridge answered (translate.Served.Cause, jsonrpc.RPCError.Cause):
// the client was told in general terms; the address and the transport's
// words are the operator's.
func (h *Handler) logUpstreamCause(upstream string, cause error) {
	if cause != nil {
		h.logger.Warn("upstream failed", zap.String("upstream", upstream), zap.Error(cause))
	}
}
