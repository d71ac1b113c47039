package rest

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/caddymodule/face"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/seal"
)

// A call cancelled while it waits for an answer is dismissed: the gateway
// answers the tool's questions the way a user who closes the dialog does
// (an elicitation `{"action":"cancel"}`, a roots request the principal's
// roots), in the background, and goes on dismissing while the tool asks
// only such questions, up to max_rounds. In front of a legacy server the
// call is a task (carry.go), its answers posted with tasks/update, and the
// upstream call ends at once; a modern server holds nothing, and its tool
// ends as it would for that user. A sampling question has no refusal form:
// a call that asks one is cancelled with tasks/cancel in front of a legacy
// server (cancel), and left as it is in front of a modern one. What the
// tool answers is dropped: the record says canceled.

// dismissTimeout bounds a dismissal, all its rounds.
const dismissTimeout = 30 * time.Second

// dismissal is the retry that dismisses a call's pending round, or false
// when a question of the round cannot be dismissed.
func dismissal(c seal.RESTCall) (face.ToolCall, bool) {
	if (c.RequestState == "" && c.TaskID == "") || len(c.Inputs) == 0 {
		return face.ToolCall{}, false
	}
	call := retryOf(c)
	for _, in := range c.Inputs {
		switch {
		case len(in.Answer) > 0:
		case in.Method == translate.MethodElicit:
			call.Responses[in.Key] = json.RawMessage(`{"action":"cancel"}`)
		default:
			return face.ToolCall{}, false
		}
	}
	return call, true
}

// dismiss dismisses the call rec was waiting for (dismissal), round
// after round, and drops what the tool answers.
func (f *Face) dismiss(r *http.Request, rec seal.RESTCall, call face.ToolCall) {
	// r's values (the replacer the principal is read with), not its end.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), dismissTimeout)
	defer cancel()
	// Whatever ends it (an end, a failure, max_rounds), nothing is left to
	// do: the tool's answers are dropped. A round of a task (carry.go) is
	// answered with tasks/update.
	run := &running{}
	run.task.set(rec.TaskID)
	_, _, _ = face.Drive(f.gw.Limits().MaxRounds, call,
		func(c face.ToolCall) (face.Answer, error) { return f.step(ctx, r, &rec, c, run) },
		func(a face.Answer) (map[string]json.RawMessage, bool, error) {
			inputs, err := f.inputs(ctx, rec.Principal, a.Result().Get("inputRequests"))
			if err != nil {
				return nil, false, err
			}
			rec.Inputs, rec.RequestState = inputs, a.Result().Get("requestState").String()
			next, ok := dismissal(rec)
			if !ok {
				f.gw.Logger().Debug("REST face: a cancelled call asked what cannot be dismissed; left to park_ttl", zap.String("tool", rec.Tool))
				return nil, false, nil
			}
			return next.Responses, true, nil
		})
}
