package caddymodule

import (
	"errors"
	"strings"
	"time"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/forward"
	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

// The checks here are made while the Caddyfile is parsed, so that their
// errors carry its file and line. Provision and Validate make them again
// for JSON configurations, whose errors cannot.

// parsedAt remembers where options that are checked against each other
// at the end of the block were written.
type parsedAt struct {
	directive caddyfile.Token // mcp_gateway
	fleet     caddyfile.Token // the first advertise or peer
}

// fleetOption remembers the first advertise or peer option.
func (a *parsedAt) fleetOption(d *caddyfile.Dispenser) {
	if a.fleet.Text == "" {
		a.fleet = d.Token()
	}
}

// errAt returns msg as a Caddyfile error at tok's file and line.
func errAt(tok caddyfile.Token, msg string) error {
	d := caddyfile.NewDispenser([]caddyfile.Token{tok})
	d.Next()
	return d.Err(msg)
}

// checkParsed checks, once the block is read, what needs more than one
// option: at least one upstream, and what advertise and peer need.
func (h *Handler) checkParsed(at parsedAt) error {
	if len(h.Upstreams) == 0 && h.DynamicUpstreamsRaw == nil {
		return errAt(at.directive, errNoUpstream.Error())
	}
	if at.fleet.Text == "" {
		return nil
	}
	if len(h.Fleet.StateKeys) == 0 {
		return errAt(at.fleet, errFleetNeedsKey.Error())
	}
	if len(h.Fleet.Peers) > 0 && h.Fleet.InstanceID == "" && h.Fleet.Advertise == "" {
		return errAt(at.fleet, errPeerNeedsID.Error())
	}
	return nil
}

// Errors of options that need others, shared by the Caddyfile and
// Provision/Validate.
var (
	errNoUpstream    = errors.New("at least one upstream (or a dynamic upstream source) is required")
	errFleetNeedsKey = errors.New("advertise and peer need state_key, shared by every instance: " +
		"with a key made at start, no other instance can open this one's tokens")
	errPeerNeedsID = errors.New("peer needs instance_id (or advertise) on this instance: " +
		"with a random id, the other instances cannot list this one")
)

// checkLiteralStateKeys checks the state keys written as they are; one
// holding a placeholder ({env.MCP_GATEWAY_KEY}) is checked at provision,
// once expanded.
func checkLiteralStateKeys(d *caddyfile.Dispenser, keys []string) error {
	for i, k := range keys {
		if strings.Contains(k, "{") {
			continue
		}
		if _, err := parseStateKey(i+1, k); err != nil {
			return d.Err(err.Error())
		}
	}
	return nil
}

// checkLiteral checks a value written as it is with check; one holding a
// placeholder is checked at provision, once expanded.
func checkLiteral(d *caddyfile.Dispenser, s string, check func(string) error) error {
	if strings.Contains(s, "{") {
		return nil
	}
	if err := check(s); err != nil {
		return d.Err(err.Error())
	}
	return nil
}

// parseDurationNotNegative parses a duration whose negative values mean
// nothing (0 leaves the default); rule says what it must be.
func parseDurationNotNegative(d *caddyfile.Dispenser, to *caddy.Duration, rule string) error {
	opt := d.Val()
	if err := parseDuration(d, to); err != nil {
		return err
	}
	if *to < 0 {
		return d.Errf("%s: %s, got %v", opt, rule, time.Duration(*to))
	}
	return nil
}

// parseResumeLinger parses resume_linger, which is bounded.
func parseResumeLinger(d *caddyfile.Dispenser, to *caddy.Duration) error {
	if err := parseDuration(d, to); err != nil {
		return err
	}
	if time.Duration(*to) > forward.MaxResumeLinger {
		return d.Errf("resume_linger: must be at most %v, got %v", forward.MaxResumeLinger, time.Duration(*to))
	}
	return nil
}

// parseTaskLease parses task_lease, which is bounded below (0 leaves the
// default).
func parseTaskLease(d *caddyfile.Dispenser, to *caddy.Duration) error {
	if err := parseDuration(d, to); err != nil {
		return err
	}
	if *to != 0 {
		if err := checkTaskLease(*to); err != nil {
			return d.Err(err.Error())
		}
	}
	return nil
}
