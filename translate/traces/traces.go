// Package traces holds what the gateway's OpenTelemetry spans are named
// and attributed with, and the few helpers that start them and carry
// their context upstream. It does not import Caddy: the tracer is the one
// of the span already in a context (Caddy's tracing handler puts its
// server span there), so that without tracing nothing is built.
//
// The names follow the OpenTelemetry semantic conventions for the Model
// Context Protocol (semantic-conventions, docs/gen-ai/mcp.md, status
// Development): a span is named `{mcp.method.name} {target}`, the target
// being the tool's or prompt's name when there is one, and carries the
// attributes below. The mcp_gateway.* attributes are the gateway's own.
package traces

import (
	"context"
	"net/http"
	"reflect"
	"strconv"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Attribute keys of the semantic conventions for MCP.
const (
	// MethodName is the JSON-RPC method (mcp.method.name).
	MethodName = attribute.Key("mcp.method.name")
	// ProtocolVersion is the MCP revision spoken (mcp.protocol.version).
	ProtocolVersion = attribute.Key("mcp.protocol.version")
	// SessionID identifies the MCP session (mcp.session.id). The gateway
	// records only a keyed digest of its session ids, never the ids.
	SessionID = attribute.Key("mcp.session.id")
	// ToolName is the tool a tools/call names (gen_ai.tool.name).
	ToolName = attribute.Key("gen_ai.tool.name")
	// PromptName is the prompt a prompts/get names (gen_ai.prompt.name).
	PromptName = attribute.Key("gen_ai.prompt.name")
	// OperationName is execute_tool on a tools/call, and absent otherwise
	// (gen_ai.operation.name).
	OperationName = attribute.Key("gen_ai.operation.name")
	// RequestID is the JSON-RPC id as text, absent for a notification or
	// a null id (jsonrpc.request.id).
	RequestID = attribute.Key("jsonrpc.request.id")
	// ErrorType is the class of error an operation ended with: here the
	// HTTP status of an error answer, or the gateway's outcome
	// (error.type).
	ErrorType = attribute.Key("error.type")
)

// The gateway's own attribute keys.
const (
	// Server is the name of the federated block's server serving the
	// request (mcp_gateway.server).
	Server = attribute.Key("mcp_gateway.server")
	// Cell is the client's era, then the upstream's: modern-modern and
	// legacy-legacy pass through, modern-legacy is the forward bridge,
	// legacy-modern the reverse bridge (mcp_gateway.cell).
	Cell = attribute.Key("mcp_gateway.cell")
	// Round is a bridged request's input round, as the
	// {http.mcp_gateway.round} placeholder has it: for the forward bridge
	// the round of the requestState it carries, 0 for a first request
	// (mcp_gateway.round).
	Round = attribute.Key("mcp_gateway.round")
	// Outcome is how the request ended, as the {http.mcp_gateway.outcome}
	// placeholder has it: ok, error or cancelled, or a bridge's
	// (input_required, complete, expired, refused, …) (mcp_gateway.outcome).
	Outcome = attribute.Key("mcp_gateway.outcome")
	// Owner is the gateway instance a request was relayed to
	// (mcp_gateway.owner).
	Owner = attribute.Key("mcp_gateway.owner")
	// Upstream is the upstream's URL (mcp_gateway.upstream).
	Upstream = attribute.Key("mcp_gateway.upstream")
	// Face is the face of the gateway a request came through, when not
	// MCP's own endpoint: saga, multi_turn_sse or rest (mcp_gateway.face).
	// A face's request is named after the tool call it serves
	// (gen_ai.tool.name), and each modern request the face makes for it
	// is a span of its own under it; the later requests of the call (a
	// resumeSaga, a turn's answers, a REST poll or advance) link to the
	// span of its first (FirstRound).
	Face = attribute.Key("mcp_gateway.face")
)

// ExecuteTool is OperationName's value on a tools/call.
const ExecuteTool = "execute_tool"

// tracerName names the gateway's instrumentation scope.
const tracerName = "github.com/caddy-mcp-gateway/caddy-mcp-gateway"

// Start starts a span named name under the recording span of ctx, with
// the tracer provider that span came from. Without one (tracing off, or
// the trace not sampled) it starts nothing and returns ctx and nil; every
// helper here takes a nil span as "no span". Attributes are set by the
// caller on a span it got (a variadic argument here would be allocated on
// every call, tracing or not), best all at once at its end (EndWith).
func Start(ctx context.Context, name string, kind trace.SpanKind) (context.Context, trace.Span) {
	parent := trace.SpanFromContext(ctx)
	if !parent.IsRecording() {
		return ctx, nil
	}
	return tracerOf(parent.TracerProvider()).Start(ctx, name, kindOption(kind)...)
}

// kindOptions are the start options of each span kind, built once: an
// option built per span costs two allocations.
var kindOptions = func() (o [trace.SpanKindConsumer + 1][]trace.SpanStartOption) {
	for k := range o {
		o[k] = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKind(k))}
	}
	return o
}()

// kindOption is the start options of a span of kind.
func kindOption(kind trace.SpanKind) []trace.SpanStartOption {
	if int(kind) < len(kindOptions) {
		return kindOptions[kind]
	}
	return nil
}

// providerTracer is the gateway's tracer of one provider.
type providerTracer struct {
	provider trace.TracerProvider
	tracer   trace.Tracer
}

// lastTracer is the gateway's tracer of the provider Start last met: one
// per process in practice (Caddy's), which it then does not ask for its
// tracer by name, under a lock, on every span.
var lastTracer atomic.Pointer[providerTracer]

// tracerOf returns the gateway's tracer of tp.
func tracerOf(tp trace.TracerProvider) trace.Tracer {
	// Only a comparable provider is kept: comparing it with another of
	// the same type cannot panic.
	if last := lastTracer.Load(); last != nil && last.provider == tp {
		return last.tracer
	}
	tr := tp.Tracer(tracerName)
	if reflect.TypeOf(tp).Comparable() {
		lastTracer.Store(&providerTracer{provider: tp, tracer: tr})
	}
	return tr
}

// SpanName is a span's name after the semantic conventions: the method,
// then its target when there is one.
func SpanName(method, target string) string {
	if target == "" {
		return method
	}
	return method + " " + target
}

// End ends span (nil: nothing), an error when errorType is set: its
// status is then Error, described by errorType.
func End(span trace.Span, errorType string) {
	EndWith(span, errorType, nil)
}

// EndWith sets attrs on span (nil: nothing) and ends it, an error when
// errorType is set: error.type is then added to attrs, all set at once,
// and the status is Error, described by errorType. Each SetAttributes
// grows the span's attributes: the caller gathers them in one slice, with
// room for error.type.
func EndWith(span trace.Span, errorType string, attrs []attribute.KeyValue) {
	if span == nil {
		return
	}
	if errorType != "" {
		attrs = append(attrs, ErrorType.String(errorType))
	}
	if len(attrs) > 0 {
		span.SetAttributes(attrs...)
	}
	if errorType != "" {
		span.SetStatus(codes.Error, errorType)
	}
	span.End()
}

// ExchangeError is an upstream exchange's error.type: "connection" when it
// got no answer, the HTTP status of an answer of 400 or more, "" otherwise.
func ExchangeError(resp *http.Response, err error) string {
	switch {
	case err != nil:
		return "connection"
	case resp.StatusCode >= 400:
		return strconv.Itoa(resp.StatusCode)
	}
	return ""
}

// traceContext is the W3C Trace Context propagator.
var traceContext propagation.TraceContext

// Inject sets the W3C traceparent of the span context in ctx on an
// upstream request's header, with its tracestate (or none): whatever trace
// context header the client sent is replaced, so that a malformed or huge
// one the gateway ignored is not passed on. Without a valid span context
// in ctx the header is left as it is. The header is written as
// propagation.TraceContext writes it, without its per-call key
// canonicalisation and builder.
func Inject(ctx context.Context, hdr http.Header) {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return
	}
	delete(hdr, "Tracestate")
	if ts := sc.TraceState(); ts.Len() > 0 {
		hdr["Tracestate"] = []string{ts.String()}
	}
	hdr["Traceparent"] = []string{traceparent(sc)}
}

// traceparent is the version 00 traceparent of sc: its trace and span ids
// and only the flags W3C Trace Context defines (sampled, random).
func traceparent(sc trace.SpanContext) string {
	const lowerHex = "0123456789abcdef"
	tid, sid := sc.TraceID(), sc.SpanID()
	flags := byte(sc.TraceFlags() & (trace.FlagsSampled | trace.FlagsRandom))
	var b [55]byte // 00-{32}-{16}-{2}
	b[0], b[1], b[2] = '0', '0', '-'
	for i, c := range tid {
		b[3+2*i], b[4+2*i] = lowerHex[c>>4], lowerHex[c&0xf]
	}
	b[35] = '-'
	for i, c := range sid {
		b[36+2*i], b[37+2*i] = lowerHex[c>>4], lowerHex[c&0xf]
	}
	b[52], b[53], b[54] = '-', lowerHex[flags>>4], lowerHex[flags&0xf]
	return string(b[:])
}

// Extract returns ctx carrying the W3C trace context of a client's
// request header as a remote span context, when ctx has none of its own
// (tracing off) and the header has a valid traceparent: what the request
// sends upstream (Inject) then names the client's trace, each request its
// own. A malformed traceparent, or a tracestate that does not parse, is
// ignored as W3C Trace Context says. Without a traceparent it returns ctx
// and allocates nothing.
func Extract(ctx context.Context, hdr http.Header) context.Context {
	if len(hdr["Traceparent"]) == 0 || trace.SpanContextFromContext(ctx).IsValid() {
		return ctx
	}
	return traceContext.Extract(ctx, propagation.HeaderCarrier(hdr))
}

// WithoutTraceContext returns a copy of hdr without the W3C trace context
// headers: the headers a long-lived upstream session sends with every
// request, whose trace context is each request's own (Inject).
func WithoutTraceContext(hdr http.Header) http.Header {
	hdr = hdr.Clone()
	delete(hdr, "Traceparent")
	delete(hdr, "Tracestate")
	return hdr
}

// Carry returns to (a context that outlives a request: a call that parks)
// carrying the span of from, so that what the call sends upstream joins the
// request's trace.
func Carry(to, from context.Context) context.Context {
	if span := trace.SpanFromContext(from); span.SpanContext().IsValid() {
		return trace.ContextWithSpan(to, span)
	}
	return to
}

// Ref names a span of another request, for a later one to link to: the
// first round of a bridged call, which its later rounds link to. Its zero
// value names none. It is 25 bytes, kept by a parked call, and has the
// fields of seal.TraceRef, its sealed form in a resumable requestState
// (the two convert).
type Ref struct {
	TraceID [16]byte
	SpanID  [8]byte
	Flags   byte
}

// RefOf names the span of ctx: its recording span's, or (tracing off) the
// client's trace context Extract put there; the zero Ref when it has none.
func RefOf(ctx context.Context) Ref {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return Ref{}
	}
	return Ref{TraceID: sc.TraceID(), SpanID: sc.SpanID(), Flags: byte(sc.TraceFlags())}
}

// FirstRound is the attribute of a link to a call's first round
// (mcp_gateway.link: first_round).
var FirstRound = attribute.String("mcp_gateway.link", "first_round")

// Link adds to the recording span of ctx a link to the span ref names,
// with attribute, unless ref names none or a span of the same trace (a
// client that sent one traceparent for every round: the trace already
// shows them together).
func Link(ctx context.Context, ref Ref, attr attribute.KeyValue) {
	span := trace.SpanFromContext(ctx)
	if ref == (Ref{}) || !span.IsRecording() || span.SpanContext().TraceID() == ref.TraceID {
		return
	}
	span.AddLink(trace.Link{SpanContext: ref.spanContext(), Attributes: []attribute.KeyValue{attr}})
}
