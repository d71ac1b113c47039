package multiturn

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/tidwall/gjson"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/caddymodule/face"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/reverse"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/seal"
)

// This file makes the tool calls of an opted-in session and answers
// them: a tools/call becomes a modern tools/call the face makes
// (face.Client), on the session's upstream; its answer becomes the
// legacy client's result, or a turn (turn.go): the SSE stream ends with
// the call's input requests between buffer_input and input_required,
// whose id is the sealed seal.TurnState.

// call is one tool call of a multi-turn session: the first (no
// responses, no state) or a retry.
type call struct {
	id json.RawMessage // the client's tools/call id
	face.ToolCall
	// upstream is the modern upstream the call is passed through to; ""
	// when it goes through the forward bridge (its requestState routes
	// the retries).
	upstream string
	// first names the span of the call's first request, which the spans
	// of its turns' answers link to (Gateway.Traced).
	first seal.TraceRef
}

// meta is the _meta of the internal tools/call: the session's client.
type meta struct {
	ProtocolVersion    string          `json:"io.modelcontextprotocol/protocolVersion"`
	ClientCapabilities json.RawMessage `json:"io.modelcontextprotocol/clientCapabilities"`
	ClientInfo         json.RawMessage `json:"io.modelcontextprotocol/clientInfo"`
}

// defaultClientInfo names the gateway as the modern client when the
// session's client sent no usable clientInfo.
var defaultClientInfo = json.RawMessage(`{"name":"caddy-mcp-gateway-multi-turn","version":"1"}`)

// internal is the internal request of c, declaring s's client, served on
// on (nil: routed as any modern request).
func (c *call) internal(s *session, on *face.Route) face.Internal {
	info := json.RawMessage(s.ClientInfo)
	if i := gjson.ParseBytes(info); i.Get("name").Type != gjson.String || i.Get("version").Type != gjson.String {
		info = defaultClientInfo
	}
	in := c.ToolCall.Internal(meta{
		ProtocolVersion:    translate.ModernVersion,
		ClientCapabilities: reverse.ModernClientCapabilities(s.Capabilities),
		ClientInfo:         info,
	})
	in.On = on
	return in
}

// ServeRouted implements face.RouteFace: a tools/call of an opted-in
// session whose client takes SSE, routed to the session's upstream, is
// made as the modern call of the first turn, on that upstream. A call the
// face cannot carry (a task augmented call, arguments or an id beyond a
// turn's bounds) is left to the gateway, served as without the opt-in,
// its input requests in-line.
func (f *Face) ServeRouted(w http.ResponseWriter, r *http.Request, m face.Message, id json.RawMessage, rt face.Route) (bool, error) {
	s := sessionOf(r)
	if s == nil || m.Method != "tools/call" || !acceptsEventStream(r) {
		return false, nil
	}
	params := gjson.GetBytes(m.Body, "params")
	name, args := params.Get("name"), params.Get("arguments")
	switch {
	case !params.IsObject() || params.Get("task").Exists(),
		name.Type != gjson.String || name.Str == "" || len(name.Str) > seal.MaxTurnName,
		args.Exists() && args.Type != gjson.Null && (!args.IsObject() || len(args.Raw) > seal.MaxTurnArguments),
		len(id) > seal.MaxTurnCallID:
		return false, nil
	}
	c := call{id: id, ToolCall: face.ToolCall{Name: name.Str}, first: f.gw.Traced(r, name.Str, seal.TraceRef{})}
	if args.IsObject() {
		c.Args = json.RawMessage(args.Raw)
	}
	if rt.Modern {
		c.upstream = rt.Upstream
	}
	return true, f.run(w, r, s, c, &rt)
}

// run makes c on on (nil: routed as any modern request), then answers
// the client: the tool's result or error under the call's id, or the next
// turn. A round that asks nothing (a requestState alone) is retried with
// the state, at most max_rounds times.
func (f *Face) run(w http.ResponseWriter, r *http.Request, s *session, c call, on *face.Route) error {
	var inputs []seal.TurnInput
	var msgs [][]byte
	var failed string // why the call cannot go on as a turn
	a, tc, err := face.Drive(f.gw.Limits().MaxRounds, c.ToolCall,
		func(tc face.ToolCall) (face.Answer, error) {
			c.ToolCall = tc // c.upstream stays where failover took the call
			a, fail := f.client.Do(r.Context(), r, c.internal(s, on))
			if fail != nil {
				return a, jsonrpc.Errorf(fail.Status, jsonrpc.InternalError, "Internal error: %s", fail.Detail)
			}
			if c.upstream != "" && a.Upstream != "" {
				c.upstream = a.Upstream // where failover took the call
			}
			return a, nil
		},
		func(a face.Answer) (map[string]json.RawMessage, bool, error) {
			if _, ok := a.Error(); ok {
				return nil, false, nil // the error is the answer
			}
			result := a.Result()
			if inputs, msgs, failed = readInputs(result.Get("inputRequests"), s.Capabilities); failed != "" {
				return nil, false, nil
			}
			if len(inputs) == 0 && result.Get("requestState").Type != gjson.String {
				return nil, false, translate.BadGateway(
					"Internal error: the server answered input_required with neither inputRequests nor requestState")
			}
			// Load shedding: nothing to ask, retry with the state.
			return nil, len(inputs) == 0, nil
		})
	c.ToolCall = tc
	var rerr *jsonrpc.RPCError
	switch {
	case errors.As(err, &rerr):
		return jsonrpc.WriteError(w, c.id, rerr)
	case errors.Is(err, face.ErrTooManyRounds):
		return jsonrpc.WriteError(w, c.id, jsonrpc.Errorf(http.StatusBadGateway, jsonrpc.InternalError,
			"Internal error: the tool answered input_required without input requests more than max_rounds times in a row"))
	}
	if e, ok := a.Error(); ok {
		return f.writeAnswer(w, r, a.Status, translate.ErrorObjectResponse(c.id, reverse.LegacyError("tools/call", []byte(e.Raw))))
	}
	result := a.Result()
	switch rt := result.Get("resultType"); {
	case rt.Exists() && rt.Str != "complete" && rt.Str != "input_required":
		// A task, or what comes next: the reverse bridge follows tasks
		// for legacy clients; a turn cannot.
		out, _ := reverse.LegacyFailure("tools/call", "the server answered with resultType "+jsonrpc.Clip(rt.Raw)+
			", which a multi-turn call cannot carry: call the tool without the opt-in")
		return f.writeAnswer(w, r, http.StatusOK, translate.ResultResponse(c.id, out))
	case rt.Str != "input_required":
		out, err := reverse.LegacyResult("tools/call", []byte(result.Raw))
		if err != nil {
			return jsonrpc.WriteError(w, c.id, translate.BadGateway("Internal error: the tool's result is not a JSON object"))
		}
		return f.writeAnswer(w, r, http.StatusOK, translate.ResultResponse(c.id, out))
	case failed != "":
		out, _ := reverse.LegacyFailure("tools/call", failed)
		return f.writeAnswer(w, r, http.StatusOK, translate.ResultResponse(c.id, out))
	}
	c.Responses, c.State = nil, result.Get("requestState").String()
	if !acceptsEventStream(r) {
		return jsonrpc.WriteError(w, c.id, jsonrpc.Errorf(http.StatusNotAcceptable, jsonrpc.InvalidRequest,
			"Not Acceptable: the tool asks for more input, which only an event stream carries (Accept: text/event-stream); the call has ended"))
	}
	token, bufferID, err := f.newToken(r, s, c, inputs)
	if err != nil {
		msg := "Internal error: the call's state does not fit in a Last-Event-ID"
		if !errors.Is(err, seal.ErrTurnTooLarge) {
			msg = "Internal error: the turn could not be sealed"
		}
		return jsonrpc.WriteError(w, c.id, jsonrpc.Errorf(http.StatusBadGateway, jsonrpc.InternalError, "%s", msg))
	}
	return f.writeTurn(w, bufferID, token, msgs)
}

// sessionHash binds a turn to the session id the client holds.
func sessionHash(outer string) (h [16]byte) {
	sum := sha256.Sum256([]byte(outer))
	copy(h[:], sum[:])
	return h
}

// newToken seals the turn of c asking inputs: the token (the
// input_required event's id), and the id of its buffer_input event.
func (f *Face) newToken(r *http.Request, s *session, c call, inputs []seal.TurnInput) (token, bufferID string, err error) {
	st := seal.TurnState{
		Principal: f.gw.Principal(r), Session: sessionHash(s.outer),
		Expires: time.Now().Add(f.gw.Limits().ParkTTL).Add(time.Second),
		CallID:  c.id, Name: c.Name, Arguments: c.Args, RequestState: c.State,
		Upstream: c.upstream, Inputs: inputs, Trace: c.first,
	}
	if _, err := rand.Read(st.ID[:]); err != nil {
		return "", "", err
	}
	token, err = seal.SealTurn(f.gw.Keyring(), st)
	return token, "mt-" + hex.EncodeToString(st.ID[:8]), err
}
