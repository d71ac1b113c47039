package federate

import (
	"slices"
	"strings"
	"sync"

	"github.com/tidwall/gjson"
)

// Bounds of resource routing.
const (
	MaxTemplate            = 1024    // bytes of a URI template that can match
	MaxTemplateExpressions = 32      // expressions of a URI template that can match
	MaxMatchURI            = 8192    // bytes of a URI a template can match
	MaxClaimedURIs         = 100_000 // URIs a Claims keeps
	MaxClaimedTemplates    = 1000    // templates a Claims keeps
)

// segment is a literal (op 0) or an expression of a parsed template.
type segment struct {
	op  byte   // 0, 's' (simple), or the operator: + # / . ; ? &
	lit string // the literal text
}

// parseTemplate splits a template into segments; !ok when it is beyond the
// bounds or malformed (an unclosed or stray brace, an empty expression,
// a reserved operator = , ! @ |, a character outside variable names).
func parseTemplate(t string) ([]segment, bool) {
	if len(t) > MaxTemplate {
		return nil, false
	}
	var segs []segment
	exprs := 0
	for t != "" {
		open := strings.IndexAny(t, "{}")
		if open < 0 {
			return append(segs, segment{lit: t}), true
		}
		if open > 0 {
			segs = append(segs, segment{lit: t[:open]})
		}
		if t[open] == '}' {
			return nil, false
		}
		end := strings.IndexByte(t[open:], '}')
		if end < 0 {
			return nil, false
		}
		body := t[open+1 : open+end]
		t = t[open+end+1:]
		if exprs++; exprs > MaxTemplateExpressions || body == "" {
			return nil, false
		}
		op := byte('s')
		if strings.IndexByte("+#./;?&", body[0]) >= 0 {
			op, body = body[0], body[1:]
		}
		if body == "" || strings.Trim(body, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.%:*,") != "" {
			return nil, false
		}
		segs = append(segs, segment{op: op})
	}
	return segs, true
}

// MatchTemplate reports whether uri is an expansion of the URI template
// (RFC 6570), loosely, as MCP resource templates need: literal text
// matches itself exactly; `{var}` (and `{var,var2}`, `{var:3}`,
// `{var*}`) a non-empty run without '/', '?' or '#'; `{+var}` any run;
// `{#var}` nothing or '#' and any run; `{/var}` nothing or '/' and a run
// without '?' or '#' (more segments too); `{.var}` and `{;var}` nothing
// or the operator and a run without '/', '?' or '#'; `{?var}` and
// `{&var}` nothing or the operator and a run without '#'. Values are not
// decoded. A template longer than MaxTemplate bytes, with more than
// MaxTemplateExpressions expressions, or malformed, never matches; nor
// does a URI longer than MaxMatchURI bytes.
//
// It runs in O(len(template) × len(uri)): every segment moves the set of
// positions of uri reachable so far in one pass (no backtracking), and
// it stops at the first segment that leaves none.
func MatchTemplate(template, uri string) bool {
	segs, ok := parseTemplate(template)
	return ok && matchSegments(segs, uri, nil)
}

// matchSegments matches parsed segments; work, when not nil, counts the
// steps taken (positions visited and literal bytes compared).
func matchSegments(segs []segment, uri string, work *int) bool {
	n := len(uri)
	if n > MaxMatchURI {
		return false
	}
	reach, next := make([]bool, n+1), make([]bool, n+1)
	reach[0] = true
	for _, s := range segs {
		clear(next)
		switch s.op {
		case 0:
			for p := 0; p+len(s.lit) <= n; p++ {
				if reach[p] {
					count(work, len(s.lit))
					next[p+len(s.lit)] = strings.HasPrefix(uri[p:], s.lit)
				}
			}
		case 's':
			run(uri, reach, next, noDelims, 1, work)
		case '+':
			run(uri, reach, next, none, 0, work)
		default:
			// nothing, or the operator and a run
			copy(next, reach)
			lead := make([]bool, n+1)
			for p := 0; p < n; p++ {
				lead[p+1] = reach[p] && uri[p] == s.op
			}
			run(uri, lead, next, stops(s.op), 0, work)
		}
		count(work, n+1)
		reach, next = next, reach
		if !slices.Contains(reach, true) {
			return false // no position left: the rest cannot match
		}
	}
	return reach[n]
}

// byteSet is a set of bytes.
type byteSet [256]bool

func newByteSet(chars string) *byteSet {
	var s byteSet
	for i := 0; i < len(chars); i++ {
		s[chars[i]] = true
	}
	return &s
}

// What a run may not hold: anything (none), a simple expression's and
// '.' and ';' (noDelims), '/' (noQuery), '?' and '&' (noFragment).
var (
	none       = newByteSet("")
	noDelims   = newByteSet("/?#")
	noQuery    = newByteSet("?#")
	noFragment = newByteSet("#")
)

// stops is what an operator's run may not hold.
func stops(op byte) *byteSet {
	switch op {
	case '#':
		return none
	case '/':
		return noQuery
	case '?', '&':
		return noFragment
	}
	return noDelims // . ;
}

// run marks in next every position q such that some p with from[p] is
// at least min before it and uri[p:q] holds none of stop: one pass.
func run(uri string, from, next []bool, stop *byteSet, min int, work *int) {
	open := false // some start so far reaches here with no stop since
	for q := 0; q <= len(uri); q++ {
		if min == 0 && from[q] {
			open = true
		}
		if open {
			next[q] = true
		}
		if min == 1 && from[q] {
			open = true
		}
		if q < len(uri) && stop[uri[q]] {
			open = false
		}
	}
	count(work, len(uri)+1)
}

func count(work *int, n int) {
	if work != nil {
		*work += n
	}
}

// Claims says which server a resource URI belongs to, from the servers'
// resources/list and resources/templates/list results. It is safe for
// concurrent use.
type Claims struct {
	set       *Set
	mu        sync.RWMutex
	exact     map[string]int // URI → the first server listing it
	templates [][][]segment  // by server, in the order listed
	kept      int            // templates kept, all servers
}

// NewClaims returns an empty Claims for the servers of set.
func NewClaims(set *Set) *Claims {
	return &Claims{set: set, exact: map[string]int{}, templates: make([][][]segment, set.Len())}
}

// AddResources records the URIs of a resources/list result (a page) of
// server, and returns how many it could not keep (beyond MaxClaimedURIs;
// entries without a string uri are skipped, not counted).
func (c *Claims) AddResources(server int, listResult []byte) (dropped int) {
	if server < 0 || server >= c.set.Len() {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	gjson.GetBytes(listResult, "resources").ForEach(func(_, item gjson.Result) bool {
		v, ok := onlyString(item, "uri")
		if !ok {
			return true
		}
		if owner, known := c.exact[v.Str]; known {
			c.exact[v.Str] = min(owner, server)
		} else if len(c.exact) < MaxClaimedURIs {
			c.exact[v.Str] = server
		} else {
			dropped++
		}
		return true
	})
	return dropped
}

// AddTemplates records the URI templates of a resources/templates/list
// result (a page) of server, and returns how many it could not keep
// (beyond MaxClaimedTemplates, or templates that never match:
// MatchTemplate).
func (c *Claims) AddTemplates(server int, listResult []byte) (dropped int) {
	if server < 0 || server >= c.set.Len() {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	gjson.GetBytes(listResult, "resourceTemplates").ForEach(func(_, item gjson.Result) bool {
		v, ok := onlyString(item, "uriTemplate")
		if !ok {
			return true
		}
		segs, ok := parseTemplate(v.Str)
		if !ok || c.kept >= MaxClaimedTemplates {
			dropped++
			return true
		}
		c.templates[server] = append(c.templates[server], segs)
		c.kept++
		return true
	})
	return dropped
}

// Owner is the server a resource URI belongs to: the first server in
// configuration order that lists it exactly, else the first whose
// template matches it; !ok when none does.
func (c *Claims) Owner(uri string) (server int, ok bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if i, ok := c.exact[uri]; ok {
		return i, true
	}
	for i, ts := range c.templates {
		for _, segs := range ts {
			if matchSegments(segs, uri, nil) {
				return i, true
			}
		}
	}
	return -1, false
}
