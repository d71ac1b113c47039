package auth

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/federate"
)

// Kind is what a scope rule names: tools, prompts or resources.
type Kind uint8

// The kinds of ScopeRule.
const (
	// Tools: tools/list's entries, tools/call's params.name.
	Tools Kind = iota
	// Prompts: prompts/list's entries, prompts/get's params.name and
	// completion/complete's params.ref.name.
	Prompts
	// Resources: resources/list's entries (their uri),
	// resources/templates/list's (their uriTemplate, the template's text),
	// the uri of resources/read, resources/subscribe and
	// resources/unsubscribe, completion/complete's params.ref.uri (a
	// template) and subscriptions/listen's resourceSubscriptions.
	Resources
)

// ScopeRule says that seeing and reaching the tools (prompts, resources)
// whose name (URI) matches Pattern needs Scope.
type ScopeRule struct {
	Kind Kind
	// Pattern is a glob matched against the name the client sees (a
	// federated block's prefixed name): federate.Filter's syntax ('*',
	// '?', '[...]'). For Resources, a URI glob (uriglob.go) matched
	// against the URI, or a template's text, as the client sees it.
	Pattern string
	// Scope is the scope the token must have been granted.
	Scope string
}

// matches reports whether r's pattern matches name.
func (r ScopeRule) matches(name string) bool {
	if r.Kind == Resources {
		return matchURI(r.Pattern, name)
	}
	return (federate.Filter{Include: []string{r.Pattern}}).Allows(name)
}

// ScopeRules are an endpoint's rules. A name needs the scope of every rule
// of its kind whose pattern it matches; a name no rule matches needs none.
type ScopeRules []ScopeRule

// Check says why rs is not valid (nil when it is): a malformed pattern, or
// a scope that is empty or holds a space, a quote or a backslash.
func (rs ScopeRules) Check() error {
	for _, r := range rs {
		check := (federate.Filter{Include: []string{r.Pattern}}).Check
		if r.Kind == Resources {
			check = func() error { return checkURIGlob(r.Pattern) }
		}
		if err := check(); err != nil {
			return err
		}
		if r.Scope == "" || strings.ContainsAny(r.Scope, "\" \\") {
			return fmt.Errorf("scope %q: a scope is not empty and has no spaces, quotes or backslashes", r.Scope)
		}
	}
	return nil
}

// Names reports whether some rule is of kind k: its lists then depend on
// the token.
func (rs ScopeRules) Names(k Kind) bool {
	return slices.ContainsFunc(rs, func(r ScopeRule) bool { return r.Kind == k })
}

// Allows reports whether a token granted scopes may see and reach k's
// name (a resource's URI, a template's text).
func (rs ScopeRules) Allows(k Kind, name string, granted []string) bool {
	for _, r := range rs {
		if r.Kind == k && !slices.Contains(granted, r.Scope) && r.matches(name) {
			return false
		}
	}
	return true
}

// named are the requests that name a tool, a prompt or a resource: their
// method, the kind they name and where the name is.
var named = []struct {
	method string
	kind   Kind
	path   []string
}{
	{"tools/call", Tools, []string{"params", "name"}},
	{"prompts/get", Prompts, []string{"params", "name"}},
	{"completion/complete", Prompts, []string{"params", "ref", "name"}},
	{"resources/read", Resources, []string{"params", "uri"}},
	{"resources/subscribe", Resources, []string{"params", "uri"}},
	{"resources/unsubscribe", Resources, []string{"params", "uri"}},
	{"completion/complete", Resources, []string{"params", "ref", "uri"}},
	{"subscriptions/listen", Resources, []string{"params", "notifications", "resourceSubscriptions"}},
}

// Refused returns the first tool, prompt or resource the JSON-RPC request
// body (a message, or a batch: each of its messages) names that a token
// granted scopes may not reach. Every value a parser could take is
// checked: each copy of a repeated member (gjson keeps the first,
// encoding/json and JSON.parse the last), so no reader of the body sees a
// name the check did not; a name that is an array (resourceSubscriptions)
// is each of its strings.
func (rs ScopeRules) Refused(body []byte, granted []string) (k Kind, name string, refused bool) {
	check := func(msg gjson.Result) bool {
		methods := values(msg, "method")
		for _, n := range named {
			if !slices.ContainsFunc(methods, func(m gjson.Result) bool { return m.Type == gjson.String && m.Str == n.method }) {
				continue
			}
			for _, v := range values(msg, n.path...) {
				names := []gjson.Result{v}
				if v.IsArray() {
					names = v.Array()
				}
				for _, s := range names {
					if s.Type == gjson.String && !rs.Allows(n.kind, s.Str, granted) {
						k, name, refused = n.kind, s.Str, true
						return false
					}
				}
			}
		}
		return true
	}
	eachMessage(body, check)
	return k, name, refused
}

// eachMessage calls fn with the JSON-RPC message body is, or with each
// message of the batch it is, until fn returns false.
func eachMessage(body []byte, fn func(msg gjson.Result) bool) {
	root := gjson.ParseBytes(body)
	if root.IsArray() {
		root.ForEach(func(_, msg gjson.Result) bool { return fn(msg) })
	} else {
		fn(root)
	}
}

// values are every value at path in obj, through every copy of each
// repeated member on the way.
func values(obj gjson.Result, path ...string) []gjson.Result {
	if !obj.IsObject() {
		return nil
	}
	var out []gjson.Result
	obj.ForEach(func(key, v gjson.Result) bool {
		if key.Str == path[0] {
			if len(path) == 1 {
				out = append(out, v)
			} else {
				out = append(out, values(v, path[1:]...)...)
			}
		}
		return true
	})
	return out
}

// lists are the list results rules filter: their method, the result's
// member holding the entries, the entry's member rules match and its kind.
var lists = []struct {
	method, member, key string
	kind                Kind
}{
	{"tools/list", "tools", "name", Tools},
	{"prompts/list", "prompts", "name", Prompts},
	{"resources/list", "resources", "uri", Resources},
	{"resources/templates/list", "resourceTemplates", "uriTemplate", Resources},
}

// ListKinds are the kinds of rs whose lists the JSON-RPC request body (a
// message or a batch) asks for: their answers must pass FilterList.
func (rs ScopeRules) ListKinds(body []byte) []Kind {
	var kinds []Kind
	add := func(msg gjson.Result) bool {
		for _, m := range values(msg, "method") {
			for _, l := range lists {
				if m.Str == l.method && rs.Names(l.kind) && !slices.Contains(kinds, l.kind) {
					kinds = append(kinds, l.kind)
				}
			}
		}
		return true
	}
	eachMessage(body, add)
	return kinds
}

// HidesUpdate reports whether the JSON-RPC message msg is a
// notifications/resources/updated about a URI a token granted scopes may
// not see (any copy of a repeated method or uri counts).
func (rs ScopeRules) HidesUpdate(msg []byte, granted []string) bool {
	m := gjson.ParseBytes(msg)
	if !slices.ContainsFunc(values(m, "method"), func(v gjson.Result) bool { return v.Str == "notifications/resources/updated" }) {
		return false
	}
	return slices.ContainsFunc(values(m, "params", "uri"), func(v gjson.Result) bool {
		return v.Type == gjson.String && !rs.Allows(Resources, v.Str, granted)
	})
}

// ErrUnfilterable is FilterList's error for a list it cannot filter
// safely: a member repeated where readers disagree on which copy counts.
var ErrUnfilterable = errors.New("a list answer repeats a member: it cannot be filtered")

// FilterList removes from the list of each of kinds in the JSON-RPC
// message msg (result.tools, result.prompts, result.resources,
// result.resourceTemplates) the entries a token granted scopes may not
// see, and says "private" as its cacheScope where it has one: the list
// depends on the token. An entry without one string name (uri,
// uriTemplate) is removed. A message that is no list result is returned
// as it is.
func (rs ScopeRules) FilterList(msg []byte, kinds []Kind, granted []string) ([]byte, error) {
	top, dup := jsonrpc.Members(string(msg))
	if dup != "" {
		return nil, ErrUnfilterable
	}
	i := slices.IndexFunc(top, func(m jsonrpc.Member) bool { return m.Name == "result" })
	if i < 0 || !top[i].Val.IsObject() {
		return msg, nil
	}
	res, dup := jsonrpc.Members(top[i].Val.Raw)
	if dup != "" {
		return nil, ErrUnfilterable
	}
	list := func(member string) (key string, k Kind, ok bool) {
		for _, l := range lists {
			if l.member == member && slices.Contains(kinds, l.kind) {
				return l.key, l.kind, true
			}
		}
		return "", 0, false
	}
	b := append(make([]byte, 0, len(top[i].Val.Raw)), '{')
	for _, m := range res {
		val := m.Val.Raw
		if key, k, ok := list(m.Name); ok && m.Val.IsArray() {
			val = string(rs.keep(m.Val, key, k, granted))
		} else if m.Name == "cacheScope" {
			val = `"private"`
		}
		b = jsonrpc.AppendMember(b, m.Key, val)
	}
	top[i].Val.Raw = string(append(b, '}'))
	out := append(make([]byte, 0, len(msg)), '{')
	for _, m := range top {
		out = jsonrpc.AppendMember(out, m.Key, m.Val.Raw)
	}
	return append(out, '}'), nil
}

// keep is the JSON array of list's entries of kind k, named by their
// member key, that granted may see.
func (rs ScopeRules) keep(list gjson.Result, key string, k Kind, granted []string) []byte {
	b := append(make([]byte, 0, len(list.Raw)), '[')
	list.ForEach(func(_, e gjson.Result) bool {
		names := values(e, key)
		if len(names) != 1 || names[0].Type != gjson.String || !rs.Allows(k, names[0].Str, granted) {
			return true
		}
		if len(b) > 1 {
			b = append(b, ',')
		}
		b = append(b, e.Raw...)
		return true
	})
	return append(b, ']')
}
