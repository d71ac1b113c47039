package reverse

import (
	"cmp"
	"context"
	"net/http"

	"github.com/tidwall/gjson"
	"go.opentelemetry.io/otel/trace"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/traces"
)

// The reverse bridge's spans: with tracing on (the client request's
// context carries its span), each POST to the modern upstream — a call's
// first request, each retry with the client's answers to its in-line
// requests, a task's polls, discovery, a subscription — is a client span
// under the client request's, named after the request's method and ended
// at the answer's headers. A call's rounds are all under the span of the
// client's one request, each with its round number.

// roundKey is the context key of a call's round (withRound).
type roundKey struct{}

// withRound returns ctx naming the round of the call's exchange it is
// for, when tracing is on (ctx as it is otherwise: nothing allocated).
func withRound(ctx context.Context, round int) context.Context {
	if !trace.SpanFromContext(ctx).IsRecording() {
		return ctx
	}
	return context.WithValue(ctx, roundKey{}, round)
}

// startExchange starts the span of one POST to upstream (nil without
// tracing): named after its Mcp-Method, with its JSON-RPC id and round.
// No payload: the body is read only for its id.
func startExchange(ctx context.Context, upstream string, hdr http.Header, body []byte) (context.Context, trace.Span) {
	ctx, span := traces.Start(ctx, http.MethodPost, trace.SpanKindClient)
	if span == nil {
		return ctx, nil
	}
	method := cmp.Or(hdr.Get(translate.HeaderMethod), http.MethodPost)
	span.SetName(method)
	span.SetAttributes(traces.MethodName.String(method), traces.ProtocolVersion.String(translate.ModernVersion),
		traces.Upstream.String(upstream))
	if id := gjson.GetBytes(body, "id"); id.Exists() && id.Type != gjson.Null {
		span.SetAttributes(traces.RequestID.String(id.String()))
	}
	if round, ok := ctx.Value(roundKey{}).(int); ok {
		span.SetAttributes(traces.Round.Int(round))
	}
	return ctx, span
}
