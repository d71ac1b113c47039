package legacy

import (
	"net/http"

	"github.com/tidwall/gjson"
	"go.opentelemetry.io/otel/trace"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/traces"
)

// endSpan attributes and ends the client span of one POST of the session
// (body is the message it carried), at the upstream's answer headers: named
// after the message's method (initialize, tools/call, a notification), or
// "response" for the client's answer to an in-line request.
func (s *Session) endSpan(span trace.Span, body []byte, resp *http.Response, err error) {
	msg := gjson.GetManyBytes(body, "method", "id")
	method := msg[0].String()
	if method == "" {
		method = "response"
	}
	span.SetName(method)
	span.SetAttributes(traces.MethodName.String(method), traces.Upstream.String(s.URL))
	if msg[1].Exists() && msg[1].Type != gjson.Null {
		span.SetAttributes(traces.RequestID.String(msg[1].String()))
	}
	if s.Version != "" {
		span.SetAttributes(traces.ProtocolVersion.String(s.Version))
	}
	traces.End(span, traces.ExchangeError(resp, err))
}
