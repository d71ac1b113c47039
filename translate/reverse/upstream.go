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
func postModern(ctx context.Context, client *http.Client, url string, header http.Header, body []byte) (*modernAnswer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header = header
	resp, err := client.Do(req)
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

// upstreamRequest builds the body of a modern request from a legacy one:
// the client's params (arguments, progressToken and its other _meta kept),
// the per-request _meta of the session (on tools/call, the Tasks extension
// declared unless the upstream's tasks are off), and the MRTR retry fields.
func upstreamRequest(id, method string, params []byte, s *Session, level string, responses map[string]json.RawMessage, state string) ([]byte, error) {
	p := map[string]json.RawMessage{}
	if len(params) > 0 {
		if err := json.Unmarshal(params, &p); err != nil {
			return nil, errors.New("params must be an object")
		}
	}
	delete(p, "inputResponses")
	delete(p, "requestState")
	meta := map[string]json.RawMessage{}
	if raw, ok := p["_meta"]; ok {
		if err := json.Unmarshal(raw, &meta); err != nil {
			return nil, errors.New("_meta must be an object")
		}
	}
	meta[translate.MetaProtocolVersion] = json.RawMessage(`"` + translate.ModernVersion + `"`)
	meta[translate.MetaClientCapabilities] = ModernClientCapabilities(s.Capabilities)
	if method == "tools/call" && s.declaresTasks() {
		// The gateway serves tasks for the legacy client (tasks.go).
		meta[translate.MetaClientCapabilities] = revDeclareTasks(meta[translate.MetaClientCapabilities])
	}
	if s.ClientInfo != nil {
		meta[translate.MetaClientInfo] = s.ClientInfo
	} else {
		delete(meta, translate.MetaClientInfo)
	}
	if level != "" {
		meta[translate.MetaLogLevel] = json.RawMessage(strconv.Quote(level))
	} else {
		delete(meta, translate.MetaLogLevel)
	}
	var err error
	if p["_meta"], err = marshalVerbatim(meta); err != nil {
		return nil, err
	}
	if responses != nil {
		if p["inputResponses"], err = marshalVerbatim(responses); err != nil {
			return nil, err
		}
	}
	if state != "" {
		p["requestState"] = json.RawMessage(state)
	}
	pb, err := marshalVerbatim(p)
	if err != nil {
		return nil, err
	}
	b := make([]byte, 0, len(pb)+len(id)+len(method)+48)
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = strconv.AppendQuote(b, id)
	b = append(b, `,"method":`...)
	b = strconv.AppendQuote(b, method)
	b = append(b, `,"params":`...)
	b = append(b, pb...)
	return append(b, '}'), nil
}

// marshalVerbatim marshals a map of raw values without HTML-escaping
// their strings, so that every string (a requestState above all) reaches
// the upstream with the bytes the client or server wrote.
func marshalVerbatim(m map[string]json.RawMessage) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(m); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}
