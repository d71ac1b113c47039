package multiturn

import (
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/tidwall/gjson"
	"go.uber.org/zap"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/caddymodule/face"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/seal"
)

// This file takes back the answers of a turn: the POST of an opted-in
// session with Last-Event-ID (the input_required event's id) and a JSON
// array of the client's JSON-RPC responses. Any instance holding
// state_key serves it: the token has the whole turn. The answers become
// the inputResponses of the modern call's retry, which the face makes as
// the first call was (call.go), and the client gets the result or the
// next turn.
//
// Refusals are JSON errors of the POST itself (id null), the call going
// on: a malformed array (-32700, -32600), an answer that does not fit the
// turn (-32602; the token stays usable, the client may POST again), a
// token that is not valid for this session (-32602, one message for every
// reason), a token whose use could not be recorded (-32603, HTTP 503; the
// token stays usable). Once the token is used, what comes is the call's
// answer, under the tools/call's id.

// invalid is a -32602 refusal of a turn's answers.
func invalid(format string, args ...any) *jsonrpc.RPCError {
	return jsonrpc.Errorf(http.StatusBadRequest, jsonrpc.InvalidParams, "Invalid params: "+format, args...)
}

// tokenRefused is the message of every refusal of a turn token.
const tokenRefused = "Last-Event-ID is not valid (invalid, expired, already used, or not this session's): " +
	"call the tool again"

// useUnrecorded is the message of a turn's answers whose token's use
// could not be recorded (the storage failed): nothing was done.
const useUnrecorded = "Internal error: the gateway could not record the Last-Event-ID's use (its storage is unavailable; " +
	"the gateway's log says why): nothing was done, POST the answers again with the same Last-Event-ID"

// refusal is a sampling request the client answered with an error.
type refusal struct {
	id, message string
}

// serveAnswers answers the POST of a turn's answers.
func (f *Face) serveAnswers(w http.ResponseWriter, r *http.Request, body []byte, s *session) error {
	if err := jsonrpc.ValidJSON(body); err != nil {
		return jsonrpc.WriteError(w, nil, jsonrpc.Errorf(http.StatusBadRequest, jsonrpc.ParseError, "Parse error: %v", err))
	}
	answers := gjson.ParseBytes(body)
	n := 0
	answers.ForEach(func(_, _ gjson.Result) bool { n++; return true })
	if !answers.IsArray() || n == 0 || n > seal.MaxTurnInputs {
		return jsonrpc.WriteError(w, nil, jsonrpc.Errorf(http.StatusBadRequest, jsonrpc.InvalidRequest,
			"Invalid Request: a POST with Last-Event-ID carries a JSON array of 1 to %d JSON-RPC responses, "+
				"the answers to the requests of the turn that id ended", seal.MaxTurnInputs))
	}
	now := time.Now()
	st, err := seal.OpenTurn(f.gw.Keyring(), r.Header.Get("Last-Event-ID"), now)
	switch {
	case err != nil:
	case st.Principal != f.gw.Principal(r):
		err = errors.New("another principal's")
	case st.Session != sessionHash(s.outer):
		err = errors.New("another session's")
	}
	if err != nil {
		return f.refuseToken(w, err)
	}
	responses, refused, rerr := inputResponses(st.Inputs, answers)
	if rerr != nil {
		return jsonrpc.WriteError(w, nil, rerr)
	}
	switch err := f.gw.UseOnce(r.Context(), usePurpose, st.ID, st.Expires); {
	case errors.Is(err, face.ErrUseUnrecorded):
		return jsonrpc.WriteError(w, nil, jsonrpc.Errorf(http.StatusServiceUnavailable, jsonrpc.InternalError, "%s", useUnrecorded))
	case err != nil:
		return f.refuseToken(w, err)
	}
	first := f.gw.Traced(r, st.Name, st.Trace)
	if refused != nil {
		out, err := json.Marshal(face.SamplingRefused(refused.id, refused.message))
		if err != nil {
			return err
		}
		return f.writeAnswer(w, r, http.StatusOK, translate.ResultResponse(st.CallID, out))
	}
	c := call{id: st.CallID, ToolCall: face.ToolCall{Name: st.Name, Args: st.Arguments, Responses: responses,
		State: st.RequestState}, upstream: st.Upstream, first: first}
	var on *face.Route
	if st.Upstream != "" {
		on = &face.Route{Upstream: st.Upstream, Modern: true}
	}
	return f.run(w, r, s, c, on)
}

// refuseToken answers a turn token that is not valid for the caller with
// one message for every reason (tampered, forged, expired, another
// principal's or session's, already used), as sagaTokens are refused. Why
// goes to the debug log.
func (f *Face) refuseToken(w http.ResponseWriter, why error) error {
	f.gw.Logger().Debug("multi-turn Last-Event-ID refused", zap.String("why", why.Error()))
	return jsonrpc.WriteError(w, nil, invalid(tokenRefused))
}

// inputResponses maps the client's JSON-RPC responses onto the retry's
// inputResponses for the turn's inputs: every response's id must be one
// the turn's requests were sent with, once, and every request answered.
// A response with an error is, for an elicitation, a decline; for roots,
// no roots; for sampling, returned as refused (the 2026-07-28
// inputResponses have no error form; the face ends the call, as the
// saga does).
func inputResponses(inputs []seal.TurnInput, answers gjson.Result) (map[string]json.RawMessage, *refusal, *jsonrpc.RPCError) {
	out := make(map[string]json.RawMessage, len(inputs))
	answered := make(map[string]bool, len(inputs))
	var refused *refusal
	var bad *jsonrpc.RPCError
	i := -1
	answers.ForEach(func(_, e gjson.Result) bool {
		i++
		id, res, errObj := e.Get("id"), e.Get("result"), e.Get("error")
		if !e.IsObject() || e.Get("jsonrpc").String() != "2.0" || e.Get("method").Exists() || res.Exists() == errObj.Exists() {
			bad = jsonrpc.Errorf(http.StatusBadRequest, jsonrpc.InvalidRequest,
				"Invalid Request: element %d is not a JSON-RPC 2.0 response (a result or an error)", i)
			return false
		}
		var in *seal.TurnInput
		for k := range inputs {
			if id.Type == gjson.String && inputs[k].Key == id.Str {
				in = &inputs[k]
			}
		}
		switch {
		case in == nil:
			bad = invalid("element %d answers id %s, which no request of this turn has", i, jsonrpc.Clip(id.Raw))
		case answered[in.Key]:
			bad = invalid("id %s is answered twice", jsonrpc.Clip(id.Raw))
		case errObj.Exists() && !errObj.IsObject():
			bad = invalid("element %d: error must be an object", i)
		case errObj.Exists() && in.Kind == seal.TurnElicitation:
			out[in.Key] = face.ElicitDeclined
		case errObj.Exists() && in.Kind == seal.TurnRoots:
			out[in.Key] = face.RootsNone
		case errObj.Exists():
			if refused == nil {
				refused = &refusal{id: in.Key, message: errObj.Get("message").String()}
			}
		case !res.IsObject():
			bad = invalid("element %d: result must be an object", i)
		default:
			if err := translate.ValidateInputResponse(face.Kind(in.Kind).Method(), []byte(res.Raw)); err != nil {
				bad = invalid("id %s: %v", jsonrpc.Clip(id.Raw), err)
			} else {
				out[in.Key] = json.RawMessage(res.Raw)
			}
		}
		if in != nil {
			answered[in.Key] = true
		}
		return bad == nil
	})
	if bad != nil {
		return nil, nil, bad
	}
	for _, in := range inputs {
		if !answered[in.Key] {
			return nil, nil, invalid("no response for id %s, a request of this turn", jsonrpc.Quote(jsonrpc.Clip(in.Key)))
		}
	}
	return out, refused, nil
}
