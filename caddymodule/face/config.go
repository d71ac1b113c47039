package face

import (
	"strconv"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

// Options are a face's Caddyfile options, each under the name it has in
// the mcp_gateway block (flat: `saga on`, `rest /api`, `rest_wait 5s`):
// the option's parser sets the face's config, making it when *cfg is nil.
type Options[C any] map[string]func(d *caddyfile.Dispenser, cfg **C) error

// OnOff parses an option that turns a face on or off, such as `saga on`:
// `on` makes the face's config, `off` leaves none.
func OnOff[C any](d *caddyfile.Dispenser, cfg **C) error {
	opt := d.Val()
	if !d.NextArg() {
		return d.ArgErr()
	}
	v := d.Val()
	if d.NextArg() {
		return d.ArgErr()
	}
	switch v {
	case "on":
		if *cfg != nil {
			return d.Errf("%s already specified", opt)
		}
		*cfg = new(C)
	case "off":
		*cfg = nil
	default:
		return d.Errf("unknown %s %q (want on or off)", opt, v)
	}
	return nil
}

// The Caddyfile value parsers the handler and every face use: each reads
// its option's arguments (d.Val() is the option) into to, refusing an
// option given twice.

// ParseString parses an option of one string, given once.
func ParseString(d *caddyfile.Dispenser, to *string) error {
	opt := d.Val()
	if *to != "" {
		return d.Errf("%s already specified", opt)
	}
	if !d.NextArg() {
		return d.ArgErr()
	}
	*to = d.Val()
	if d.NextArg() {
		return d.ArgErr()
	}
	return nil
}

// ParseCount parses an option of one positive whole number, given once.
func ParseCount(d *caddyfile.Dispenser, to *int) error {
	opt := d.Val()
	if *to != 0 {
		return d.Errf("%s already specified", opt)
	}
	if !d.NextArg() {
		return d.ArgErr()
	}
	n, err := strconv.Atoi(d.Val())
	if err != nil || n < 1 {
		return d.Errf("invalid %s %q: want a positive whole number", opt, d.Val())
	}
	if d.NextArg() {
		return d.ArgErr()
	}
	*to = n
	return nil
}

// ParseSize parses an option of one size in bytes (`4MiB`), given once.
func ParseSize(d *caddyfile.Dispenser, to *int64) error {
	opt := d.Val()
	if *to != 0 {
		return d.Errf("%s already specified", opt)
	}
	if !d.NextArg() {
		return d.ArgErr()
	}
	n, err := humanize.ParseBytes(d.Val())
	if err != nil || n > 1<<40 {
		return d.Errf("invalid %s %q: want a size such as 4MiB", opt, d.Val())
	}
	if d.NextArg() {
		return d.ArgErr()
	}
	*to = int64(n)
	return nil
}

// ParseDuration parses an option of one duration, given once (0 leaves the
// default): `15s`, or a negative one such as `-1` that means off.
func ParseDuration(d *caddyfile.Dispenser, to *caddy.Duration) error {
	opt := d.Val()
	if *to != 0 {
		return d.Errf("%s already specified", opt)
	}
	if !d.NextArg() {
		return d.ArgErr()
	}
	dur, err := parseDurationArg(d.Val())
	if err != nil {
		return d.Errf("invalid %s %q: %v", opt, d.Val(), err)
	}
	if d.NextArg() {
		return d.ArgErr()
	}
	*to = caddy.Duration(dur)
	return nil
}

// parseDurationArg parses a duration such as `15s` or `-1s`; a bare
// negative whole number such as `-1` is accepted too and means off, as in
// reverse_proxy's `flush_interval -1`.
func parseDurationArg(s string) (time.Duration, error) {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil && n < 0 {
		return time.Duration(n), nil
	}
	return caddy.ParseDuration(s)
}

// ParseDurationNotNegative parses a duration whose negative values mean
// nothing (0 leaves the default); rule says what it must be.
func ParseDurationNotNegative(d *caddyfile.Dispenser, to *caddy.Duration, rule string) error {
	opt := d.Val()
	if err := ParseDuration(d, to); err != nil {
		return err
	}
	if *to < 0 {
		return d.Errf("%s: %s, got %v", opt, rule, time.Duration(*to))
	}
	return nil
}
