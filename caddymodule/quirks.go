package caddymodule

import (
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/tidwall/gjson"
	"go.uber.org/zap"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/reverse"
)

// This file repairs the header bugs of clients known to have them
// (accept_client_quirks): at the front door, before the request's era is
// told; and, for a tools/call passed through, its Mcp-Param-* headers once
// the upstream is chosen, since they need its tool schemas. A repair only
// ever makes a header say what the body says, and only for a modern body
// (params._meta protocolVersion one the gateway serves); the request is
// then validated as any other, so a header that still disagrees with the
// body is refused (-32020).

// The repairs accept_client_quirks names.
const (
	// quirkProtocolHeader: an MCP-Protocol-Version header naming a legacy
	// revision on a body whose _meta names a modern one (Claude's
	// connectors send 2025-11-25 with 2026-07-28) is set to the body's.
	quirkProtocolHeader = "protocol_header_mismatch"
	// quirkMethodHeader: Mcp-Method and Mcp-Name, when absent, are filled
	// from the body's method and name, uri or taskId (stdio-to-HTTP
	// bridges that omit them).
	quirkMethodHeader = "missing_method_header"
)

// clientQuirks lists the repairs, in the order the docs give them.
var clientQuirks = []string{quirkProtocolHeader, quirkMethodHeader}

// maxClientNameLog bounds the client's name (_meta clientInfo.name) in
// the repair's log line.
const maxClientNameLog = 64

// quirkSet is the repairs a handler makes.
type quirkSet struct {
	protocolHeader bool
	methodHeader   bool
}

// checkClientQuirks checks an accept_client_quirks list.
func checkClientQuirks(names []string) error {
	for i, n := range names {
		if !slices.Contains(clientQuirks, n) {
			return fmt.Errorf("accept_client_quirks: unknown repair %q (want %s)", n, strings.Join(clientQuirks, " or "))
		}
		if slices.Contains(names[:i], n) {
			return fmt.Errorf("accept_client_quirks: %q is listed twice", n)
		}
	}
	return nil
}

// newQuirkSet returns the repairs names lists (checked already).
func newQuirkSet(names []string) quirkSet {
	return quirkSet{
		protocolHeader: slices.Contains(names, quirkProtocolHeader),
		methodHeader:   slices.Contains(names, quirkMethodHeader),
	}
}

// repairQuirks makes the repairs h accepts on the headers of the POST r
// whose body is body, logs each at debug and counts it.
func (h *Handler) repairQuirks(r *http.Request, body []byte) {
	if !h.quirks.protocolHeader && !h.quirks.methodHeader {
		return
	}
	v := gjson.GetBytes(body, paramsMetaVersion)
	if v.Type != gjson.String || !slices.Contains(supportedModern, v.Str) {
		return // not a modern body: nothing the body could vouch for
	}
	var made []string
	if h.quirks.protocolHeader {
		if hv := r.Header.Values(translate.HeaderProtocolVersion); len(hv) == 1 && translate.IsLegacyVersion(strings.TrimSpace(hv[0])) {
			r.Header.Set(translate.HeaderProtocolVersion, v.Str)
			made = append(made, quirkProtocolHeader)
		}
	}
	if h.quirks.methodHeader && fillMethodHeaders(r.Header, body) {
		made = append(made, quirkMethodHeader)
		routeOf(r).fillParams = true
	}
	for _, q := range made {
		h.metrics.quirkRepaired(q)
		if ce := h.logger.Check(zap.DebugLevel, "client quirk repaired"); ce != nil {
			ce.Write(zap.String("repair", q),
				zap.String("client", clipText(gjson.GetBytes(body, paramsMetaClientName).String(), maxClientNameLog)),
				zap.String("method", routeOf(r).method))
		}
	}
}

// fillMethodHeaders sets Mcp-Method, and Mcp-Name where the method has
// one, from the request body when hdr has none of that name; it reports
// whether it set one. A header present is left as it is, for the
// validator to compare. The Mcp-Param-* of a tools/call need the
// upstream's tool schemas: fillParamHeaders sets them once the upstream
// is chosen.
func fillMethodHeaders(hdr http.Header, body []byte) bool {
	m := gjson.GetBytes(body, "method")
	if m.Type != gjson.String || !gjson.GetBytes(body, "id").Exists() || !validMethodHeader(m.Str) {
		return false // a notification needs no Mcp-Method; an odd method gets none
	}
	filled := false
	if len(hdr.Values(translate.HeaderMethod)) == 0 {
		hdr.Set(translate.HeaderMethod, m.Str)
		filled = true
	}
	if field := translate.NameSourceField(m.Str); field != "" && len(hdr.Values(translate.HeaderName)) == 0 {
		if n := gjson.GetBytes(body, "params."+field); n.Type == gjson.String && n.Str != "" {
			hdr.Set(translate.HeaderName, reverse.EncodeHeaderValue(n.Str))
			filled = true
		}
	}
	return filled
}

// fillParamHeaders sets on hdr, the headers of the modern request l
// passed through to up, the Mcp-Param-* headers its tools/call lacks, when
// missing_method_header repaired its standard headers: from the
// x-mcp-header annotations of up's tools, read with its tools/list (with
// the client's credentials) and cached per upstream and principal, as the
// reverse bridge does for legacy clients.
func (h *Handler) fillParamHeaders(r *http.Request, hdr http.Header, l *learned, up *Upstream) {
	if !routeOf(r).fillParams || l.breq.Method != "tools/call" || h.reverse == nil {
		return
	}
	args := gjson.GetBytes(l.body, "params.arguments")
	if !args.IsObject() {
		return
	}
	n := h.reverse.FillParamHeaders(r.Context(), h.reverseOpts, up.URL, h.principal(r), h.bridgedHeader(r), hdr, l.breq.Name, []byte(args.Raw))
	if ce := h.logger.Check(zap.DebugLevel, "client quirk repaired: Mcp-Param-* headers"); ce != nil && n > 0 {
		ce.Write(zap.String("repair", quirkMethodHeader), zap.Int("headers", n), zap.String("upstream", up.URL))
	}
}

// validMethodHeader reports whether method can be sent as it is in an
// Mcp-Method header: visible ASCII, within translate.MaxMethodLength.
func validMethodHeader(method string) bool {
	if method == "" || len(method) > translate.MaxMethodLength {
		return false
	}
	for i := 0; i < len(method); i++ {
		if c := method[i]; c < 0x21 || c > 0x7e {
			return false
		}
	}
	return true
}

// The gjson paths repairQuirks reads, built once.
var (
	paramsMetaVersion    = translate.MetaPath("params", translate.MetaProtocolVersion)
	paramsMetaClientName = translate.MetaPath("params", translate.MetaClientInfo) + ".name"
)
