package caddymodule

import (
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

// unmarshalServer reads `server <name> { ... }` into a new server of the
// block: its prefix, tools filter and upstream options (those of the block
// itself, upstreamFields). Its name, and what involves other servers, are
// checked once the block is read (checkParsedServers).
func (h *Handler) unmarshalServer(d *caddyfile.Dispenser, at *parsedAt) error {
	tok := d.Token()
	if !d.NextArg() {
		return d.Err("server needs a name: server <name> { upstream <url> ... }")
	}
	s := &Server{Name: d.Val()}
	if d.NextArg() {
		return d.Errf("server takes one name; options go in its block, got %q", d.Val())
	}
	fields := s.upstreamFields()
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		var err error
		switch opt := d.Val(); opt {
		case "prefix":
			err = s.unmarshalPrefix(d)
		case "tools":
			err = s.unmarshalTools(d)
		case "upstream_auth":
			err = unmarshalUpstreamAuth(d, &s.UpstreamAuth)
		default:
			var ok bool
			if ok, err = fields.unmarshalOption(d, opt); !ok {
				return d.Errf("unrecognized server option %q (the block's other options go outside the server blocks, and apply to each)", opt)
			}
		}
		if err != nil {
			return err
		}
	}
	h.Servers = append(h.Servers, s)
	at.servers = append(at.servers, tok)
	return nil
}

// unmarshalPrefix reads `prefix <prefix>` (`prefix ""` for none).
func (s *Server) unmarshalPrefix(d *caddyfile.Dispenser) error {
	if s.Prefix != nil {
		return d.Err("prefix already specified")
	}
	var p string
	if !d.Args(&p) || d.NextArg() {
		return d.Err(`prefix takes one prefix (prefix "" for none)`)
	}
	if !prefixPattern.MatchString(p) {
		return d.Errf("prefix %q: want at most 64 letters, digits, '_', '-' or '.'", p)
	}
	s.Prefix = &p
	return nil
}

// unmarshalTools reads `tools include|exclude <glob...>`, which adds to
// the server's tools filter.
func (s *Server) unmarshalTools(d *caddyfile.Dispenser) error {
	if !d.NextArg() {
		return d.Err("tools needs include or exclude, then globs: tools include|exclude <glob...>")
	}
	if s.Tools == nil {
		s.Tools = new(NameFilter)
	}
	word := d.Val()
	var to *[]string
	switch word {
	case "include":
		to = &s.Tools.Include
	case "exclude":
		to = &s.Tools.Exclude
	default:
		return d.Errf("tools %q: want include or exclude, then globs", word)
	}
	globs := d.RemainingArgs()
	if len(globs) == 0 {
		return d.Errf("tools %s needs at least one glob", word)
	}
	for _, g := range globs {
		if err := checkGlob(g); err != nil {
			return d.Errf("tools %s: %v", word, err)
		}
	}
	*to = append(*to, globs...)
	return nil
}

// checkParsedServers checks, once the block is read, the servers
// (checkServers), and the block's options that need servers or may not be
// beside them, at the line of the option or the server at fault.
func (h *Handler) checkParsedServers(at parsedAt) error {
	if len(h.Servers) > 0 && at.upstream.Text != "" {
		return errAt(at.upstream, errBesideServers(at.upstream.Text).Error())
	}
	if len(h.Servers) == 0 && at.listTimeout.Text != "" {
		return errAt(at.listTimeout, errListTimeoutAlone.Error())
	}
	i, err := h.serverProblem()
	if err == nil {
		return nil
	}
	tok := at.directive
	if i >= 0 && i < len(at.servers) {
		tok = at.servers[i]
	}
	return errAt(tok, err.Error())
}
