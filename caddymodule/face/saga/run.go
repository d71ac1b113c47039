package saga

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/caddymodule/face"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/seal"
)

// This file makes a saga's tool call (the first, or a retry) and answers
// the saga: the tool's result, a suspension, or the error.

// meta is the _meta of the saga's internal requests.
var meta = face.NewMeta("saga")

// response is the saga's JSON-RPC answer.
type response struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  any             `json:"result,omitempty"`
	Error   json.RawMessage `json:"error,omitempty"`
}

// run makes call, then answers the saga. A round that asks only for
// roots is answered at once (with no roots) and retried, at most
// max_rounds times. A suspension's sagaToken carries first, the span of
// the saga's first request.
func (f *Face) run(w http.ResponseWriter, r *http.Request, id json.RawMessage, call face.ToolCall, first seal.TraceRef) error {
	var steps []seal.SagaStep
	var shown []step
	a, call, err := face.Drive(f.gw.Limits().MaxRounds, call,
		func(c face.ToolCall) (face.Answer, error) {
			a, fail := f.client.Do(r.Context(), r, c.Internal(meta))
			if fail != nil {
				return a, jsonrpc.Errorf(fail.Status, jsonrpc.InternalError, "Internal error: the tool call failed (HTTP %d; the gateway's log says why)", fail.Status)
			}
			return a, nil
		},
		func(a face.Answer) (map[string]json.RawMessage, bool, error) {
			var rerr *jsonrpc.RPCError
			if steps, shown, rerr = suspensionSteps(a.Result()); rerr != nil {
				return nil, false, rerr
			}
			if len(shown) > 0 {
				return nil, false, nil // the client's questions
			}
			// Roots only (or a bare requestState): nothing to ask.
			var responses map[string]json.RawMessage
			if len(steps) > 0 {
				responses = make(map[string]json.RawMessage, len(steps))
				for _, s := range steps {
					responses[s.ID] = face.RootsNone
				}
			}
			return responses, true, nil
		})
	var rerr *jsonrpc.RPCError
	switch {
	case errors.As(err, &rerr):
		return jsonrpc.WriteError(w, id, rerr)
	case errors.Is(err, face.ErrTooManyRounds):
		return jsonrpc.WriteError(w, id, jsonrpc.Errorf(http.StatusBadGateway, jsonrpc.InternalError,
			"Internal error: the tool asked for roots more than max_rounds times in a row"))
	}
	if e, ok := a.Error(); ok {
		return writeAnswer(w, a.Status, response{JSONRPC: "2.0", ID: id, Error: json.RawMessage(e.Raw)})
	}
	result := a.Result()
	if !a.InputRequired() {
		return writeResult(w, id, json.RawMessage(result.Raw))
	}
	token, err := f.newToken(r, call, result.Get("requestState").String(), steps, first)
	if err != nil {
		msg := "Internal error: the call's state does not fit in a sagaToken"
		if !errors.Is(err, seal.ErrSagaTooLarge) {
			msg = "Internal error: the sagaToken could not be made"
		}
		return jsonrpc.WriteError(w, id, jsonrpc.Errorf(http.StatusBadGateway, jsonrpc.InternalError, "%s", msg))
	}
	return writeResult(w, id, suspended{State: "suspended", SagaToken: token, Steps: shown})
}

// writeResult answers the saga with result.
func writeResult(w http.ResponseWriter, id json.RawMessage, result any) error {
	return writeAnswer(w, http.StatusOK, response{JSONRPC: "2.0", ID: id, Result: result})
}

// writeAnswer writes resp with status.
func writeAnswer(w http.ResponseWriter, status int, resp response) error {
	b, err := jsonrpc.Marshal(resp)
	if err != nil {
		return jsonrpc.WriteError(w, resp.ID, jsonrpc.Errorf(http.StatusInternalServerError, jsonrpc.InternalError, "Internal error: %v", err))
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
	return nil
}
