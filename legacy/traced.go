package legacy

import (
	"context"
	"net/http"

	"github.com/tidwall/gjson"
	"go.opentelemetry.io/otel/attribute"
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
	attrs := make([]attribute.KeyValue, 2, 5) // and error.type (EndWith)
	attrs[0], attrs[1] = traces.MethodName.String(method), traces.Upstream.String(s.URL)
	if msg[1].Exists() && msg[1].Type != gjson.Null {
		attrs = append(attrs, traces.RequestID.String(msg[1].String()))
	}
	if s.Version != "" {
		attrs = append(attrs, traces.ProtocolVersion.String(s.Version))
	}
	traces.EndWith(span, traces.ExchangeError(resp, err), attrs)
}

// getAfter reopens a call's stream: a GET with Last-Event-ID lastID. With
// tracing on (ctx carries the request's span) it is a client span of its
// own, named "resume", whose traceparent the upstream gets.
func (s *Session) getAfter(ctx context.Context, lastID string) (*http.Response, error) {
	ctx, span := traces.Start(ctx, "resume", trace.SpanKindClient)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL, nil)
	if err != nil {
		traces.End(span, "request")
		return nil, err
	}
	s.setHeaders(req.Header)
	traces.Inject(ctx, req.Header)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Last-Event-ID", lastID)
	s.touch()
	resp, err := s.client.Do(req)
	if span != nil {
		span.SetAttributes(traces.Upstream.String(s.URL))
		traces.End(span, traces.ExchangeError(resp, err))
	}
	return resp, err
}
