package saga

import (
	"encoding/json"
	"net/http"

	"github.com/tidwall/gjson"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/caddymodule/face"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/seal"
)

// This file maps between saga steps and the modern input requests and
// responses: a suspension's steps from an input_required answer, and a
// resume's completedSteps to the retry's inputResponses.

// step is one step of a suspension, as the client sees it.
type step struct {
	Type   string          `json:"type"`
	StepID string          `json:"stepId"`
	Params json.RawMessage `json:"params,omitempty"`
}

// suspended is the result of a suspended saga.
type suspended struct {
	State     string `json:"state"`
	SagaToken string `json:"sagaToken"`
	Steps     []step `json:"steps"`
}

// refusedStep is a sampling step the client completed with an error.
type refusedStep struct {
	id, message string
}

// suspensionSteps reads the input requests of an input_required result:
// every step, for the sagaToken (roots included), and the ones the client
// is asked (elicitation and sampling).
func suspensionSteps(result gjson.Result) (all []seal.SagaStep, shown []step, err *jsonrpc.RPCError) {
	reqs := result.Get("inputRequests")
	if reqs.Exists() && !reqs.IsObject() {
		return nil, nil, jsonrpc.Errorf(http.StatusBadGateway, jsonrpc.InternalError, "Internal error: the tool's inputRequests is not an object")
	}
	reqs.ForEach(func(k, v gjson.Result) bool {
		kind := byte(face.KindOf(v.Get("method").String()))
		switch {
		case kind == 0:
			err = jsonrpc.Errorf(http.StatusBadGateway, jsonrpc.InternalError,
				"Internal error: the tool asked for input a saga cannot carry (%s)", jsonrpc.Clip(v.Get("method").String()))
		case len(k.Str) == 0 || len(k.Str) > seal.MaxSagaStepID:
			err = jsonrpc.Errorf(http.StatusBadGateway, jsonrpc.InternalError, "Internal error: an input request's key is empty or longer than %d bytes", seal.MaxSagaStepID)
		case len(all) == seal.MaxSagaSteps:
			err = jsonrpc.Errorf(http.StatusBadGateway, jsonrpc.InternalError, "Internal error: the tool asked more than %d questions at once", seal.MaxSagaSteps)
		}
		if err != nil {
			return false
		}
		all = append(all, seal.SagaStep{ID: k.Str, Kind: kind})
		if kind != seal.SagaRoots {
			var params json.RawMessage
			if p := v.Get("params"); p.Exists() {
				params = json.RawMessage(p.Raw)
			}
			shown = append(shown, step{Type: stepType(kind), StepID: k.Str, Params: params})
		}
		return true
	})
	return all, shown, err
}

// stepType is the saga step type of a kind shown to the client.
func stepType(kind byte) string {
	if kind == seal.SagaSampling {
		return "sampling"
	}
	return "elicitation"
}

// stepResponses maps completedSteps onto the inputResponses of the retry
// for the suspension's steps. completedSteps is cumulative: entries of
// steps not in this suspension are ignored, and where a step id repeats,
// the last entry counts. A roots step is answered with no roots. A step
// completed with an error is, for elicitation, declined; for sampling,
// returned as refused (the 2026-07-28 inputResponses have no error form).
func stepResponses(steps []seal.SagaStep, completed gjson.Result) (map[string]json.RawMessage, *refusedStep, *jsonrpc.RPCError) {
	last := make(map[string]gjson.Result, len(steps))
	var bad *jsonrpc.RPCError
	i := 0
	completed.ForEach(func(_, e gjson.Result) bool {
		id := e.Get("stepId")
		if !e.IsObject() || id.Type != gjson.String {
			bad = invalid("completedSteps[%d] must be an object with a string stepId", i)
			return false
		}
		i++
		for _, s := range steps {
			if s.ID == id.Str {
				last[id.Str] = e
			}
		}
		return true
	})
	if bad != nil {
		return nil, nil, bad
	}
	out := make(map[string]json.RawMessage, len(steps))
	var refused *refusedStep
	for _, s := range steps {
		if s.Kind == seal.SagaRoots {
			out[s.ID] = face.RootsNone
			continue
		}
		e, ok := last[s.ID]
		if !ok {
			return nil, nil, invalid("completedSteps has no entry for step %q of this suspension", jsonrpc.Clip(s.ID))
		}
		res, errObj := e.Get("result"), e.Get("error")
		switch {
		case res.Exists() == errObj.Exists():
			return nil, nil, invalid("step %q must have either a result or an error", jsonrpc.Clip(s.ID))
		case errObj.Exists() && !errObj.IsObject():
			return nil, nil, invalid("step %q: error must be an object", jsonrpc.Clip(s.ID))
		case errObj.Exists() && s.Kind == seal.SagaElicitation:
			out[s.ID] = face.ElicitDeclined
		case errObj.Exists():
			if refused == nil {
				refused = &refusedStep{id: s.ID, message: errObj.Get("message").String()}
			}
		default:
			if err := translate.ValidateInputResponse(face.Kind(s.Kind).Method(), []byte(res.Raw)); err != nil {
				return nil, nil, invalid("step %q: %v", jsonrpc.Clip(s.ID), err)
			}
			out[s.ID] = json.RawMessage(res.Raw)
		}
	}
	return out, refused, nil
}
