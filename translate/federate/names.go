package federate

import (
	"errors"
	"fmt"
	"path"
	"strings"
)

// ServerName names one server of a federation: 1 to MaxServerName
// letters, digits, '_' or '-'. It never holds ':' (WrapTaskID relies on
// it).
type ServerName string

// Bounds of a federation's configuration.
const (
	MaxServers    = 64  // servers in a Set
	MaxServerName = 64  // bytes of a ServerName
	MaxPrefix     = 64  // bytes of a prefix
	MaxToolName   = 128 // bytes of a tool name (MCP's rule)
	MaxGlobs      = 64  // globs in each list of a Filter
	MaxGlob       = 256 // bytes of one glob
)

// CheckServerName says why s is not a valid ServerName (nil when it is).
func CheckServerName(s string) error {
	if s == "" || len(s) > MaxServerName {
		return fmt.Errorf("server name %q: must be 1 to %d characters", s, MaxServerName)
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !isAlnum(c) && c != '_' && c != '-' {
			return fmt.Errorf("server name %q: only letters, digits, '_' and '-' are allowed", s)
		}
	}
	return nil
}

// CheckPrefix says why s is not a valid prefix (nil when it is): at most
// MaxPrefix of the characters of tool names (letters, digits, '_', '-',
// '.'). "" is valid: the names are shown as the server gives them.
func CheckPrefix(s string) error {
	if len(s) > MaxPrefix {
		return fmt.Errorf("prefix %q: longer than %d characters", s, MaxPrefix)
	}
	if !toolNameChars(s) {
		return fmt.Errorf("prefix %q: only letters, digits, '_', '-' and '.' are allowed", s)
	}
	return nil
}

// ValidToolName reports whether s follows MCP's rule for tool names: 1 to
// 128 characters, each a letter, a digit, '_', '-' or '.'.
func ValidToolName(s string) bool {
	return s != "" && len(s) <= MaxToolName && toolNameChars(s)
}

func toolNameChars(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !isAlnum(c) && c != '_' && c != '-' && c != '.' {
			return false
		}
	}
	return true
}

func isAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

// Filter keeps some names of a list and drops the others, by globs with
// path.Match's syntax: '*' matches any run of characters, '?' one
// character, '[...]' one of a class ('\' escapes). Names have no '/', so
// '*' matches the whole of any name.
type Filter struct {
	// Include keeps only the names matching one of these globs. Empty:
	// every name.
	Include []string
	// Exclude then drops the names matching one of these globs.
	Exclude []string
}

// Check says why f is not valid (nil when it is): a malformed glob, one
// longer than MaxGlob, or more than MaxGlobs in a list.
func (f Filter) Check() error {
	for _, list := range [][]string{f.Include, f.Exclude} {
		if len(list) > MaxGlobs {
			return fmt.Errorf("more than %d globs", MaxGlobs)
		}
		for _, g := range list {
			if g == "" || len(g) > MaxGlob {
				return fmt.Errorf("glob %q: must be 1 to %d characters", g, MaxGlob)
			}
			if _, err := path.Match(g, ""); err != nil {
				return fmt.Errorf("glob %q: %w", g, err)
			}
		}
	}
	return nil
}

// Allows reports whether f keeps name. f must have passed Check.
func (f Filter) Allows(name string) bool {
	return (len(f.Include) == 0 || matchAny(f.Include, name)) && !matchAny(f.Exclude, name)
}

func matchAny(globs []string, name string) bool {
	for _, g := range globs {
		if ok, _ := path.Match(g, name); ok {
			return true
		}
	}
	return false
}

// Server is one server of a federation, as the Set needs it.
type Server struct {
	// Name names the server (CheckServerName).
	Name ServerName
	// Prefix is what its tool and prompt names are shown with
	// (CheckPrefix); the caller applies the default, "<name>__".
	Prefix string
	// Tools is which of its tools are shown, by their own names.
	Tools Filter
}

// Set is the servers of one federation, in configuration order (a
// server's index in it is its number everywhere in this package). It is
// immutable and safe for concurrent use.
type Set struct {
	servers []Server
	index   map[ServerName]int
	bare    int // the server whose prefix is "", or -1
}

// ErrConfig wraps every error of NewSet.
var ErrConfig = errors.New("federation")

// NewSet checks servers and returns their Set. It refuses an invalid name,
// prefix or filter, a name or a prefix used twice, a non-empty prefix that
// begins another (names would route ambiguously), more than one server
// with the prefix "", no server, and more than MaxServers.
func NewSet(servers []Server) (*Set, error) {
	if len(servers) == 0 || len(servers) > MaxServers {
		return nil, fmt.Errorf("%w: %d servers, want 1 to %d", ErrConfig, len(servers), MaxServers)
	}
	s := &Set{servers: append([]Server(nil), servers...), index: make(map[ServerName]int, len(servers)), bare: -1}
	for i, sv := range s.servers {
		if err := CheckServerName(string(sv.Name)); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrConfig, err)
		}
		if err := CheckPrefix(sv.Prefix); err != nil {
			return nil, fmt.Errorf("%w: server %s: %w", ErrConfig, sv.Name, err)
		}
		if err := sv.Tools.Check(); err != nil {
			return nil, fmt.Errorf("%w: server %s: tools: %w", ErrConfig, sv.Name, err)
		}
		if _, dup := s.index[sv.Name]; dup {
			return nil, fmt.Errorf("%w: server name %s used twice", ErrConfig, sv.Name)
		}
		s.index[sv.Name] = i
		if sv.Prefix == "" {
			if s.bare >= 0 {
				return nil, fmt.Errorf("%w: servers %s and %s both have the prefix \"\"", ErrConfig, s.servers[s.bare].Name, sv.Name)
			}
			s.bare = i
			continue
		}
		for _, o := range s.servers[:i] {
			if o.Prefix != "" && (strings.HasPrefix(o.Prefix, sv.Prefix) || strings.HasPrefix(sv.Prefix, o.Prefix)) {
				return nil, fmt.Errorf("%w: the prefixes of servers %s (%q) and %s (%q) collide: one begins the other",
					ErrConfig, o.Name, o.Prefix, sv.Name, sv.Prefix)
			}
		}
	}
	return s, nil
}

// Len is the number of servers.
func (s *Set) Len() int { return len(s.servers) }

// Name is the name of server i.
func (s *Set) Name(i int) ServerName { return s.servers[i].Name }

// Prefix is the prefix of server i.
func (s *Set) Prefix(i int) string { return s.servers[i].Prefix }

// Index is the index of the server called name, or -1.
func (s *Set) Index(name ServerName) int {
	if i, ok := s.index[name]; ok {
		return i
	}
	return -1
}

// Route finds the server a shown (prefixed) tool or prompt name belongs
// to, and the name it has there: the server whose non-empty prefix is the
// longest one prefixed begins with, leaving a non-empty name; else the
// server with the prefix "", if any, with prefixed unchanged; else !ok.
func (s *Set) Route(prefixed string) (server int, name string, ok bool) {
	best := -1
	for i, sv := range s.servers {
		if sv.Prefix != "" && len(prefixed) > len(sv.Prefix) && strings.HasPrefix(prefixed, sv.Prefix) &&
			(best < 0 || len(sv.Prefix) > len(s.servers[best].Prefix)) {
			best = i
		}
	}
	switch {
	case best >= 0:
		return best, prefixed[len(s.servers[best].Prefix):], true
	case s.bare >= 0:
		return s.bare, prefixed, true
	}
	return -1, "", false
}

// Reasons an entry of a server is hidden (Hidden.Why).
const (
	// WhyInvalidName: the name is empty, or the shown name breaks MCP's
	// tool-name rule (a character outside letters, digits, '_', '-', '.',
	// or longer than 128 with its prefix).
	WhyInvalidName = "invalid name"
	// WhyCollision: the shown name would route to another server (a
	// name of the "" server that begins with another server's prefix).
	WhyCollision = "collision"
	// WhyDuplicate: a resource URI an earlier server already lists.
	WhyDuplicate = "duplicate uri"
	// WhyMalformed: an entry that is not an object, lacks its name or
	// URI (a string), or repeats it; or a part that is not a JSON object.
	WhyMalformed = "malformed"
	// WhyTooMany: a part's entries beyond MaxListItems (Name is "").
	WhyTooMany = "too many entries"
)

// Prefixed is the name server's tool or prompt called name is shown
// with; !ok when it may not be shown: it is not a valid tool name, or it
// would route to another server or name (a collision).
func (s *Set) Prefixed(server int, name string) (string, bool) {
	shown, why := s.shown(server, name)
	return shown, why == ""
}

// shown is Prefixed with the reason for !ok.
func (s *Set) shown(server int, name string) (string, string) {
	shown := s.servers[server].Prefix + name
	if name == "" || !ValidToolName(shown) {
		return "", WhyInvalidName
	}
	if i, n, ok := s.Route(shown); !ok || i != server || n != name {
		return "", WhyCollision
	}
	return shown, ""
}

// ToolShown reports whether server's tool called name is shown (and may
// be called): its shown name is valid and routes back, and the server's
// Tools filter keeps it.
func (s *Set) ToolShown(server int, name string) bool {
	_, ok := s.Prefixed(server, name)
	return ok && s.servers[server].Tools.Allows(name)
}
