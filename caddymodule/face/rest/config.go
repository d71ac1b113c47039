package rest

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/caddymodule/face"
)

// Config is the `rest` object of the handler's faces: the HTTP REST face
// of SEP-1597 (docs/faces.md "REST"; a non-standard extra: the proposal
// was closed, not accepted), served beside the MCP endpoint.
type Config struct {
	// The path under which the handler serves the REST face: every MCP
	// server behind the gateway, legacy or modern, as plain HTTP
	// resources — `GET <base>/tools`, `/prompts`, `/resources`,
	// `/resources-templates` (whole lists with a strong `ETag`),
	// `GET <base>/resources/{name}` (the bytes),
	// `POST <base>/prompts/{name}`, `POST <base>/complete`,
	// `PUT <base>/roots`, `GET <base>/openapi.json`, and tool calls as
	// durable resources: `PUT <base>/tools/{tool}/calls/{id}` with an
	// `Idempotency-Key`, `GET` it, `POST …/advance` with `If-Match` to
	// answer an elicitation or sampling question, `POST …/cancel`, `DELETE`
	// it once ended, and `GET <base>/tools/{tool}/calls`. Requests whose path (as the handler
	// sees it, after any rewrite) is under the base are served by the
	// face; every other request is MCP as before, so the handler's matcher
	// must let both through (e.g. `@mcp path /mcp /api/*` then
	// `mcp_gateway @mcp { … rest /api }`). The call records live in
	// Caddy's configured storage (`storage` global option), sealed with
	// `state_key`: `rest` needs `state_key`, and in a fleet every instance
	// must share the storage and the key, so that any instance serves any
	// call. Required: `faces.rest` without it is an error, as are the
	// Caddyfile's other `rest_*` options without `rest <base>`.
	// Caddyfile: `rest <base>`.
	BasePath string `json:"base_path,omitempty"`

	// How long a PUT or an advance waits for the tool call before it
	// answers: a call that ends (or asks a question) within it is answered
	// with its end (or question); a longer one is answered `running` with
	// `Retry-After`, and goes on in the background on the instance that
	// started it, which writes its record when it ends. Default: 5s.
	// Caddyfile: `rest_wait`.
	Wait caddy.Duration `json:"wait,omitempty"`

	// How long a call's record is kept after its last change; then the
	// call is gone (404), its id can be used again, and its record is
	// deleted (each instance looks for expired records every
	// `rest_call_ttl`, at most hourly). Default: 24h.
	// Caddyfile: `rest_call_ttl`.
	CallTTL caddy.Duration `json:"call_ttl,omitempty"`

	// The most calls one principal may have running on this instance at
	// once (started or advanced, not yet ended or waiting for input); a
	// PUT or an advance beyond it gets 429. At least 1. Default: 100.
	// Caddyfile: `rest_max_calls_per_principal`.
	MaxCallsPerPrincipal int `json:"max_calls_per_principal,omitempty"`

	// The most call records one principal may keep in the storage (every
	// status, until deleted or past `rest_call_ttl`): a PUT of a new call
	// beyond it gets 429, and the problem says what frees room (DELETE
	// finished calls; records go `rest_call_ttl` after their last change).
	// Each instance counts the principal's records from the storage's
	// names and sizes (no record read) at a new call, then adds its own
	// writes, and counts again after 10s, or at every new call once the
	// principal is past half of this bound or of
	// `rest_max_bytes_per_principal`: it holds across a fleet of two, and
	// a larger fleet may pass it by what the others wrote meanwhile (calls
	// started at the same moment may pass it by their number).
	// Default: 1000.
	// Caddyfile: `rest_max_records_per_principal`.
	MaxRecordsPerPrincipal int `json:"max_records_per_principal,omitempty"`

	// The most bytes of call records one principal may keep in the
	// storage: a PUT of a new call is refused (429) when the principal's
	// records and the new call's arguments would pass it. Counted like
	// `rest_max_records_per_principal`; a call's result, written when it
	// ends, may take the principal past it by that result. Default: 64MiB.
	// Caddyfile: `rest_max_bytes_per_principal`.
	MaxBytesPerPrincipal int64 `json:"max_bytes_per_principal,omitempty"`

	// The most records (calls and roots, of every principal) the REST face
	// keeps in the storage: a PUT of a new call or of roots beyond it gets
	// 507 Insufficient Storage. It is checked against an estimate, not a
	// listing on every PUT: each instance counts the records every minute
	// (at most every `rest_call_ttl`; names and sizes only, no record
	// read) and adds its own writes since, so a fleet of n instances may
	// pass it by what the others wrote within the minute. The count also
	// bounds that minute's work. Default: 10000.
	// Caddyfile: `rest_max_records`.
	MaxRecords int `json:"max_records,omitempty"`

	// The most bytes of records the REST face keeps in the storage, checked
	// like `rest_max_records` (a new call's arguments are counted at once;
	// every write of this instance counts as growth until the next count,
	// so the estimate errs on the full side). Default: 1GiB, sixteen
	// principals at `rest_max_bytes_per_principal`; raise it with the
	// storage's room. Caddyfile: `rest_max_bytes`.
	MaxBytes int64 `json:"max_bytes,omitempty"`
}

// Defaults of the REST face.
const (
	defaultWait     = 5 * time.Second
	defaultCallTTL  = 24 * time.Hour
	defaultMaxCalls = 100
	// Bounds of the records kept (config.go's fields say why).
	defaultMaxRecordsPerPrincipal = 1000
	defaultMaxBytesPerPrincipal   = 64 << 20
	defaultMaxRecords             = 10000
	defaultMaxBytes               = 1 << 30
)

// setDefaults gives the options left unset their defaults.
func (c *Config) setDefaults() {
	if c.Wait == 0 {
		c.Wait = caddy.Duration(defaultWait)
	}
	if c.CallTTL == 0 {
		c.CallTTL = caddy.Duration(defaultCallTTL)
	}
	if c.MaxCallsPerPrincipal == 0 {
		c.MaxCallsPerPrincipal = defaultMaxCalls
	}
	if c.MaxRecordsPerPrincipal == 0 {
		c.MaxRecordsPerPrincipal = defaultMaxRecordsPerPrincipal
	}
	if c.MaxBytesPerPrincipal == 0 {
		c.MaxBytesPerPrincipal = defaultMaxBytesPerPrincipal
	}
	if c.MaxRecords == 0 {
		c.MaxRecords = defaultMaxRecords
	}
	if c.MaxBytes == 0 {
		c.MaxBytes = defaultMaxBytes
	}
}

// validate checks the options, once defaulted.
func (c *Config) validate() error {
	if c.BasePath == "" {
		return errors.New("rest: the base path is required (Caddyfile: rest <base>; JSON: faces.rest.base_path)")
	}
	if err := checkBase(c.BasePath); err != nil {
		return err
	}
	if c.MaxCallsPerPrincipal < 1 {
		return fmt.Errorf("rest_max_calls_per_principal: must be at least 1, got %d", c.MaxCallsPerPrincipal)
	}
	switch {
	case c.MaxRecordsPerPrincipal < 1, c.MaxRecords < 1:
		return fmt.Errorf("rest_max_records_per_principal and rest_max_records: must be at least 1, got %d and %d", c.MaxRecordsPerPrincipal, c.MaxRecords)
	case c.MaxBytesPerPrincipal < 1, c.MaxBytes < 1:
		return fmt.Errorf("rest_max_bytes_per_principal and rest_max_bytes: must be positive, got %d and %d", c.MaxBytesPerPrincipal, c.MaxBytes)
	}
	if c.Wait <= 0 || c.CallTTL <= 0 {
		return errors.New("rest_wait and rest_call_ttl: must be positive")
	}
	return nil
}

// checkBase checks a base path: absolute, clean, without a trailing
// slash, a query or placeholders.
func checkBase(base string) error {
	switch {
	case !strings.HasPrefix(base, "/") || base == "/":
		return fmt.Errorf("rest: the base path must start with '/' and not be '/' alone, got %q", base)
	case strings.HasSuffix(base, "/"), strings.Contains(base, "//"), strings.ContainsAny(base, "?#{}%"),
		strings.Contains(base, "/./"), strings.Contains(base, "/../"), strings.HasSuffix(base, "/.."), strings.HasSuffix(base, "/."):
		return fmt.Errorf("rest: the base path must be a clean path (no trailing '/', '..', '?', '#', '%%' or placeholders), got %q", base)
	}
	return nil
}

// Options are the face's Caddyfile options: `rest <base>`, `rest_wait`,
// `rest_call_ttl`, `rest_max_calls_per_principal`,
// `rest_max_records_per_principal`, `rest_max_bytes_per_principal`,
// `rest_max_records`, `rest_max_bytes`.
var Options = face.Options[Config]{
	"rest": func(d *caddyfile.Dispenser, cfg **Config) error {
		c := made(cfg)
		if err := face.ParseString(d, &c.BasePath); err != nil {
			return err
		}
		if err := checkBase(c.BasePath); err != nil {
			return d.Err(err.Error())
		}
		return nil
	},
	"rest_wait": func(d *caddyfile.Dispenser, cfg **Config) error {
		return face.ParseDurationNotNegative(d, &made(cfg).Wait, "must be positive")
	},
	"rest_call_ttl": func(d *caddyfile.Dispenser, cfg **Config) error {
		return face.ParseDurationNotNegative(d, &made(cfg).CallTTL, "must be positive")
	},
	"rest_max_calls_per_principal": func(d *caddyfile.Dispenser, cfg **Config) error {
		return face.ParseCount(d, &made(cfg).MaxCallsPerPrincipal)
	},
	"rest_max_records_per_principal": func(d *caddyfile.Dispenser, cfg **Config) error {
		return face.ParseCount(d, &made(cfg).MaxRecordsPerPrincipal)
	},
	"rest_max_bytes_per_principal": func(d *caddyfile.Dispenser, cfg **Config) error {
		return face.ParseSize(d, &made(cfg).MaxBytesPerPrincipal)
	},
	"rest_max_records": func(d *caddyfile.Dispenser, cfg **Config) error {
		return face.ParseCount(d, &made(cfg).MaxRecords)
	},
	"rest_max_bytes": func(d *caddyfile.Dispenser, cfg **Config) error {
		return face.ParseSize(d, &made(cfg).MaxBytes)
	},
}

// made is *cfg, made when nil.
func made(cfg **Config) *Config {
	if *cfg == nil {
		*cfg = new(Config)
	}
	return *cfg
}
