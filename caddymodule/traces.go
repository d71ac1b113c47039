package caddymodule

import (
	"cmp"
	"net/http"
	"strconv"

	"github.com/tidwall/gjson"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/traces"
)

// The gateway's spans (translate/traces): with Caddy's tracing directive
// on, every MCP request adds a span under Caddy's server span, attributed
// from its route when it has been served; its upstream exchanges (send,
// the bridges' legacy sessions) and its relay to another instance add
// client spans under it, whose W3C traceparent the upstream or the owner
// gets. Without tracing, nothing is built.

// startSpan starts the span of an MCP request when tracing is on; the
// span is nil otherwise.
func startSpan(r *http.Request) (*http.Request, trace.Span) {
	ctx, span := traces.Start(r.Context(), "mcp", trace.SpanKindServer)
	if span == nil {
		return r, nil
	}
	return r.WithContext(ctx), span
}

// endSpan names and attributes the span of a served request (nil: no
// span) from its route, its placeholders and its body, and ends it. No
// payload, token or principal is recorded: the session id only as a keyed
// digest.
func (h *Handler) endSpan(span trace.Span, r *http.Request, rt *route, status int, body []byte) {
	if span == nil {
		return
	}
	method := rt.method
	if method == "" {
		method = r.Method
	}
	// Room for every attribute below and error.type (EndWith): one
	// allocation, set on the span at once.
	attrs := make([]attribute.KeyValue, 0, 13)
	attrs = append(attrs, traces.MethodName.String(method))
	target := rt.tool // a face's request: the tool of the call it serves
	if target != "" {
		attrs = append(attrs, traces.ToolName.String(target), traces.OperationName.String(traces.ExecuteTool))
	} else if body != nil && (method == "tools/call" || method == "prompts/get") {
		target = clipLogged(gjson.GetBytes(body, "params.name").String())
		if method == "tools/call" {
			attrs = append(attrs, traces.ToolName.String(target), traces.OperationName.String(traces.ExecuteTool))
		} else {
			attrs = append(attrs, traces.PromptName.String(target))
		}
	}
	if id := gjson.GetBytes(body, "id"); body != nil && id.Exists() && id.Type != gjson.Null {
		attrs = append(attrs, traces.RequestID.String(clipLogged(id.String())))
	}
	version := r.Header.Get("Mcp-Protocol-Version")
	if version == "" && method == "initialize" {
		version = gjson.GetBytes(body, "params.protocolVersion").String()
	}
	if version != "" {
		attrs = append(attrs, traces.ProtocolVersion.String(clipLogged(version)))
	}
	if sid := r.Header.Get("Mcp-Session-Id"); sid != "" && h.keyring != nil {
		// The storage-name digest: keyed, and alike on every instance
		// that shares the state key.
		attrs = append(attrs, traces.SessionID.String(h.keyring.PrincipalName(translate.PrincipalHash(sid))))
	}
	outcome := placeholder(r, "outcome")
	for _, a := range [...]struct {
		key attribute.Key
		v   string
	}{{traces.Cell, cmp.Or(rt.cell, placeholder(r, "cell"))}, {traces.Outcome, outcome}, {traces.Server, rt.server},
		{traces.Owner, rt.owner}, {traces.Face, rt.face}} {
		if a.v != "" {
			attrs = append(attrs, a.key.String(a.v))
		}
	}
	if round, err := strconv.Atoi(placeholder(r, "round")); err == nil {
		attrs = append(attrs, traces.Round.Int(round))
	}
	span.SetName(traces.SpanName(method, target))
	traces.EndWith(span, errorType(status, outcome), attrs)
}

// endPathSpan names and attributes the span (nil: no span) of a request
// a PathFace served (the REST face: not MCP), and ends it: named after its
// HTTP method and the tool of the call it serves, if any (r's own
// internal MCP requests are spans of their own under it).
func endPathSpan(span trace.Span, r *http.Request, rt *route, status int) {
	if span == nil {
		return
	}
	span.SetName(traces.SpanName(r.Method, rt.tool))
	attrs := make([]attribute.KeyValue, 1, 4) // and error.type (EndWith)
	attrs[0] = traces.Face.String(rt.face)
	if rt.tool != "" {
		attrs = append(attrs, traces.ToolName.String(rt.tool), traces.OperationName.String(traces.ExecuteTool))
	}
	traces.EndWith(span, errorType(status, ""), attrs)
}

// errorType is a request's error.type: the HTTP status of an error answer,
// or an outcome that is an error (error, cancelled); "" for a success.
func errorType(status int, outcome string) string {
	switch {
	case status >= 400:
		return strconv.Itoa(status)
	case outcome == outcomeError || outcome == outcomeCancelled:
		return outcome
	}
	return ""
}
