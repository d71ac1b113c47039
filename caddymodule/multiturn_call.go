package caddymodule

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/tidwall/gjson"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/sse"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/reverse"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/seal"
)

// This file makes the tool calls of an opted-in session (multiturn.go) and
// answers them: a tools/call becomes a modern tools/call the gateway makes
// itself (innerToolCall, as the saga's), on the session's upstream; its
// answer becomes the legacy client's result, or a turn: the SSE stream
// ends with the call's input requests between buffer_input and
// input_required, whose id is the sealed seal.TurnState.

// turnCall is one tool call of a multi-turn session: the first (no
// responses, no state) or a retry.
type turnCall struct {
	callID json.RawMessage // the client's tools/call id
	sagaCall
	// upstream is the modern upstream the call is passed through to; ""
	// when it goes through the forward bridge (its requestState routes
	// the retries).
	upstream string
}

// turnMeta is the _meta of the internal tools/call: the session's client.
type turnMeta struct {
	ProtocolVersion    string          `json:"io.modelcontextprotocol/protocolVersion"`
	ClientCapabilities json.RawMessage `json:"io.modelcontextprotocol/clientCapabilities"`
	ClientInfo         json.RawMessage `json:"io.modelcontextprotocol/clientInfo"`
}

// turnClientInfo names the gateway as the modern client when the session's
// client sent no usable clientInfo.
var turnClientInfo = json.RawMessage(`{"name":"caddy-mcp-gateway-multi-turn","version":"1"}`)

// params are the internal call's params, declaring the session's client.
func (c *turnCall) params(ts *turnSession) innerCallParams {
	info := json.RawMessage(ts.ClientInfo)
	if i := gjson.ParseBytes(info); i.Get("name").Type != gjson.String || i.Get("version").Type != gjson.String {
		info = turnClientInfo
	}
	return c.callParams(turnMeta{
		ProtocolVersion:    translate.ModernVersion,
		ClientCapabilities: reverse.ModernClientCapabilities(ts.Capabilities),
		ClientInfo:         info,
	})
}

// callTurns serves a tools/call of an opted-in session whose client takes
// SSE, decided (d) to go to the session's upstream: as the modern call of
// the first turn, on that upstream. A call the face cannot carry (a task
// augmented call, arguments or an id beyond a turn's bounds) is served as
// without the opt-in, its input requests in-line.
func (h *Handler) callTurns(w http.ResponseWriter, r *http.Request, l *learned, d decision, ts *turnSession) error {
	params := gjson.GetBytes(l.body, "params")
	name, args := params.Get("name"), params.Get("arguments")
	switch {
	case !params.IsObject() || params.Get("task").Exists(),
		name.Type != gjson.String || name.Str == "" || len(name.Str) > seal.MaxTurnName,
		args.Exists() && args.Type != gjson.Null && (!args.IsObject() || len(args.Raw) > seal.MaxTurnArguments),
		len(l.msg.ID) > seal.MaxTurnCallID:
		return h.serve(w, r, l, d)
	}
	call := turnCall{callID: l.msg.ID, sagaCall: sagaCall{name: name.Str}}
	if args.IsObject() {
		call.args = []byte(args.Raw)
	}
	cell := cellForward
	if d.cell == cellReverse {
		cell, call.upstream = cellModern, d.up.URL
	}
	return h.runTurns(w, r, ts, call, h.servedBy(cell, d.up))
}

// runTurns makes call, then answers the client: the tool's result or
// error under the call's id, or the next turn. A round that asks nothing
// (a requestState alone) is retried at once, at most max_rounds times.
func (h *Handler) runTurns(w http.ResponseWriter, r *http.Request, ts *turnSession, call turnCall, serve innerServe) error {
	for range max(h.Parking.MaxRounds, 1) {
		status, answer, rerr := h.innerToolCall(r, call.name, call.params(ts), serve)
		if rerr != nil {
			return jsonrpc.WriteError(w, call.callID, rerr)
		}
		if up := routeOf(r).up; call.upstream != "" && up != nil {
			call.upstream = up.URL // where failover took the call
		}
		if e := answer.Get("error"); e.Exists() {
			return h.writeTurnAnswer(w, r, status, translate.ErrorObjectResponse(call.callID, reverse.LegacyError("tools/call", []byte(e.Raw))))
		}
		result := answer.Get("result")
		switch rt := result.Get("resultType"); {
		case rt.Exists() && rt.Str != "complete" && rt.Str != "input_required":
			// A task, or what comes next: the reverse bridge follows tasks
			// for legacy clients; a turn cannot.
			out, _ := reverse.LegacyFailure("tools/call", "the server answered with resultType "+jsonrpc.Clip(rt.Raw)+
				", which a multi-turn call cannot carry: call the tool without the opt-in")
			return h.writeTurnAnswer(w, r, http.StatusOK, translate.ResultResponse(call.callID, out))
		case rt.Str != "input_required":
			out, err := reverse.LegacyResult("tools/call", []byte(result.Raw))
			if err != nil {
				return jsonrpc.WriteError(w, call.callID, translate.BadGateway("Internal error: the tool's result is not a JSON object"))
			}
			return h.writeTurnAnswer(w, r, http.StatusOK, translate.ResultResponse(call.callID, out))
		}
		inputs, msgs, fail := turnInputs(result.Get("inputRequests"), ts.Capabilities)
		if fail != "" {
			out, _ := reverse.LegacyFailure("tools/call", fail)
			return h.writeTurnAnswer(w, r, http.StatusOK, translate.ResultResponse(call.callID, out))
		}
		st := result.Get("requestState")
		if len(inputs) == 0 && st.Type != gjson.String {
			return jsonrpc.WriteError(w, call.callID, translate.BadGateway(
				"Internal error: the server answered input_required with neither inputRequests nor requestState"))
		}
		call.responses, call.state = nil, st.String()
		if len(inputs) == 0 {
			continue // load shedding: nothing to ask, retry with the state
		}
		if !acceptsEventStream(r) {
			return jsonrpc.WriteError(w, call.callID, jsonrpc.Errorf(http.StatusNotAcceptable, jsonrpc.InvalidRequest,
				"Not Acceptable: the tool asks for more input, which only an event stream carries (Accept: text/event-stream); the call has ended"))
		}
		token, bufferID, err := h.newTurnToken(r, ts, call, inputs)
		if err != nil {
			msg := "Internal error: the call's state does not fit in a Last-Event-ID"
			if !errors.Is(err, seal.ErrTurnTooLarge) {
				msg = "Internal error: the turn could not be sealed"
			}
			return jsonrpc.WriteError(w, call.callID, jsonrpc.Errorf(http.StatusBadGateway, jsonrpc.InternalError, "%s", msg))
		}
		return h.writeTurn(w, bufferID, token, msgs)
	}
	return jsonrpc.WriteError(w, call.callID, jsonrpc.Errorf(http.StatusBadGateway, jsonrpc.InternalError,
		"Internal error: the tool answered input_required without input requests more than max_rounds times in a row"))
}

// turnInputs reads the input requests of an input_required result: what
// the turn token keeps of them, and the JSON-RPC requests the client is
// sent, each with its key as id. It fails (a reason for the client) on a
// request the client did not declare the capability for, or one a turn
// cannot carry.
func turnInputs(reqs gjson.Result, caps []byte) (inputs []seal.TurnInput, msgs [][]byte, fail string) {
	if reqs.Exists() && !reqs.IsObject() {
		return nil, nil, "the server's inputRequests is not an object"
	}
	reqs.ForEach(func(k, v gjson.Result) bool {
		method, params := v.Get("method"), v.Get("params")
		kind := stepKind(method.String())
		switch {
		case !v.IsObject() || method.Type != gjson.String || kind == 0:
			fail = fmt.Sprintf("the server asked for input %q of an unknown kind", jsonrpc.Clip(k.Str))
		case method.Str != translate.MethodListRoots && !params.IsObject():
			fail = fmt.Sprintf("the server's input request %q (%s) has no params", jsonrpc.Clip(k.Str), method.Str)
		case k.Str == "" || len(k.Str) > seal.MaxTurnKey:
			fail = fmt.Sprintf("the server's input request key is empty or longer than %d bytes", seal.MaxTurnKey)
		case len(inputs) == seal.MaxTurnInputs:
			fail = fmt.Sprintf("the server asked for more than %d inputs at once", seal.MaxTurnInputs)
		case !translate.ClientSupports(caps, method.Str, []byte(params.Raw)):
			fail = fmt.Sprintf("cannot ask for input %q (%s): this client did not declare the capability %s at initialize",
				jsonrpc.Clip(k.Str), method.Str, translate.RequiredCapability(method.Str, []byte(params.Raw)))
		}
		if fail != "" {
			return false
		}
		inputs = append(inputs, seal.TurnInput{Key: k.Str, Kind: kind})
		msgs = append(msgs, inlineRequest(k.Str, method.Str, params))
		return true
	})
	if fail != "" {
		return nil, nil, fail
	}
	return inputs, msgs, ""
}

// inlineRequest is the JSON-RPC request an input request is sent to the
// client as: id key. A URL-mode elicitation gets the elicitationId
// 2025-11-25 requires (2026-07-28 has none).
func inlineRequest(key, method string, params gjson.Result) []byte {
	p := ""
	if params.IsObject() {
		p = params.Raw
		if method == translate.MethodElicit && translate.ElicitMode([]byte(p)) == "url" && !params.Get("elicitationId").Exists() {
			var rnd [16]byte
			_, _ = rand.Read(rnd[:])
			if at, text, ok := jsonrpc.InsertMember(p, "elicitationId", `"elicitationId":"`+hex.EncodeToString(rnd[:])+`"`); ok {
				p = p[:at] + text + p[at:]
			}
		}
	}
	msg := `{"jsonrpc":"2.0","id":` + jsonrpc.Quote(key) + `,"method":` + jsonrpc.Quote(method)
	if p != "" {
		msg += `,"params":` + p
	}
	return []byte(msg + "}")
}

// sessionHash binds a turn to the session id the client holds.
func sessionHash(outer string) (h [16]byte) {
	sum := sha256.Sum256([]byte(outer))
	copy(h[:], sum[:])
	return h
}

// newTurnToken seals the turn of call asking inputs: the token (the
// input_required event's id), and the id of its buffer_input event.
func (h *Handler) newTurnToken(r *http.Request, ts *turnSession, call turnCall, inputs []seal.TurnInput) (token, bufferID string, err error) {
	s := seal.TurnState{
		Principal: h.principal(r), Session: sessionHash(ts.outer),
		Expires: time.Now().Add(time.Duration(h.Parking.ParkTTL)).Add(time.Second),
		CallID:  call.callID, Name: call.name, Arguments: call.args, RequestState: call.state,
		Upstream: call.upstream, Inputs: inputs,
	}
	if _, err := rand.Read(s.ID[:]); err != nil {
		return "", "", err
	}
	token, err = seal.SealTurn(h.keyring, s)
	return token, "mt-" + hex.EncodeToString(s.ID[:8]), err
}

// writeTurn ends the answer with a turn: buffer_input, the requests, and
// input_required carrying token, on an event stream that then ends.
func (h *Handler) writeTurn(w http.ResponseWriter, bufferID, token string, msgs [][]byte) error {
	sse.SetHeaders(w.Header())
	w.Header().Del("Content-Length")
	w.WriteHeader(http.StatusOK)
	sw := sse.NewWriter(w)
	sw.WriteTimeout(time.Duration(h.Streams.WriteTimeout))
	defer sw.Close()
	if err := sw.WriteEvent(sse.Event{Type: eventBufferInput, ID: bufferID, HasID: true}); err != nil {
		return nil // client gone: the token it did not get is never used
	}
	for _, m := range msgs {
		if err := sw.WriteEvent(sse.Event{Type: "message", Data: m, HasData: true}); err != nil {
			return nil
		}
	}
	_ = sw.WriteEvent(sse.Event{Type: eventInputRequired, ID: token, HasID: true})
	return nil
}

// writeTurnAnswer answers with msg, the JSON-RPC response to the client's
// tools/call: one message event when the client takes an event stream,
// else JSON with status.
func (h *Handler) writeTurnAnswer(w http.ResponseWriter, r *http.Request, status int, msg []byte) error {
	if !acceptsEventStream(r) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(msg)))
		w.WriteHeader(status)
		_, _ = w.Write(msg)
		return nil
	}
	sse.SetHeaders(w.Header())
	w.WriteHeader(http.StatusOK)
	sw := sse.NewWriter(w)
	sw.WriteTimeout(time.Duration(h.Streams.WriteTimeout))
	defer sw.Close()
	_ = sw.WriteEvent(sse.Event{Type: "message", Data: msg, HasData: true})
	return nil
}
