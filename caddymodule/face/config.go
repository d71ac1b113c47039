package face

import (
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
