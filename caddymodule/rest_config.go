package caddymodule

import (
	"fmt"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

// RESTConfig is the `rest` object of the handler: the HTTP REST face of
// SEP-1597 (README "REST"), served beside the MCP endpoint.
type RESTConfig struct {
	// The path under which the handler serves the REST face: every MCP
	// server behind the gateway, legacy or modern, as plain HTTP
	// resources — `GET <base>/tools`, `/prompts`, `/resources`,
	// `/resources-templates` (whole lists with a strong `ETag`),
	// `GET <base>/resources/{name}` (the bytes),
	// `POST <base>/prompts/{name}`, `POST <base>/complete`,
	// `PUT <base>/roots`, `GET <base>/openapi.json`, and tool calls as
	// durable resources: `PUT <base>/tools/{tool}/calls/{id}` with an
	// `Idempotency-Key`, `GET` it, `POST …/advance` with `If-Match` to
	// answer an elicitation or sampling question, `POST …/cancel`, and
	// `GET <base>/tools/{tool}/calls`. Requests whose path (as the handler
	// sees it, after any rewrite) is under the base are served by the
	// face; every other request is MCP as before, so the handler's matcher
	// must let both through (e.g. `@mcp path /mcp /api/*` then
	// `mcp_gateway @mcp { … rest /api }`). The call records live in
	// Caddy's configured storage (`storage` global option), sealed with
	// `state_key`: `rest` needs `state_key`, and in a fleet every instance
	// must share the storage and the key, so that any instance serves any
	// call. Default: off. Caddyfile: `rest <base>`.
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
}

// Defaults of the REST face.
const (
	defaultRESTWait     = 5 * time.Second
	defaultRESTCallTTL  = 24 * time.Hour
	defaultRESTMaxCalls = 100
)

// setRESTDefaults gives the REST face's options left unset their
// defaults.
func (c *RESTConfig) setRESTDefaults() {
	setDuration(&c.Wait, defaultRESTWait)
	setDuration(&c.CallTTL, defaultRESTCallTTL)
	setInt(&c.MaxCallsPerPrincipal, defaultRESTMaxCalls)
}

// checkRESTBase checks a base path: absolute, clean, without a trailing
// slash, a query or placeholders.
func checkRESTBase(base string) error {
	switch {
	case base == "":
		return nil
	case !strings.HasPrefix(base, "/") || base == "/":
		return fmt.Errorf("rest: the base path must start with '/' and not be '/' alone, got %q", base)
	case strings.HasSuffix(base, "/"), strings.Contains(base, "//"), strings.ContainsAny(base, "?#{}%"),
		strings.Contains(base, "/./"), strings.Contains(base, "/../"), strings.HasSuffix(base, "/.."), strings.HasSuffix(base, "/."):
		return fmt.Errorf("rest: the base path must be a clean path (no trailing '/', '..', '?', '#', '%%' or placeholders), got %q", base)
	}
	return nil
}

// validateREST checks the REST face's options.
func (c *RESTConfig) validateREST() error {
	if err := checkRESTBase(c.BasePath); err != nil {
		return err
	}
	if c.MaxCallsPerPrincipal < 1 {
		return fmt.Errorf("rest_max_calls_per_principal: must be at least 1, got %d", c.MaxCallsPerPrincipal)
	}
	if c.Wait <= 0 || c.CallTTL <= 0 {
		return fmt.Errorf("rest_wait and rest_call_ttl: must be positive")
	}
	return nil
}

// unmarshalRESTOption reads one of the REST face's Caddyfile options.
func (h *Handler) unmarshalRESTOption(d *caddyfile.Dispenser) error {
	switch d.Val() {
	case "rest":
		if err := parseString(d, &h.REST.BasePath); err != nil {
			return err
		}
		if err := checkRESTBase(h.REST.BasePath); err != nil {
			return d.Err(err.Error())
		}
		return nil
	case "rest_wait":
		return parseDurationNotNegative(d, &h.REST.Wait, "must be positive")
	case "rest_call_ttl":
		return parseDurationNotNegative(d, &h.REST.CallTTL, "must be positive")
	default: // rest_max_calls_per_principal
		return parseInt(d, &h.REST.MaxCallsPerPrincipal)
	}
}
