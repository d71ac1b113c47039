package caddymodule

import (
	"errors"
	"fmt"
	"path"
	"regexp"
	"strings"
	"time"
)

// The checks of a federated block (servers) that need no runtime, made
// the same for a Caddyfile (which points at the line of the server at
// fault) and for JSON. Their rules are those of the federation's name
// set: names, prefixes and tool globs a merged catalog can route back.

// maxServers bounds the servers of one block.
const maxServers = 64

var (
	// serverNamePattern is a server's name: it is put in task ids before a
	// ':', and in the default prefix.
	serverNamePattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
	// prefixPattern is a prefix: the characters of an MCP tool name.
	prefixPattern = regexp.MustCompile(`^[A-Za-z0-9_.-]{0,64}$`)
)

// effectivePrefix is what the server's names are prefixed with: its
// prefix, or `<name>__` when it has none.
func (s *Server) effectivePrefix() string {
	if s.Prefix != nil {
		return *s.Prefix
	}
	return s.Name + "__"
}

// checkServers checks the servers of the block, and what the block may
// not have beside them or without them, changing nothing. Each error
// names the server and the option at fault. Call it before setDefaults,
// which gives the block a selection_policy of its own.
func (h *Handler) checkServers() error {
	_, err := h.serverProblem()
	return err
}

// serverProblem is checkServers, with the index in h.Servers of the server
// at fault (-1: an option of the block), so that the Caddyfile can point
// at its line.
func (h *Handler) serverProblem() (int, error) {
	if h.Federation.ListTimeout < 0 {
		return -1, fmt.Errorf("list_timeout: must not be negative, got %v", time.Duration(h.Federation.ListTimeout))
	}
	if len(h.Servers) == 0 {
		if h.Federation.ListTimeout != 0 {
			return -1, errListTimeoutAlone
		}
		return -1, nil
	}
	if len(h.Servers) > maxServers {
		return maxServers, fmt.Errorf("servers: at most %d in a block, got %d", maxServers, len(h.Servers))
	}
	for _, o := range []struct {
		key string
		set bool
	}{
		{"upstreams", len(h.Upstreams) > 0},
		{"dynamic_upstreams", h.DynamicUpstreamsRaw != nil},
		{"dynamic_endpoint", h.DynamicEndpoint != nil},
		{"dynamic_refuse", h.DynamicRefuse != nil},
		{"selection_policy", h.SelectionPolicyRaw != nil},
		{"transport", h.TransportRaw != nil},
	} {
		if o.set {
			return -1, errBesideServers(o.key)
		}
	}
	for i, s := range h.Servers {
		if err := s.check(); err != nil {
			return i, err
		}
		for _, o := range h.Servers[:i] {
			if err := s.checkAgainst(o); err != nil {
				return i, err
			}
		}
	}
	return -1, nil
}

// check checks what a server needs by itself: a name, an upstream, a
// prefix and tool globs of the right form.
func (s *Server) check() error {
	if s == nil {
		return errors.New("servers: a server is null")
	}
	if !serverNamePattern.MatchString(s.Name) {
		return fmt.Errorf("server %q: name: want 1 to 64 letters, digits, '_' or '-'", s.Name)
	}
	if len(s.Upstreams) == 0 && s.DynamicUpstreamsRaw == nil {
		return fmt.Errorf("server %q: %w", s.Name, errNoUpstream)
	}
	if p := s.effectivePrefix(); !prefixPattern.MatchString(p) {
		hint := ""
		if s.Prefix == nil {
			hint = " (the default, the name and `__`: give the server a prefix)"
		}
		return fmt.Errorf("server %q: prefix %q%s: want at most 64 letters, digits, '_', '-' or '.'", s.Name, p, hint)
	}
	if s.Tools == nil {
		return nil
	}
	for _, list := range []struct {
		word  string
		globs []string
	}{{"include", s.Tools.Include}, {"exclude", s.Tools.Exclude}} {
		for _, g := range list.globs {
			if err := checkGlob(g); err != nil {
				return fmt.Errorf("server %q: tools %s: %w", s.Name, list.word, err)
			}
		}
	}
	return nil
}

// checkAgainst checks s against a server o listed before it: another
// name, and a prefix that neither equals o's nor begins it, nor is begun
// by it, so that every shown name routes back to one server.
func (s *Server) checkAgainst(o *Server) error {
	if s.Name == o.Name {
		return fmt.Errorf("server %q is listed twice", s.Name)
	}
	p, q := s.effectivePrefix(), o.effectivePrefix()
	switch {
	case p == "" && q == "":
		return fmt.Errorf("server %q: prefix \"\" is also server %q's: at most one server may show its names as they are", s.Name, o.Name)
	case p == "" || q == "":
		return nil
	case p == q:
		return fmt.Errorf("server %q: prefix %q is also server %q's: give each server its own", s.Name, p, o.Name)
	case strings.HasPrefix(p, q), strings.HasPrefix(q, p):
		return fmt.Errorf("server %q: prefix %q and server %q's prefix %q begin one another: "+
			"a name would route to the longer only, so neither may begin the other", s.Name, p, o.Name, q)
	}
	return nil
}

// checkGlob checks a tool glob's syntax (path.Match's).
func checkGlob(g string) error {
	if _, err := path.Match(g, ""); err != nil {
		return fmt.Errorf("glob %q: %w", g, err)
	}
	return nil
}

// Errors of options that need servers, or may not be beside them.
var errListTimeoutAlone = errors.New("list_timeout without servers: it applies only to a block of `server` blocks")

// errBesideServers is the error of an upstream option (opt) of the block
// itself beside its servers.
func errBesideServers(opt string) error {
	msg := opt + " beside servers: with `server` blocks, upstreams go inside them"
	if opt != "upstream" && opt != "upstreams" {
		msg += ", and " + opt + " with them"
	}
	return errors.New(msg)
}
