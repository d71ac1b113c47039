package reverse

import (
	"net/http"
	"time"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/seal"
)

// Options configure the reverse bridge's sessions: those of one
// configuration (one mcp_gateway handler), which opens them with its own
// options (InitRequest.Options, Open); the bridge's own serve the rest. They
// are taken as given, with no defaulting here: start from
// DefaultOptions, which holds the documented defaults.
type Options struct {
	// Keyring seals and opens the gateway-held session ids. Required.
	Keyring *seal.Keyring
	// Instance names this gateway instance in the ids of the in-line
	// requests it sends, so that an answer reaching another instance can be
	// recognized and forwarded to this one.
	Instance string
	// Address is this instance's advertised base URL. When set, the ids of
	// in-line requests also carry it, sealed, so that another instance can
	// forward an answer here without a peer list.
	Address string
	// MaxRounds bounds the input_required rounds of one legacy request.
	MaxRounds int
	// MaxInputsPerRound bounds the input requests of one round; a round
	// asking for more ends the call with an error.
	MaxInputsPerRound int
	// RoundTimeout bounds how long a round waits for the client's answers.
	RoundTimeout time.Duration
	// SessionLifetime is how long a gateway-held session id stays valid
	// after initialize.
	SessionLifetime time.Duration
	// RetryPause is the wait before retrying a requestState-only
	// input_required result (load shedding).
	RetryPause time.Duration
	// TaskWait bounds how long a call the upstream answered with a task
	// (the Tasks extension) is followed for the legacy client, from the
	// task's creation; the task's own ttlMs, when shorter, bounds it too.
	// Then the task is cancelled upstream and the client gets an error.
	TaskWait time.Duration
	// MaxGetStreams bounds the GET streams of gateway-held sessions open at
	// once in the process (each holds an upstream subscriptions/listen);
	// a GET beyond it gets 503 (-32603). Checked against the options of
	// the session opening one.
	MaxGetStreams int
	// MaxGetStreamsPerPrincipal bounds those of one principal; a GET
	// beyond it gets 429 (-32603).
	MaxGetStreamsPerPrincipal int
	// Observer learns how calls end (metrics, logs). Optional.
	Observer translate.Observer
	// Client, if set, makes the upstream requests of the sessions served
	// with these options (a configured transport) instead of the bridge's
	// own. Optional.
	Client *http.Client

	ownerTag string // Instance and Address sealed, for in-line ids
	ready    bool   // made by Ready
}

// Defaults of the GET stream bounds: a hundred streams of one principal
// (all anonymous clients are one) hold at most about a hundred upstream
// connections.
const (
	defaultMaxGetStreams             = 10000
	defaultMaxGetStreamsPerPrincipal = 100
)

// DefaultOptions returns the documented defaults of the reverse
// bridge's options, and is their one source (see forward.DefaultOptions).
// Keyring, Instance, Address and Observer are left unset.
func DefaultOptions() Options {
	return Options{
		MaxRounds:         translate.DefaultMaxRounds,
		MaxInputsPerRound: translate.DefaultMaxInputsPerRound,
		RoundTimeout:      translate.DefaultRoundTimeout,
		SessionLifetime:   24 * time.Hour,
		RetryPause:        250 * time.Millisecond,
		TaskWait:          time.Hour,

		MaxGetStreams:             defaultMaxGetStreams,
		MaxGetStreamsPerPrincipal: defaultMaxGetStreamsPerPrincipal,
	}
}

// Ready returns o as the options of one configuration, made once and passed
// to Initialize and Open: it seals Instance and Address for the ids of
// in-line requests. o is taken as given (see DefaultOptions).
func (o Options) Ready() *Options {
	if o.Address != "" && o.Keyring != nil {
		o.ownerTag = seal.SealOwner(o.Keyring, o.Instance, o.Address)
	}
	o.ready = true
	return &o
}

// optionsOf returns o made Ready, or the bridge's own when nil.
func (rv *Bridge) optionsOf(o *Options) *Options {
	switch {
	case o == nil:
		return rv.defaults
	case !o.ready:
		return o.Ready()
	}
	return o
}

// clientOf returns the client of o, or the bridge's own.
func (rv *Bridge) clientOf(o *Options) *http.Client {
	if o != nil && o.Client != nil {
		return o.Client
	}
	return rv.client
}

// options returns the options s was opened with.
func (rv *Bridge) options(s *Session) *Options { return rv.optionsOf(s.opts) }
