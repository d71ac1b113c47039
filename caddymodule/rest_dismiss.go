package caddymodule

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/seal"
)

// A call cancelled while it waits for an answer is dismissed: the gateway
// answers the tool's questions the way a user who closes the dialog does
// (an elicitation `{"action":"cancel"}`, a roots request the principal's
// roots), in the background, and goes on dismissing while the tool asks
// only such questions, up to max_rounds. In front of a legacy server the
// parked upstream call then ends at once instead of at park_ttl; a modern
// server holds nothing, and its tool ends as it would for that user. A
// sampling question has no refusal form in inputResponses: a call that
// asks one is left as it is (parked until park_ttl in front of a legacy
// server). What the tool answers is dropped: the record says canceled.

// restDismissTimeout bounds a dismissal, all its rounds.
const restDismissTimeout = 30 * time.Second

// restDismissal is the retry that dismisses a call's pending round, or
// false when a question of the round cannot be dismissed.
func restDismissal(c seal.RESTCall) (sagaCall, bool) {
	if c.RequestState == "" || len(c.Inputs) == 0 {
		return sagaCall{}, false
	}
	call := restRetry(c)
	for _, in := range c.Inputs {
		switch {
		case len(in.Answer) > 0:
		case in.Method == translate.MethodElicit:
			call.responses[in.Key] = json.RawMessage(`{"action":"cancel"}`)
		default:
			return sagaCall{}, false
		}
	}
	return call, true
}

// restDismiss dismisses the call rec was waiting for (restDismissal),
// round after round, and drops what the tool answers.
func (h *Handler) restDismiss(r *http.Request, rec seal.RESTCall, call sagaCall) {
	// r's values (the replacer the principal is read with), not its end.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), restDismissTimeout)
	defer cancel()
	for range max(h.Parking.MaxRounds, 1) {
		_, answer, failure := h.restRPC(ctx, r, "tools/call", call.name, call.callParams(restToolCallMeta), nil)
		result := answer.Get("result")
		if failure != nil || result.Get("resultType").String() != "input_required" {
			return // ended (or failed): nothing parked any more
		}
		inputs, err := h.restInputs(ctx, rec.Principal, result.Get("inputRequests"))
		if err != nil {
			return
		}
		rec.Inputs, rec.RequestState = inputs, result.Get("requestState").String()
		var ok bool
		if call, ok = restDismissal(rec); !ok {
			h.logger.Debug("REST face: a cancelled call asked what cannot be dismissed; left to park_ttl", zap.String("tool", rec.Tool))
			return
		}
	}
}
