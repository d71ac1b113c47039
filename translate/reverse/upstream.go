package reverse

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/tidwall/gjson"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/legacy"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/traces"
)

// Talking to a modern upstream over HTTP, for the reverse bridge: the
// request's body (upstreamRequest) and headers (modernHeader), one POST
// (postModern), and reading its answer, a JSON message or an SSE stream,
// into the response to the request, or the error the client gets
// (exchange).

// maxModernAnswer bounds one JSON answer, or one SSE event, from a modern
// upstream.
const maxModernAnswer = 16 << 20

// errNoResponse means the upstream's answer ended without the JSON-RPC
// response to the request.
var errNoResponse = errors.New("the upstream answer ended without a response")

// modernAnswer is the answer of a modern upstream to one POST: a single JSON
// message, or an SSE stream of messages ending with the response.
type modernAnswer struct {
	status int
	body   io.ReadCloser
	*legacy.MessageReader
}

// postModern sends one modern JSON-RPC request upstream. An HTTP error
// status is not an error here: its body may still be a JSON-RPC error.
// With tracing on (ctx carries the client request's span) the POST is a
// client span of its own (traced.go), whose traceparent the upstream gets.
func postModern(ctx context.Context, client *http.Client, url string, header http.Header, body []byte) (*modernAnswer, error) {
	ctx, span := startExchange(ctx, url, header, body)
	if span != nil {
		header = header.Clone() // a round's header is every round's
		traces.Inject(ctx, header)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		traces.End(span, "request")
		return nil, err
	}
	req.Header = header
	resp, err := client.Do(req)
	traces.End(span, traces.ExchangeError(resp, err)) // at the answer's headers, as every exchange's span
	if err != nil {
		return nil, err
	}
	return &modernAnswer{status: resp.StatusCode, body: resp.Body, MessageReader: legacy.NewMessageReader(resp, maxModernAnswer)}, nil
}

// close ends the answer. It does not drain the body: an event stream may
// never end by itself (a subscription, or an upstream that keeps its
// stream open after the response).
func (a *modernAnswer) close() {
	a.body.Close()
}

// upstreamID mints the JSON-RPC id of an upstream request; every round
// gets a new one.
func (rv *Bridge) upstreamID(o *Options) string {
	return "gw-" + o.Instance + "-" + strconv.FormatUint(rv.nextID.Add(1), 10)
}

// exchange sends one request upstream, with the client of o, and returns
// its JSON-RPC response, relaying the request's progress notifications (and
// log messages when level is set) to sink, which may be nil. A JSON-RPC
// error response is a response; rerr is for answers that are not one.
func (rv *Bridge) exchange(ctx context.Context, o *Options, upstream string, hdr http.Header, body []byte, id string, sink translate.Sink, level string) (gjson.Result, *jsonrpc.RPCError) {
	a, err := postModern(ctx, rv.clientOf(o), upstream, hdr, body)
	if err != nil {
		if ctx.Err() != nil {
			return gjson.Result{}, nil
		}
		return gjson.Result{}, translate.UpstreamFailure(translate.MsgUpstreamUnavailable, err)
	}
	defer a.close()
	for {
		m, err := a.Next()
		if err != nil {
			if ctx.Err() != nil {
				return gjson.Result{}, nil
			}
			if errors.Is(err, io.EOF) {
				return gjson.Result{}, translate.BadGateway(errNoResponse.Error())
			}
			// A broken connection, an oversized or garbled answer: the
			// details are the operator's.
			return gjson.Result{}, translate.UpstreamFailure(fmt.Sprintf("the upstream's answer (HTTP %d) could not be read", a.status), err)
		}
		switch m.Kind {
		case jsonrpc.KindResponse:
			if v := gjson.ParseBytes(m.ID); v.Type == gjson.String && v.Str == id {
				return gjson.ParseBytes(m.Raw), nil
			}
			if !a.IsStream() {
				return gjson.Result{}, translate.BadGateway(fmt.Sprintf("the upstream answered HTTP %d with a response to another request", a.status))
			}
		case jsonrpc.KindNotification:
			if sink == nil {
				continue
			}
			if m.Method == "notifications/progress" || m.Method == "notifications/message" && level != "" {
				if err := sink.Notify(m.Raw); err != nil {
					return gjson.Result{}, translate.BadGateway("the client's stream failed: " + err.Error())
				}
			}
		default:
			if !a.IsStream() {
				return gjson.Result{}, translate.BadGateway(fmt.Sprintf("the upstream answered HTTP %d without a JSON-RPC response", a.status))
			}
			// A request on a modern response stream is forbidden; ignore it.
		}
	}
}

// modernHeader builds the headers of a modern upstream request (SEP-2243):
// base (Authorization, trace context) plus the protocol headers.
func modernHeader(base http.Header, method, name string, hasName bool) http.Header {
	h := base.Clone()
	if h == nil {
		h = http.Header{}
	}
	h.Set("Content-Type", "application/json")
	h.Set("Accept", "application/json, text/event-stream")
	h.Set(translate.HeaderProtocolVersion, translate.ModernVersion)
	h.Set(translate.HeaderMethod, method)
	if hasName {
		h.Set(translate.HeaderName, EncodeHeaderValue(name))
	}
	return h
}

// requestMeta is the per-request _meta the reverse bridge sends a modern
// upstream for the session. Its fields are in name order, the order the
// gateway has always sent them in; the tags are translate's Meta* names.
type requestMeta struct {
	ClientCapabilities json.RawMessage `json:"io.modelcontextprotocol/clientCapabilities"`
	ClientInfo         json.RawMessage `json:"io.modelcontextprotocol/clientInfo,omitempty"`
	LogLevel           string          `json:"io.modelcontextprotocol/logLevel,omitempty"`
	ProtocolVersion    string          `json:"io.modelcontextprotocol/protocolVersion"`
}

// newRequestMeta returns the _meta of a request of method for s at level
// ("" for none): on tools/call the Tasks extension is declared unless the
// upstream's tasks are off.
func newRequestMeta(s *Session, method, level string) requestMeta {
	caps := ModernClientCapabilities(s.Capabilities)
	if method == "tools/call" && s.declaresTasks() {
		// The gateway serves tasks for the legacy client (tasks.go).
		caps = revDeclareTasks(caps)
	}
	return requestMeta{ClientCapabilities: caps, ClientInfo: s.ClientInfo, LogLevel: level, ProtocolVersion: translate.ModernVersion}
}

// retryFields are the MRTR members of a retried request.
type retryFields struct {
	// InputResponses is keyed by data (input keys); nil omits it.
	InputResponses map[string]json.RawMessage `json:"inputResponses,omitempty"`
	// RequestState is the raw JSON string of the upstream's last
	// requestState; nil omits it.
	RequestState json.RawMessage `json:"requestState,omitempty"`
}

// upstreamRequest builds the body of a modern request from a legacy one:
// the client's params (arguments, progressToken and its other _meta kept,
// in its order, values verbatim), the per-request _meta of the session (on
// tools/call, the Tasks extension declared unless the upstream's tasks are
// off) at the end of _meta, and the MRTR retry fields at the end of params.
// The client's own inputResponses and requestState, and the per-request
// _meta members the session sets, are dropped.
func upstreamRequest(id, method string, params []byte, s *Session, level string, responses map[string]json.RawMessage, state string) ([]byte, error) {
	p := "{}"
	if t := bytes.TrimSpace(params); len(t) > 0 {
		if jsonrpc.ValidJSON(t) != nil || t[0] != '{' {
			return nil, errors.New("params must be an object")
		}
		p = string(t)
	}
	clientMeta := "{}"
	if m := gjson.Get(p, "_meta"); m.Exists() { // the first _meta, as SetMember keeps it
		if !m.IsObject() {
			return nil, errors.New("_meta must be an object")
		}
		clientMeta = jsonrpc.RemoveMembers(m.Raw, translate.MetaProtocolVersion, translate.MetaClientCapabilities, translate.MetaClientInfo, translate.MetaLogLevel)
	}
	meta, err := jsonrpc.Marshal(newRequestMeta(s, method, level))
	if err != nil {
		return nil, err
	}
	p = jsonrpc.SetMember(jsonrpc.RemoveMembers(p, "inputResponses", "requestState"), "_meta", jsonrpc.AppendObject(clientMeta, string(meta)))
	if responses != nil || state != "" {
		retry := retryFields{InputResponses: responses}
		if state != "" {
			retry.RequestState = json.RawMessage(state)
		}
		add, err := jsonrpc.Marshal(retry)
		if err != nil {
			return nil, err
		}
		p = jsonrpc.AppendObject(p, string(add))
	}
	return jsonrpc.Marshal(jsonrpc.NewRequest(json.RawMessage(jsonrpc.Quote(id)), method, json.RawMessage(p)))
}
