package caddymodule

import (
	"time"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/forward"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/reverse"
	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
)

// The defaults of the handler's options, resolved in one place:
// setDefaults, called first in Provision. Each is documented on its field
// (module.go). A zero value means "the default"; for the durations where
// turning the behaviour off makes sense (keepalive_interval, write_timeout,
// gather_window, health_interval) a negative one means "off", as Caddy's
// reverse_proxy `flush_interval -1`. The limits both bridges share have
// their values in translate/forward and translate/reverse (forward.DefaultOptions, reverse.DefaultOptions),
// the one source of them: setDefaults takes them once, fills the handler's
// options from them, and returns them as the base of the bridges' options
// (bridgeOptions, reverseOptions), which set every configurable field from
// the defaulted handler and keep the base's values for the rest. The leaf
// packages take the options as given.

// Defaults of the options only the Caddy side knows.
const (
	defaultKeepAlive      = 15 * time.Second
	defaultFailDuration   = 10 * time.Second
	defaultMaxRequestBody = 4 << 20
	defaultPrincipal      = "{http.request.header.Authorization}"
	defaultWriteTimeout   = 30 * time.Second
	defaultHealthTimeout  = 5 * time.Second
	defaultListTimeout    = 5 * time.Second // federation.list_timeout

	maxBufferedNotifications = 4096
)

// setDefaults gives every option left unset (zero) its documented default,
// and returns the bridges' default options it took them from (the base of
// bridgeOptions and reverseOptions). It changes only zero values: a
// negative duration (off) is kept.
func (h *Handler) setDefaults() (fwd forward.Options, rev reverse.Options) {
	fwd, rev = forward.DefaultOptions(), reverse.DefaultOptions()

	if h.SelectionPolicyRaw == nil {
		h.SelectionPolicyRaw = caddyconfig.JSONModuleObject(reverseproxy.RandomSelection{}, "policy", "random", nil)
	}
	if h.Security.Principal == "" && h.Auth != nil {
		h.Security.Principal = authPrincipal
	}
	if h.Security.Principal == "" {
		h.Security.Principal = defaultPrincipal
	}
	if h.Security.MaxRequestBody == 0 {
		h.Security.MaxRequestBody = defaultMaxRequestBody
	}
	setDuration(&h.Streams.KeepAliveInterval, defaultKeepAlive)
	setDuration(&h.Health.Passive.FailDuration, defaultFailDuration)
	setDuration(&h.Streams.WriteTimeout, defaultWriteTimeout)
	setDuration(&h.Health.Active.Timeout, defaultHealthTimeout)
	if len(h.Servers) > 0 { // list_timeout without servers is refused (checkServers)
		setDuration(&h.Federation.ListTimeout, defaultListTimeout)
	}
	// stream_close_delay (0: close at once) and health_interval (0: no
	// active checks) default to their zero value.

	// The bridges' options: park_ttl is also the reverse bridge's round
	// timeout.
	setDuration(&h.Parking.ParkTTL, fwd.ParkTTL)
	setDuration(&h.Parking.GatherWindow, fwd.GatherWindow)
	setDuration(&h.Parking.ResumeLinger, fwd.ResumeLinger)
	setDuration(&h.Sessions.SessionLifetime, rev.SessionLifetime)
	setDuration(&h.Tasks.MaxTaskWait, rev.TaskWait)
	setInt(&h.Sessions.MaxGetStreams, rev.MaxGetStreams)
	setInt(&h.Sessions.MaxGetStreamsPerPrincipal, rev.MaxGetStreamsPerPrincipal)
	setInt(&h.Parking.MaxParked, fwd.MaxParked)
	setInt(&h.Parking.MaxParkedPerPrincipal, fwd.MaxParkedPerPrincipal)
	setInt(&h.Parking.MaxRounds, fwd.MaxRounds)
	setInt(&h.Parking.MaxInputsPerRound, fwd.MaxInputsPerRound)
	setInt(&h.Parking.MaxBufferedNotifications, fwd.Lease.CallBuffer)
	setInt(&h.Sessions.MaxSessionsPerPrincipal, fwd.Lease.MaxPerPrincipal)
	setInt(&h.Health.Passive.MaxFails, 1)
	setInt(&h.Health.Active.Passes, 1)
	setInt(&h.Health.Active.Fails, 1)
	setDuration(&h.Tasks.Window, fwd.Tasks.Policy.DefaultWindow)
	setDuration(&h.Tasks.TTL, fwd.Tasks.TTL)
	setDuration(&h.Tasks.PollInterval, fwd.Tasks.PollInterval)
	setInt(&h.Tasks.MaxTasks, fwd.Tasks.MaxTasks)
	setInt(&h.Tasks.MaxTasksPerPrincipal, fwd.Tasks.MaxTasksPerPrincipal)
	if h.Tasks.Store == "" {
		// Records only another process can read are worth writing only
		// when a state_key seals them.
		h.Tasks.Store = taskStoreOff
		if len(h.Fleet.StateKeys) > 0 {
			h.Tasks.Store = taskStoreStorage
		}
	}
	setDuration(&h.Tasks.Lease, forward.DefaultTaskLease)
	setDuration(&h.Tasks.ListenPoll, forward.DefaultListenPoll)
	setInt(&h.Tasks.MaxListenTaskIDs, forward.DefaultMaxListenTaskIDs)
	setInt(&h.Tasks.MaxTaskListenersPerPrincipal, forward.DefaultMaxTaskListeners)
	if h.Tasks.MaxResult == 0 {
		h.Tasks.MaxResult = forward.DefaultMaxTaskResult
	}
	return fwd, rev
}

func setDuration(d *caddy.Duration, def time.Duration) {
	if *d == 0 {
		*d = caddy.Duration(def)
	}
}

func setInt(n *int, def int) {
	if *n == 0 {
		*n = def
	}
}

// orOff is d for a leaf package, where zero or negative means "off".
func orOff(d caddy.Duration) time.Duration {
	return max(time.Duration(d), 0)
}

// bridgeOptions are this handler's forward bridge options: base
// (setDefaults') with its (defaulted) configuration.
func (h *Handler) bridgeOptions(base forward.Options) *forward.Options {
	o := base
	o.Keyring, o.Instance, o.Address, o.Observer = h.keyring, h.fleet.instance, h.fleet.address, h.observer
	o.ParkTTL = time.Duration(h.Parking.ParkTTL)
	o.MaxParked = h.Parking.MaxParked
	o.MaxParkedPerPrincipal = h.Parking.MaxParkedPerPrincipal
	o.GatherWindow = orOff(h.Parking.GatherWindow)
	o.ResumeLinger = orOff(h.Parking.ResumeLinger)
	o.MaxRounds = h.Parking.MaxRounds
	o.MaxInputsPerRound = h.Parking.MaxInputsPerRound
	o.Lease.MaxPerPrincipal = h.Sessions.MaxSessionsPerPrincipal
	o.Lease.CallBuffer = h.Parking.MaxBufferedNotifications
	o.Client = h.bridgeClient // nil without a transport: the bridge's own
	o.Tasks = forward.TaskOptions{
		Policy: h.taskPolicy(), TTL: time.Duration(h.Tasks.TTL), PollInterval: orOff(h.Tasks.PollInterval),
		MaxTasks: h.Tasks.MaxTasks, MaxTasksPerPrincipal: h.Tasks.MaxTasksPerPrincipal,
		Store: h.taskStorage, // nil with task_store off: tasks in memory only
		Lease: time.Duration(h.Tasks.Lease), MaxResult: int(h.Tasks.MaxResult),
		ListenPoll: time.Duration(h.Tasks.ListenPoll), MaxListenTaskIDs: h.Tasks.MaxListenTaskIDs,
		MaxTaskListenersPerPrincipal: h.Tasks.MaxTaskListenersPerPrincipal,
	}
	return o.Ready()
}

// reverseOptions are this handler's reverse bridge options: base
// (setDefaults') with its (defaulted) configuration; RetryPause keeps the
// base's.
func (h *Handler) reverseOptions(base reverse.Options) *reverse.Options {
	o := base
	o.Keyring, o.Instance, o.Address, o.Observer = h.keyring, h.fleet.instance, h.fleet.address, h.observer
	o.MaxRounds = h.Parking.MaxRounds
	o.MaxInputsPerRound = h.Parking.MaxInputsPerRound
	o.RoundTimeout = time.Duration(h.Parking.ParkTTL)
	o.SessionLifetime = time.Duration(h.Sessions.SessionLifetime)
	o.Client = h.reverseClient // nil without a transport: the bridge's own
	o.TaskWait = time.Duration(h.Tasks.MaxTaskWait)
	o.MaxGetStreams = h.Sessions.MaxGetStreams
	o.MaxGetStreamsPerPrincipal = h.Sessions.MaxGetStreamsPerPrincipal
	return o.Ready()
}
