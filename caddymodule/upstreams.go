package caddymodule

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
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

	// Whether each session the gateway opens on this server for modern
	// clients' calls (when the server speaks legacy) also opens the
	// session's standalone GET stream, where a legacy server may send
	// requests and notifications outside any call. `on` keeps it open, as
	// a legacy client would: questions a server sends there during a call
	// (a server that does not tie them to the call) still reach the
	// client. `off` saves one upstream connection and one goroutine per
	// session — half of what a parked call holds — for a server that asks
	// its questions on the call's own stream (servers built on the go-sdk's
	// `req.Session` or the TypeScript SDK's `extra.sendRequest` do); in
	// front of one that does not, a call waiting for such a question never
	// gets it. `subscriptions/listen` always opens one. Default: `on`.
	GetStream string `json:"get_stream,omitempty"`

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
	// (`-32021`, relayed to the client). Default: `on`.
	Tasks string `json:"tasks,omitempty"`

	state *upstreamState
	proxy *reverseproxy.Upstream // what the selection policy sees
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
// probed) and its passive health. It is shared by every configuration that
// names the same URL and survives config reloads.
type upstreamState struct {
	url       string
	downUntil atomic.Int64 // unix nanoseconds; 0 = up

	probeMu    sync.Mutex // serializes probes
	eras       atomic.Uint32
	configured atomic.Uint32 // the eras the last provisioned config names; 0 for auto
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

// checkEra reports whether era is a valid value of Upstream.Era.
func checkEra(era string) error {
	switch era {
	case "", eraAuto, eraLegacy, eraModern:
		return nil
	}
	return fmt.Errorf("unknown era %q (want auto, legacy or modern)", era)
}

func (u *Upstream) provision() error {
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
	if err := checkOnOff("get_stream", u.GetStream); err != nil {
		return fmt.Errorf("upstream %q: %w", u.URL, err)
	}
	if err := checkOnOff("tasks", u.Tasks); err != nil {
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
	u.proxy = &reverseproxy.Upstream{Host: new(reverseproxy.Host), Dial: u.URL}
	return nil
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

// markDown takes u out of selection for d, and forgets its probed era so
// that it is probed again when it comes back.
func (u *Upstream) markDown(d time.Duration) {
	u.state.downUntil.Store(time.Now().Add(d).UnixNano())
	u.state.eras.Store(0)
}

// candidates returns the upstreams that passive health lets take new work
// and that speak era (probing those whose era is not known yet).
func (h *Handler) candidates(r *http.Request, want eraSet) []*Upstream {
	now := time.Now()
	var out []*Upstream
	for _, u := range h.Upstreams {
		if !u.available(now) {
			continue
		}
		if eras, err := h.erasOf(r.Context(), u); err == nil && eras.has(want) {
			out = append(out, u)
		}
	}
	return out
}

// selectUpstream picks, with the selection policy, an upstream speaking era
// for a new session or a modern request. It returns nil when none is
// available.
func (h *Handler) selectUpstream(r *http.Request, w http.ResponseWriter, want eraSet) *Upstream {
	ups := h.candidates(r, want)
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

// upstreamByURL finds the configured upstream with exactly this URL.
func (h *Handler) upstreamByURL(u string) *Upstream {
	for _, up := range h.Upstreams {
		if up.URL == u {
			return up
		}
	}
	return nil
}
