package reverse

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
	"github.com/tidwall/gjson"
)

// Tasks in the reverse bridge: a modern upstream may answer a legacy
// client's tools/call with a task (the 2026-07-28 Tasks extension,
// io.modelcontextprotocol/tasks). A legacy client knows
// nothing of tasks, so the gateway follows the task for it and the client
// sees one blocking call: the gateway polls tasks/get, asks an
// input_required task's inputRequests in-line on the call's stream (the
// machinery of the input_required rounds, inline.go) and sends the
// answers with tasks/update, then answers the call with the task's result
// (completed), its JSON-RPC error (failed) or an error (cancelled). The
// client's cancellation (notifications/cancelled, a closed stream, DELETE
// of the session) becomes tasks/cancel.
//
// The gateway declares the extension in the per-request client
// capabilities of tools/call (and of the tasks/* requests, which require
// it) because it can serve tasks: a server MUST NOT answer with a task
// otherwise, and one whose tool needs a task would refuse the call
// (-32021). Target.NoTasks turns the declaration off for an upstream.

// reverseTasksExtension names the Tasks extension in capabilities.
const reverseTasksExtension = "io.modelcontextprotocol/tasks"

// Polling bounds. The upstream's pollIntervalMs is honoured within
// [revPollFloor, revPollCeiling]: the floor spares an upstream that asks
// for a zero interval, the ceiling keeps a blocked legacy client from
// waiting long after its task ended.
const (
	revPollDefault   = time.Second // when the upstream gives no pollIntervalMs
	revPollFloor     = 100 * time.Millisecond
	revPollCeiling   = 5 * time.Second
	revPollFailures  = 3               // tasks/get failing this many times in a row ends the call
	revCancelTimeout = 5 * time.Second // the best-effort tasks/cancel
)

// errSessionDeleted is the cause of a call whose session was deleted.
var errSessionDeleted = fmt.Errorf("the session was deleted: %w", errCallCancelled)

// declaresTasks reports whether requests of s declare the Tasks
// extension upstream.
func (s *Session) declaresTasks() bool {
	return !s.Target.NoTasks
}

// revDeclareTasks returns the 2026 client capabilities caps (a JSON
// object as ModernClientCapabilities returns it; anything else counts as
// {}) with the Tasks extension declared. The extensions already declared
// are kept (of a repeated id the first), sorted by id.
func revDeclareTasks(caps []byte) []byte {
	out := clientCapabilities{Extensions: map[string]json.RawMessage{}}
	if c := gjson.ParseBytes(caps); jsonrpc.ValidJSON(caps) == nil && c.IsObject() {
		raw := func(name string) json.RawMessage {
			if v := c.Get(name); v.Exists() {
				return json.RawMessage(v.Raw)
			}
			return nil
		}
		out.Elicitation, out.Experimental, out.Roots, out.Sampling = raw("elicitation"), raw("experimental"), raw("roots"), raw("sampling")
		c.Get("extensions").ForEach(func(k, v gjson.Result) bool { // a map of data: the first of a repeated id
			if _, seen := out.Extensions[k.Str]; !seen {
				out.Extensions[k.Str] = json.RawMessage(v.Raw)
			}
			return true
		})
	}
	out.Extensions[reverseTasksExtension] = json.RawMessage("{}")
	b, err := json.Marshal(out)
	if err != nil {
		return caps
	}
	return b
}

// revPollInterval is the wait between two tasks/get: v (pollIntervalMs)
// within the bounds, or the default when v is not a positive number.
func revPollInterval(v gjson.Result) time.Duration {
	if v.Type != gjson.Number || v.Num <= 0 {
		return revPollDefault
	}
	d := time.Duration(v.Num * float64(time.Millisecond))
	return min(max(d, revPollFloor), revPollCeiling)
}

// revTask is one upstream task the bridge follows for a legacy call.
type revTask struct {
	rv     *Bridge
	s      *Session
	r      Request
	sink   translate.Sink
	o      *Options
	id     string // the taskId
	level  string
	asked  map[string]bool // input keys asked already: they are unique for the task's life
	served *translate.Served
	reason *string
}

// followTask serves a tools/call the upstream answered with a task:
// created is the CreateTaskResult. served and reason, the call's, are
// updated (served.Round counts on from the rounds already run).
func (rv *Bridge) followTask(ctx context.Context, s *Session, r Request, sink translate.Sink, created gjson.Result, level string, served *translate.Served, reason *string) {
	o := rv.options(s)
	tid := created.Get("taskId")
	if tid.Type != gjson.String || tid.Str == "" {
		*reason = "the upstream answered with a task without a taskId"
		rv.respondError(r, sink, translate.BadGateway(*reason))
		return
	}
	t := &revTask{rv: rv, s: s, r: r, sink: sink, o: o, id: tid.Str, level: level, asked: map[string]bool{}, served: served, reason: reason}

	// The task is followed for at most TaskWait, and no longer than the
	// upstream keeps it (its ttlMs from creation).
	wait, bound := o.TaskWait, "max_task_wait"
	if ttl := created.Get("ttlMs"); ttl.Type == gjson.Number && ttl.Num > 0 {
		if d := time.Duration(ttl.Num * float64(time.Millisecond)); d < wait {
			wait, bound = d, "the task's ttlMs"
		}
	}
	deadline := time.NewTimer(wait)
	defer deadline.Stop()

	interval := revPollInterval(created.Get("pollIntervalMs"))
	next := interval
	if st := created.Get("status").Str; st != translate.TaskWorking && st != translate.TaskInputRequired {
		next = 0 // already terminal: read it at once
	}
	failures := 0
	var lastErr *jsonrpc.RPCError
	for {
		if next > 0 {
			pause := time.NewTimer(next)
			select {
			case <-pause.C:
			case <-ctx.Done():
				pause.Stop()
				t.abandon(ctx)
				return
			case <-deadline.C:
				pause.Stop()
				t.expire(ctx, fmt.Sprintf("the upstream's task %s did not end within %v (%s); it was cancelled", jsonrpc.Clip(t.id), wait, bound))
				return
			}
		}
		next = interval
		task, rerr := t.request(ctx, "tasks/get", nil)
		if ctx.Err() != nil {
			t.abandon(ctx)
			return
		}
		if rerr == nil {
			if e := task.Get("error"); e.Exists() {
				if e.Get("code").Int() == jsonrpc.InvalidParams {
					// Unknown or expired: the task is gone.
					*reason = fmt.Sprintf("the upstream no longer knows task %s: %s", jsonrpc.Clip(t.id), jsonrpc.Clip(e.Get("message").String()))
					rv.respondError(r, sink, &jsonrpc.RPCError{HTTPStatus: http.StatusOK, Code: jsonrpc.InternalError, Message: *reason})
					return
				}
				rerr = &jsonrpc.RPCError{HTTPStatus: http.StatusBadGateway, Code: jsonrpc.InternalError,
					Message: fmt.Sprintf("tasks/get failed: %s (code %d)", jsonrpc.Clip(e.Get("message").String()), e.Get("code").Int())}
			} else if !task.Get("result").IsObject() {
				rerr = translate.BadGateway("tasks/get answered without a result object")
			}
		}
		if rerr != nil {
			failures++
			lastErr = rerr
			if failures < revPollFailures {
				continue
			}
			t.cancelUpstream(ctx)
			*reason = fmt.Sprintf("the upstream's task %s could not be read %d times in a row; it was cancelled: %s", jsonrpc.Clip(t.id), failures, lastErr.Message)
			served.Cause = lastErr.Cause
			rv.respondError(r, sink, &jsonrpc.RPCError{HTTPStatus: lastErr.HTTPStatus, Code: lastErr.Code, Message: *reason, Cause: lastErr.Cause})
			return
		}
		failures = 0
		res := task.Get("result")
		if v := res.Get("pollIntervalMs"); v.Exists() {
			interval = revPollInterval(v)
			next = interval
		}
		switch st := res.Get("status"); st.Str {
		case translate.TaskWorking:
		case translate.TaskInputRequired:
			if !t.answer(ctx, res.Get("inputRequests")) {
				return
			}
		case translate.TaskCompleted:
			t.complete(res.Get("result"))
			return
		case translate.TaskFailed:
			e := res.Get("error")
			if !e.IsObject() || e.Get("code").Type != gjson.Number {
				*reason = "the upstream's task failed without a JSON-RPC error object"
				rv.respondError(r, sink, translate.BadGateway(*reason))
				return
			}
			*reason = "the upstream's task failed: " + jsonrpc.Clip(e.Get("message").String())
			_ = sink.Respond(http.StatusOK, translate.ErrorObjectResponse(r.ID, LegacyError(r.Method, []byte(e.Raw))))
			return
		case translate.TaskCancelled:
			*reason = "the upstream cancelled task " + jsonrpc.Clip(t.id)
			if m := res.Get("statusMessage"); m.Type == gjson.String && m.Str != "" {
				*reason += ": " + jsonrpc.Clip(m.Str)
			}
			rv.respondError(r, sink, &jsonrpc.RPCError{HTTPStatus: http.StatusOK, Code: jsonrpc.InternalError, Message: *reason})
			return
		default:
			t.cancelUpstream(ctx)
			*reason = fmt.Sprintf("the upstream's task has an unknown status %s; it was cancelled", jsonrpc.Clip(st.Raw))
			rv.respondError(r, sink, translate.BadGateway(*reason))
			return
		}
	}
}

// answer asks the client the questions of an input_required task it has
// not asked yet, and sends the answers with tasks/update. It reports
// whether the task is still followed (else the call was answered).
func (t *revTask) answer(ctx context.Context, reqs gjson.Result) bool {
	if !reqs.IsObject() {
		return true // nothing in hand yet: poll again
	}
	fresh := map[string]json.RawMessage{} // keyed by data: input keys
	reqs.ForEach(func(k, v gjson.Result) bool {
		if _, seen := fresh[k.Str]; !seen && !t.asked[k.Str] {
			fresh[k.Str] = json.RawMessage(v.Raw)
		}
		return true
	})
	if len(fresh) == 0 {
		return true // answered already; the upstream has not caught up
	}
	if t.served.Round >= t.o.MaxRounds {
		t.cancelUpstream(ctx)
		*t.reason = fmt.Sprintf("the server asked for input more than %d times; giving up", t.o.MaxRounds)
		t.rv.fail(t.r, t.sink, *t.reason)
		return false
	}
	raw, err := jsonrpc.Marshal(fresh)
	if err != nil {
		*t.reason = err.Error()
		t.rv.respondError(t.r, t.sink, translate.BadGateway(*t.reason))
		return false
	}
	var overhead time.Duration
	responses, fail := t.rv.ask(ctx, t.s, t.r, t.sink, gjson.ParseBytes(raw), translate.StartWatch(&overhead))
	if ctx.Err() != nil {
		t.abandon(ctx)
		return false
	}
	if fail != "" {
		t.cancelUpstream(ctx)
		*t.reason = fail
		if strings.HasPrefix(fail, noAnswer) {
			t.served.Outcome = translate.OutcomeExpired
		}
		t.rv.fail(t.r, t.sink, fail)
		return false
	}
	for k := range fresh {
		t.asked[k] = true
	}
	t.served.Round++
	ack, rerr := t.request(ctx, "tasks/update", responses)
	if ctx.Err() != nil {
		t.abandon(ctx)
		return false
	}
	if rerr == nil {
		if e := ack.Get("error"); e.Exists() {
			rerr = &jsonrpc.RPCError{HTTPStatus: http.StatusOK, Code: jsonrpc.InternalError,
				Message: fmt.Sprintf("tasks/update failed: %s (code %d)", jsonrpc.Clip(e.Get("message").String()), e.Get("code").Int())}
		}
	}
	if rerr != nil {
		t.cancelUpstream(ctx)
		*t.reason = fmt.Sprintf("the client's answers could not reach the upstream's task %s; it was cancelled: %s", jsonrpc.Clip(t.id), rerr.Message)
		t.served.Cause = rerr.Cause
		t.rv.respondError(t.r, t.sink, &jsonrpc.RPCError{HTTPStatus: rerr.HTTPStatus, Code: rerr.Code, Message: *t.reason, Cause: rerr.Cause})
		return false
	}
	return true
}

// complete answers the call with the completed task's result.
func (t *revTask) complete(res gjson.Result) {
	if !res.IsObject() {
		*t.reason = "the upstream's task completed without a result object"
		t.rv.respondError(t.r, t.sink, translate.BadGateway(*t.reason))
		return
	}
	out, err := LegacyResult(t.r.Method, []byte(res.Raw))
	if err != nil {
		*t.reason = err.Error()
		t.rv.respondError(t.r, t.sink, translate.BadGateway(*t.reason))
		return
	}
	_ = t.sink.Respond(http.StatusOK, translate.ResultResponse(t.r.ID, out))
	t.served.Outcome = translate.OutcomeComplete
}

// abandon ends a call whose context ended (the client cancelled or left,
// its session was deleted, the gateway stops): the task is cancelled
// upstream first.
func (t *revTask) abandon(ctx context.Context) {
	t.cancelUpstream(ctx)
	t.served.Outcome, *t.reason = t.rv.abandoned(ctx, t.r, t.sink, nil)
}

// expire ends a call whose task outlived its bound, cancelling it upstream.
func (t *revTask) expire(ctx context.Context, msg string) {
	t.cancelUpstream(ctx)
	*t.reason = msg
	t.served.Outcome = translate.OutcomeExpired
	t.rv.respondError(t.r, t.sink, &jsonrpc.RPCError{HTTPStatus: http.StatusOK, Code: jsonrpc.InternalError, Message: msg})
}

// cancelUpstream sends tasks/cancel, best effort: it outlives ctx (the
// call's, often ended already) by at most revCancelTimeout.
func (t *revTask) cancelUpstream(ctx context.Context) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), revCancelTimeout)
	defer cancel()
	_, _ = t.request(cctx, "tasks/cancel", nil)
}

// taskParams are the params of a tasks/* request (its fields in name
// order, the order the gateway has always sent them in).
type taskParams struct {
	Meta requestMeta `json:"_meta"`
	// InputResponses is keyed by data (input keys); nil omits it.
	InputResponses map[string]json.RawMessage `json:"inputResponses,omitempty"`
	TaskID         string                     `json:"taskId"`
}

// request sends one tasks/* request about the task upstream, with the
// session's _meta (the extension declared) and Mcp-Name = the taskId, and
// returns the JSON-RPC response.
func (t *revTask) request(ctx context.Context, method string, responses map[string]json.RawMessage) (gjson.Result, *jsonrpc.RPCError) {
	id := t.rv.upstreamID(t.o)
	body, err := jsonrpc.Marshal(jsonrpc.NewRequest(json.RawMessage(jsonrpc.Quote(id)), method, taskParams{
		Meta: requestMeta{
			ClientCapabilities: revDeclareTasks(ModernClientCapabilities(t.s.Capabilities)),
			ClientInfo:         t.s.ClientInfo,
			LogLevel:           t.level,
			ProtocolVersion:    translate.ModernVersion,
		},
		InputResponses: responses,
		TaskID:         t.id,
	}))
	if err != nil {
		return gjson.Result{}, translate.BadGateway(err.Error())
	}
	res, rerr := t.rv.exchange(ctx, t.o, t.s.Upstream, modernHeader(t.r.Header, method, t.id, true), body, id, nil, "")
	if rerr == nil && ctx.Err() != nil {
		return gjson.Result{}, &jsonrpc.RPCError{HTTPStatus: http.StatusServiceUnavailable, Code: jsonrpc.InternalError, Message: method + " was interrupted", Cause: context.Cause(ctx)}
	}
	return res, rerr
}

// revDropTaskSupport removes execution.taskSupport from every tool of the
// JSON array tools (a tools/list result for a legacy client). In 2025 it
// asks the client for the experimental, task-augmented tools/call, which
// the gateway does not offer legacy clients: it follows the upstream's
// tasks itself, so every tool is an ordinary blocking call for them (and
// a 2025 client refuses to call a tool marked required otherwise).
func revDropTaskSupport(tools string) string {
	var sp []jsonrpc.Splice
	gjson.Parse(tools).ForEach(func(_, tool gjson.Result) bool {
		if !tool.IsObject() {
			return true
		}
		// Nested indexes are relative to the whole array.
		if ex := tool.Get("execution"); ex.IsObject() && ex.Get("taskSupport").Exists() {
			sp = append(sp, jsonrpc.Splice{At: ex.Index, End: ex.Index + len(ex.Raw), Text: jsonrpc.RemoveMembers(ex.Raw, "taskSupport")})
		}
		return true
	})
	if len(sp) == 0 {
		return tools
	}
	jsonrpc.SortSplices(sp)
	return string(jsonrpc.ApplySplices(tools, sp))
}
