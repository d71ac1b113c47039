package caddymodule

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"slices"

	"github.com/tidwall/gjson"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/auth"
)

// This file is `auth`'s tools by scope (tool_scope, prompt_scope,
// resource_scope): what a token may see in the lists and call or read,
// decided from the request's body at the front door, for every way a
// call comes in.
//
// Every request with a body passes dispatch (the MCP endpoint, the
// faces' internal requests, a request relayed from another instance,
// which authenticates again here) or servedBy (a face's later rounds on
// the upstream of its call): both refuse a call out of scope before
// anything is routed, relayed or parked, and dispatch filters the lists
// of the answer (a bridge's, a pass-through's or a federated block's
// merged page, after its cache) on their way to the client; with
// resource rules, it also drops from every SSE answer, and from a legacy
// session's GET stream, the updates of resources the token may not see.

// ScopeRule is one rule of `tool_scope`, `prompt_scope` or
// `resource_scope`: the tools (prompts, resources) whose name (URI)
// matches Pattern need Scope.
type ScopeRule struct {
	// A glob on the name the client sees (in a federated block, the
	// prefixed name): `*` matches any run of characters, `?` one, `[...]`
	// one of a class, `\` escapes. The syntax of a server's
	// `tools include|exclude`. For `resource_scope`, a glob on the URI
	// (or a template's text) where `*` and `?` match `/` too, without `{`
	// or `}`. Required.
	Pattern string `json:"pattern,omitempty"`
	// The scope a token must have been granted to see and call them.
	// Required.
	Scope string `json:"scope,omitempty"`
}

// unmarshalScopeRule parses `tool_scope|prompt_scope|resource_scope
// <pattern> <scope>` into *to.
func unmarshalScopeRule(d *caddyfile.Dispenser, to *[]ScopeRule) error {
	opt, args := d.Val(), d.RemainingArgs()
	if len(args) != 2 {
		return d.Errf("%s needs a pattern and a scope", opt)
	}
	*to = append(*to, ScopeRule{Pattern: args[0], Scope: args[1]})
	return nil
}

// scopeRules are c's tool_scope, prompt_scope and resource_scope rules.
func (c *AuthConfig) scopeRules() auth.ScopeRules {
	var rs auth.ScopeRules
	for _, k := range []struct {
		kind  auth.Kind
		rules []ScopeRule
	}{{auth.Tools, c.ToolScope}, {auth.Prompts, c.PromptScope}, {auth.Resources, c.ResourceScope}} {
		for _, r := range k.rules {
			rs = append(rs, auth.ScopeRule{Kind: k.kind, Pattern: r.Pattern, Scope: r.Scope})
		}
	}
	return rs
}

// checkScopeRules says why c's tool_scope, prompt_scope or
// resource_scope is not valid.
func (c *AuthConfig) checkScopeRules() error {
	if err := c.scopeRules().Check(); err != nil {
		return fmt.Errorf("tool_scope/prompt_scope/resource_scope: %w", err)
	}
	return nil
}

// scopesSupported are the metadata's scopes_supported: require_scope's,
// then those the rules name, each once.
func (c *AuthConfig) scopesSupported() []string {
	s := slices.Clone(c.RequireScope)
	for _, r := range c.scopeRules() {
		if !slices.Contains(s, r.Scope) {
			s = append(s, r.Scope)
		}
	}
	return s
}

// grantedKey holds the scopes of an authenticated request's token.
type grantedKey struct{}

// withGranted returns r carrying the scopes its token was granted.
func withGranted(r *http.Request, scopes []string) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), grantedKey{}, scopes))
}

// granted are the scopes r's token was granted: none when the gateway did
// not authenticate r.
func granted(r *http.Request) []string {
	s, _ := r.Context().Value(grantedKey{}).([]string)
	return s
}

// refuseOutOfScope answers a request body naming a tool, prompt or
// resource r's token may not reach as the servers answer a name they do
// not have (in-band, HTTP 200, as the federated block's own answer for an
// unknown name; unknownName), and reports whether it did. In a batch,
// each request naming one gets that answer, and the others an Invalid
// Request: none is sent.
func (h *Handler) refuseOutOfScope(w http.ResponseWriter, r *http.Request, body []byte) (bool, error) {
	if h.auth == nil || len(h.auth.rules) == 0 {
		return false, nil
	}
	scopes := granted(r)
	k, name, refused := h.auth.rules.Refused(body, scopes)
	if !refused {
		return false, nil
	}
	legacy := translate.ClassifyRequest(r.Header, body) == translate.EraLegacy
	root := gjson.ParseBytes(body)
	if !root.IsArray() {
		return true, jsonrpc.WriteError(w, requestID(body), unknownName(k, name, legacy))
	}
	out := []byte{'['}
	root.ForEach(func(_, msg gjson.Result) bool {
		id := requestID([]byte(msg.Raw))
		if id == nil || !msg.Get("method").Exists() {
			return true // a notification or an answer: nothing to say
		}
		rerr := &jsonrpc.RPCError{Code: jsonrpc.InvalidRequest, Message: "Invalid Request: this batch names a tool, prompt or resource the server does not have; none of its requests was sent"}
		if k, name, refused := h.auth.rules.Refused([]byte(msg.Raw), scopes); refused {
			rerr = unknownName(k, name, legacy)
		}
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = append(out, jsonrpc.ErrorResponse(id, rerr)...)
		return true
	})
	w.Header().Set("Content-Type", "application/json")
	_, err := w.Write(append(out, ']'))
	return true, err
}

// unknownName is the answer to a request naming a tool (prompt) that is
// not there: -32602, in-band; for a resource, the era's resource not
// found (-32002 to a 2025-11-25 request), the URI in data.uri.
func unknownName(k auth.Kind, name string, legacy bool) *jsonrpc.RPCError {
	what := "Unknown tool: "
	switch k {
	case auth.Prompts:
		what = "Unknown prompt: "
	case auth.Resources:
		rerr := resourceNotFound(name) // federation_serve.go
		if legacy {
			rerr.Code = translate.ResourceNotFoundLegacy
		}
		return rerr
	}
	return &jsonrpc.RPCError{HTTPStatus: http.StatusOK, Code: jsonrpc.InvalidParams, Message: what + jsonrpc.Clip(name)}
}

// filterLists returns the writer the answer to a request (its body; nil
// for a GET stream) must go through (a listFilter, which the caller must
// finish), or nil: one asking for a list that rules name, and, where
// resource rules exist, every one (an SSE stream may carry a resource's
// updates).
func (h *Handler) filterLists(w http.ResponseWriter, r *http.Request, body []byte) *listFilter {
	if h.auth == nil || len(h.auth.rules) == 0 {
		return nil
	}
	kinds := h.auth.rules.ListKinds(body)
	updates := h.auth.rules.Names(auth.Resources)
	if len(kinds) == 0 && !updates {
		return nil
	}
	return &listFilter{ResponseWriter: w, rules: h.auth.rules, kinds: kinds, updates: updates, granted: granted(r)}
}

// listFilter removes from the list results of an answer the entries its
// token may not see (auth.ScopeRules.FilterList): in a JSON answer (held
// whole, with its status, bounded by maxFilteredAnswer) or in an SSE
// stream (line by line as it passes: a message is one data line, as every
// MCP SDK and the gateway write them). With updates, an SSE stream also
// loses the notifications/resources/updated about a URI the token may not
// see (auth.ScopeRules.HidesUpdate), and a JSON answer that is no list
// passes as it is written. It fails closed: a JSON answer too large to
// hold becomes an error, and an SSE data line that is not a whole JSON
// message (a message cut over several data lines), or a line too long to
// hold, is dropped.
type listFilter struct {
	http.ResponseWriter
	rules   auth.ScopeRules
	kinds   []auth.Kind
	updates bool // drop the updates of resources the token may not see
	granted []string
	mode    int    // 0 not known yet, 1 SSE, -1 JSON held, 2 JSON passed
	status  int    // JSON: the status, written at finish
	held    []byte // JSON: the answer so far; SSE: a line not ended yet
	tooLong bool   // JSON: the answer outgrew the bound; SSE: the line did, dropped to its end
}

// maxFilteredAnswer bounds the answer (or SSE line) a listFilter holds.
const maxFilteredAnswer = 64 << 20

func (w *listFilter) WriteHeader(status int) {
	w.decide()
	if w.mode < 0 {
		w.status = status
		return
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *listFilter) decide() {
	if w.mode != 0 {
		return
	}
	w.mode = -1
	if mt, _, _ := mime.ParseMediaType(w.Header().Get("Content-Type")); mt == "text/event-stream" {
		w.mode = 1
	} else if len(w.kinds) == 0 {
		w.mode = 2 // no list to filter
		return
	}
	w.Header().Del("Content-Length") // the lists shrink
}

func (w *listFilter) Write(b []byte) (int, error) {
	w.decide()
	if w.mode == 2 {
		return w.ResponseWriter.Write(b)
	}
	if w.mode < 0 {
		if !w.tooLong && len(w.held)+len(b) > maxFilteredAnswer {
			w.tooLong, w.held = true, nil
		}
		if !w.tooLong {
			w.held = append(w.held, b...)
		}
		return len(b), nil
	}
	w.held = append(w.held, b...)
	var out []byte
	_ = eachLine(&w.held, func(l []byte) error {
		if w.tooLong {
			w.tooLong = false // the end of the line dropped
			return nil
		}
		out = append(out, w.line(l)...)
		return nil
	})
	if len(w.held) > maxFilteredAnswer {
		w.tooLong, w.held = true, nil
	}
	if len(out) > 0 {
		if _, err := w.ResponseWriter.Write(out); err != nil {
			return 0, err
		}
	}
	return len(b), nil
}

// line filters one SSE line (with its end).
func (w *listFilter) line(l []byte) []byte {
	msg, ok := sseData(l)
	if !ok || len(bytes.TrimSpace(msg)) == 0 {
		return l
	}
	if jsonrpc.ValidJSON(msg) != nil {
		return nil
	}
	m := w.message(msg)
	switch {
	case m == nil:
		return nil
	case bytes.Equal(m, bytes.TrimSpace(msg)):
		return l // as it came (most messages of a stream)
	}
	out := append([]byte("data: "), m...)
	return append(out, l[len(bytes.TrimRight(l, "\r\n")):]...)
}

// message filters one JSON-RPC message, or a batch of them: nil when
// nothing of it is left (a hidden update).
func (w *listFilter) message(msg []byte) []byte {
	msg = bytes.TrimSpace(msg)
	if len(msg) > 0 && msg[0] == '[' {
		out := []byte{'['}
		gjson.ParseBytes(msg).ForEach(func(_, m gjson.Result) bool {
			kept := w.message([]byte(m.Raw))
			if kept == nil {
				return true
			}
			if len(out) > 1 {
				out = append(out, ',')
			}
			out = append(out, kept...)
			return true
		})
		if len(out) == 1 {
			return nil
		}
		return append(out, ']')
	}
	if w.updates && w.rules.HidesUpdate(msg, w.granted) {
		return nil
	}
	if len(w.kinds) == 0 {
		return msg
	}
	out, err := w.rules.FilterList(msg, w.kinds, w.granted)
	if err != nil {
		id := json.RawMessage(gjson.GetBytes(msg, "id").Raw)
		return jsonrpc.ErrorResponse(id, &jsonrpc.RPCError{Code: jsonrpc.InternalError, Message: "Internal error: the server's list could not be read"})
	}
	return out
}

// finish writes a held JSON answer, its lists filtered.
func (w *listFilter) finish() {
	if w.mode != -1 {
		return
	}
	body := bytes.TrimSpace(w.held)
	switch {
	case w.tooLong:
		_ = jsonrpc.WriteError(w.ResponseWriter, nil, &jsonrpc.RPCError{HTTPStatus: http.StatusBadGateway, Code: jsonrpc.InternalError,
			Message: "the server's list answer is too large to be filtered"})
		return
	case jsonrpc.ValidJSON(body) == nil && len(body) > 0:
		body = w.message(body)
	case w.status == 0 && len(body) == 0:
		return // nothing was written: the caller answers
	}
	if w.status != 0 {
		w.ResponseWriter.WriteHeader(w.status)
	}
	_, _ = w.ResponseWriter.Write(body)
}

// Flush passes a flush on (SSE: the lines written so far are out; a JSON
// answer passed as it is written).
func (w *listFilter) Flush() {
	w.decide()
	if w.mode > 0 {
		_ = http.NewResponseController(w.ResponseWriter).Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (w *listFilter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
