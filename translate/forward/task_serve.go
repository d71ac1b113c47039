package forward

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/seal"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/traces"
)

// The Tasks extension's requests on the tasks the forward bridge holds:
// tasks/get, tasks/update and tasks/cancel (tasks/result and tasks/list are
// no methods of 2026-07-28: RemovedMethod). The checks run in the order the
// conformance suite expects: the headers (-32020, ValidateModern: Mcp-Name
// is the taskId), then the capability (-32021, even for a task that does
// not exist), then the task (-32602: unknown, expired, another principal's
// or another instance's that could not be reached).

// taskMethods are the Tasks extension's requests the bridge answers.
var taskMethods = map[string]bool{"tasks/get": true, "tasks/update": true, "tasks/cancel": true}

// TaskOf says whose task a tasks/get, tasks/update or tasks/cancel names,
// as RetryOf does for a requestState: ParkedHere or ParkedThere (with the
// owner) when its taskId is one of the gateway's for r's principal, else
// NotRetry (the bridge answers -32021 or -32602; a modern upstream may own
// it).
func (b *Bridge) TaskOf(r *Request) Retry {
	r.Options = b.optionsOf(r)
	tk, ok := b.taskIDOf(r)
	if !ok {
		return Retry{}
	}
	rt := Retry{Whose: ParkedHere, Owner: translate.Owner{Instance: tk.Instance, Address: tk.Address}}
	if tk.Instance != r.Options.Instance && b.heldTask(tk.Handle, tk.Principal) == nil {
		rt.Whose = ParkedThere // unless taken over here (task_takeover.go)
	}
	return rt
}

// taskIDOf opens the taskId a tasks/get, tasks/update or tasks/cancel
// names, when it is one of the gateway's for r's principal.
func (b *Bridge) taskIDOf(r *Request) (seal.Task, bool) {
	if r.Kind != jsonrpc.KindRequest || !taskMethods[r.Method] {
		return seal.Task{}, false
	}
	tk, err := seal.OpenTask(b.optionsOf(r).Keyring, translate.StringField(translate.ParamsOf(r.Raw), "taskId"))
	return tk, err == nil && tk.Principal == r.Principal
}

// serveTask answers tasks/get, tasks/update and tasks/cancel.
func (b *Bridge) serveTask(ctx context.Context, r Request, sink translate.Sink) translate.Served {
	if !DeclaresTasks(r.ClientCapabilities) {
		rerr := &jsonrpc.RPCError{HTTPStatus: http.StatusBadRequest, Code: jsonrpc.MissingRequiredClientCapability,
			Message: "Missing required client capability: the Tasks extension (" + ExtTasks + ")",
			Data:    requiredTasksData}
		_ = sink.Respond(rerr.HTTPStatus, jsonrpc.ErrorResponse(r.ID, rerr))
		return translate.Served{Outcome: translate.OutcomeError}
	}
	params := translate.ParamsOf(r.Raw)
	id := translate.StringField(params, "taskId")
	t, tk, err := b.lookupTask(r, id)
	if tk != nil {
		traces.Link(ctx, traces.Ref(tk.Trace), traces.TaskCall) // to the call that made the task
	}
	var stored storedTask
	if t == nil && tk != nil && r.Options.Tasks.Store != nil && tk.Upstream == "" && (r.OwnerGone || tk.Instance == r.Options.Instance) {
		// Not held here: its record says (task_takeover.go).
		if stored, err = b.recoverTask(ctx, r, id, *tk); err != nil {
			rerr := &jsonrpc.RPCError{HTTPStatus: http.StatusServiceUnavailable, Code: jsonrpc.InternalError,
				Message: "the task's record could not be read from the gateway's storage: retry later", Cause: err}
			_ = sink.Respond(rerr.HTTPStatus, jsonrpc.ErrorResponse(r.ID, rerr))
			return translate.Served{Outcome: translate.OutcomeError, Cause: err}
		}
		t = stored.t
	}
	if view := stored.view; view != nil {
		if stored.busy != nil && r.Method != "tasks/get" {
			retryAfter(sink, stored.left)
		}
		return b.serveView(r, view, stored.busy, sink)
	}
	if t == nil {
		rerr := &jsonrpc.RPCError{HTTPStatus: http.StatusBadRequest, Code: jsonrpc.InvalidParams,
			Message: "Invalid params: unknown taskId (it never existed, expired, or is not yours)"}
		_ = sink.Respond(rerr.HTTPStatus, jsonrpc.ErrorResponse(r.ID, rerr))
		served := translate.Served{Outcome: translate.OutcomeError}
		if errors.Is(err, seal.ErrUnknownKey) {
			served.Refused = RefusedUnknownKey // for the operator's log only
		}
		return served
	}
	switch r.Method {
	case "tasks/get":
		t.kind.refresh(ctx, b, t)
		_ = sink.Respond(http.StatusOK, translate.ResultResponse(r.ID, t.envelope("complete", true)))
		b.readByFace(t) // task_hosted.go
	case "tasks/update":
		if rerr := b.updateTask(t, translate.InputResponses(params)); rerr != nil {
			_ = sink.Respond(rerr.HTTPStatus, jsonrpc.ErrorResponse(r.ID, rerr))
			return translate.Served{Outcome: translate.OutcomeError}
		}
		_ = sink.Respond(http.StatusOK, translate.ResultResponse(r.ID, []byte(`{"resultType":"complete"}`)))
	default: // tasks/cancel: the same ack for a task that already ended
		t.kind.cancel(b, t)
		_ = sink.Respond(http.StatusOK, translate.ResultResponse(r.ID, []byte(`{"resultType":"complete"}`)))
	}
	return translate.Served{Outcome: translate.OutcomeComplete}
}

// requiredTasksData is the data of -32021 for the Tasks extension.
var requiredTasksData = json.RawMessage(`{"requiredCapabilities":{"extensions":{"` + ExtTasks + `":{}}}}`)

// lookupTask returns r's principal's task named by id in this instance's
// table, of either kind (one of its own, or one it took over), or nil, with
// what id opened as (nil when it did not open, or is another principal's)
// and the error it did not open with.
func (b *Bridge) lookupTask(r Request, id string) (*task, *seal.Task, error) {
	tk, err := seal.OpenTask(r.Options.Keyring, id)
	if err != nil || tk.Principal != r.Principal {
		return nil, nil, err
	}
	t := b.heldTask(tk.Handle, r.Principal)
	if t == nil || !t.kind.names(tk) {
		return nil, &tk, nil
	}
	return t, &tk, nil
}

// serveView answers a tasks/* request from a task's record (view), for a
// task this instance does not run: tasks/get shows it; tasks/update and
// tasks/cancel of a task whose owner still holds its lease get busy; of one
// that ended, the same ack as on its owner.
func (b *Bridge) serveView(r Request, view *task, busy *jsonrpc.RPCError, sink translate.Sink) translate.Served {
	switch {
	case r.Method == "tasks/get":
		_ = sink.Respond(http.StatusOK, translate.ResultResponse(r.ID, view.envelope("complete", true)))
	case busy != nil:
		_ = sink.Respond(busy.HTTPStatus, jsonrpc.ErrorResponse(r.ID, busy))
		return translate.Served{Outcome: translate.OutcomeError}
	default:
		_ = sink.Respond(http.StatusOK, translate.ResultResponse(r.ID, []byte(`{"resultType":"complete"}`)))
	}
	return translate.Served{Outcome: translate.OutcomeComplete}
}

// updateTask posts the answers to t's questions upstream (takeAnswers), as
// JSON-RPC responses to the requests that asked them; when the upstream
// refuses one, t fails and its runner lets the upstream go.
func (b *Bridge) updateTask(t *task, answers map[string]json.RawMessage) *jsonrpc.RPCError {
	t.mu.Lock()
	took := t.takeAnswers(answers)
	t.traceRun() // working again, before the upstream may end the task
	t.mu.Unlock()
	if t.sess == nil || len(took) == 0 {
		return nil
	}
	rerr := b.postAnswers(&t.taskState, t.sess, took, t.stopRunner)
	t.mu.Lock()
	answered := len(t.inputs) == 0
	t.mu.Unlock()
	if rerr == nil && answered {
		go b.resumeDeferred(t) // taken over while it waited: its stream now
	}
	b.persist(t)
	return rerr
}
