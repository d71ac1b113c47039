package forward

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/tidwall/gjson"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/legacy"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/seal"
)

// Tasks of an upstream's own: a legacy (2025-11-25) server with the 2025
// experimental tasks (capabilities.tasks.requests.tools.call) runs the task
// itself, and the bridge shows it to a modern client as a task of the Tasks
// extension (2026-07-28), instead of holding the call (task.go):
//
//	tools/call, the tool's rule optional or required and the request
//	declaring the extension (mayBecomeTask; for a tool no rule names and
//	no tools/list has shown yet, learnToolTasks in
//	task_learn.go), the upstream declaring tasks for
//	tools/call and its tools/list giving the tool an execution.taskSupport
//	other than forbidden: start sends the call with params.task {ttl}
//	(upstreamTaskParams)
//	  |  the upstream answers a 2025 CreateTaskResult (createUpstreamTask):
//	  |  the client gets a flat 2026 one; the session the task lives on
//	  v  stays leased to the task (a 2025 task is visible on it only)
//	WORKING / INPUT_REQUIRED: the runner (runTask, with upstreamRun in
//	  |  task_upstream_run.go) holds the upstream's tasks/result
//	  |  open: the TypeScript SDK 1.x delivers a
//	  |  task's questions only there, in-line; they become the task's
//	  |  inputRequests, and tasks/update answers them as JSON-RPC responses.
//	  |  tasks/get asks the upstream's tasks/get (statusMessage, a
//	  |  cancellation of the upstream's), shown as working until the
//	  v  questions or the result are in hand
//	COMPLETED (tasks/result's result) / FAILED (its error, or the upstream's
//	task failed) / CANCELLED (tasks/cancel: the upstream's tasks/cancel,
//	then terminal at once; the ttl; the gateway stopping). The session goes
//	back to the pool; the record and result stay until the ttl.
//
// The client's taskId is sealed like the gateway's own (seal.Task, with
// Upstream and Session): it names the owner and the principal. A modern
// client's tasks/result and tasks/list never reach such an upstream (Serve
// answers -32601), nor does a modern client's own params.task
// (upstreamParams drops it).

// upstreamTask is a 2025 task object (tasks/get's result, a
// CreateTaskResult's task), checked.
type upstreamTask struct {
	id, status, note string
	created, updated time.Time
	ttlMs, pollMs    int64 // 0: none
}

// Bounds of what an upstream's task object may carry.
const (
	maxUpstreamNote   = 512
	maxUpstreamPollMs = int64(time.Hour / time.Millisecond)
)

// parseUpstreamTask checks a 2025 task object (hostile input): a taskId of
// 1 to seal.MaxUpstreamTaskLen bytes, a known status; statusMessage is
// clipped, ttl and pollInterval become integer milliseconds (0 when absent,
// null or invalid), timestamps that do not parse become now.
func parseUpstreamTask(obj gjson.Result) (upstreamTask, bool) {
	var u upstreamTask
	if !obj.IsObject() {
		return u, false
	}
	id, status := obj.Get("taskId"), obj.Get("status")
	if id.Type != gjson.String || id.Str == "" || len(id.Str) > seal.MaxUpstreamTaskLen ||
		status.Type != gjson.String || !translate.KnownTaskStatus(status.Str) {
		return u, false
	}
	u.id, u.status = id.Str, status.Str
	if n := obj.Get("statusMessage"); n.Type == gjson.String {
		u.note = n.Str
		if len(u.note) > maxUpstreamNote {
			u.note = u.note[:maxUpstreamNote]
		}
	}
	u.ttlMs = millis(obj.Get("ttl"), math.MaxInt64)
	u.pollMs = millis(obj.Get("pollInterval"), maxUpstreamPollMs)
	now := time.Now()
	u.created, u.updated = timeOr(obj.Get("createdAt"), now), timeOr(obj.Get("lastUpdatedAt"), now)
	return u, true
}

// millis returns a positive number of milliseconds as an integer, at most
// limit; 0 for anything else.
func millis(v gjson.Result, limit int64) int64 {
	if v.Type != gjson.Number || !(v.Num >= 1) {
		return 0
	}
	if v.Num >= float64(limit) {
		return limit
	}
	return int64(math.Round(v.Num))
}

// timeOr parses an RFC 3339 timestamp, or returns or.
func timeOr(v gjson.Result, or time.Time) time.Time {
	if v.Type == gjson.String && len(v.Str) <= 64 {
		if t, err := time.Parse(time.RFC3339Nano, v.Str); err == nil {
			return t
		}
	}
	return or
}

// upstreamHasTasks reports whether an InitializeResult declares 2025 tasks
// for tools/call.
func upstreamHasTasks(init []byte) bool {
	return gjson.GetBytes(init, "capabilities.tasks.requests.tools.call").IsObject()
}

// upstreamTaskParams returns the legacy params of r's tools/call made
// task-augmented (params.task {ttl}), and true, when the upstream of sess
// runs the task itself: r may become a task (r.hosting), the upstream
// declares 2025 tasks for tools/call and its tools/list gave the tool an
// execution.taskSupport of optional or required.
func (b *Bridge) upstreamTaskParams(r *Request, sess *legacy.Session, params []byte) ([]byte, bool) {
	if r.hosting == nil || r.Method != "tools/call" || !upstreamHasTasks(sess.InitResult) ||
		len(sess.ID) > seal.MaxUpstreamTaskLen {
		return nil, false
	}
	if m, ok := b.support.mode(r.Upstream, r.Principal, r.Name); !ok || m == TaskForbidden {
		return nil, false
	}
	up := string(translate.UpstreamParams(params))
	if up == "" {
		up = "{}"
	}
	if !gjson.Parse(up).IsObject() {
		return nil, false
	}
	ms, _ := jsonrpc.Members(up)
	task := `"task":{"ttl":` + strconv.FormatInt(r.Options.Tasks.TTL.Milliseconds(), 10) + `}`
	sp := jsonrpc.AppendMembers(up, ms, []string{task})
	return []byte(jsonrpc.ApplySplices(up, []jsonrpc.Splice{sp})), true
}

// createUpstreamTask reads the upstream's answer to a task-augmented
// tools/call: a CreateTaskResult makes the task and the client gets it
// flat; any other answer is relayed as for a plain call.
func (b *Bridge) createUpstreamTask(ctx context.Context, c *call, r Request, sink translate.Sink) string {
	msgs := c.up.Messages()
	for {
		var m jsonrpc.Message
		var ok bool
		select {
		case m, ok = <-msgs:
		case <-c.sess.Inbox():
			continue
		case <-ctx.Done():
			b.cancelOrphanTask(c)
			return b.requestEnded(ctx, c, r, sink)
		}
		if !ok {
			outcome, _ := b.upstreamEnded(c, r, sink)
			return outcome
		}
		switch {
		case m.Kind == jsonrpc.KindRequest:
			// Nothing can be asked before the task exists.
			answerAside(b.ctx, c.sess, m)
			continue
		case m.Kind == jsonrpc.KindNotification:
			if err := relayNotification(m, r, sink); err != nil {
				b.abandon(c, translate.OutcomeCancelled, "client stopped reading")
				return translate.OutcomeCancelled
			}
			continue
		case m.Kind != jsonrpc.KindResponse || string(m.ID) != string(c.up.ID):
			continue
		}
		res := translate.ResultOf(m.Raw)
		tv := gjson.GetBytes(res, "task")
		if res == nil || !tv.Exists() {
			// An error, or the upstream ran the call without a task.
			b.finish(c, true)
			outcome := b.respondFinal(c, r, m, sink)
			b.report(c, outcome, "")
			return outcome
		}
		u, valid := parseUpstreamTask(tv)
		if !valid {
			b.finish(c, false)
			rerr := &jsonrpc.RPCError{HTTPStatus: http.StatusBadGateway, Code: jsonrpc.InternalError,
				Message: "the upstream answered with an invalid task (2025 CreateTaskResult)"}
			_ = sink.Respond(rerr.HTTPStatus, jsonrpc.ErrorResponse(r.ID, rerr))
			b.report(c, translate.OutcomeError, rerr.Message)
			return translate.OutcomeError
		}
		if ctx.Err() != nil {
			// The client left meanwhile: nobody will ever see the task.
			cctx, cancel := context.WithTimeout(b.ctx, upstreamTaskTimeout)
			cancelUpstreamTask(cctx, c.sess, u.id)
			cancel()
			return b.requestEnded(ctx, c, r, sink)
		}
		t, k := b.newUpstreamTask(c, r, u)
		_ = sink.Respond(http.StatusOK, translate.ResultResponse(r.ID, t.envelope("task", false)))
		b.startRunner(t, c, b.newUpstreamRun(t, k))
		return OutcomeTask
	}
}

// orphanWait bounds how long a task-augmented call whose client left waits
// for the upstream's answer, to cancel the task it may have made.
const orphanWait = 5 * time.Second

// cancelOrphanTask reads, for at most orphanWait, the answer to c (whose
// client left): when it is a task, the upstream is sent tasks/cancel for
// it, since nobody will ever see it (a 2025 task lives on until its ttl).
func (b *Bridge) cancelOrphanTask(c *call) {
	timer := time.NewTimer(orphanWait)
	defer timer.Stop()
	msgs := c.up.Messages()
	for {
		select {
		case <-timer.C:
			return
		case <-b.ctx.Done():
			return
		case m, ok := <-msgs:
			switch {
			case !ok:
				return
			case m.Kind == jsonrpc.KindRequest:
				answerAside(b.ctx, c.sess, m)
			case m.Kind == jsonrpc.KindResponse && string(m.ID) == string(c.up.ID):
				if u, valid := parseUpstreamTask(gjson.GetBytes(translate.ResultOf(m.Raw), "task")); valid {
					ctx, cancel := context.WithTimeout(b.ctx, upstreamTaskTimeout)
					defer cancel()
					cancelUpstreamTask(ctx, c.sess, u.id)
				}
				return
			}
		}
	}
}

// upstreamKind is the kind of the tasks a 2025 upstream runs itself. told
// is guarded by the task's mu.
type upstreamKind struct {
	upID string // the upstream's taskId (at most seal.MaxUpstreamTaskLen bytes)
	c    *call  // the tools/call that made it: key, session, options, reports
	told bool   // the upstream was sent tasks/cancel already
}

// newUpstreamTask makes the task of c, which the upstream answered with u,
// and puts it in the table. The call's stream is done with; its session
// stays leased to the task, and the task place c took moves to the task.
func (b *Bridge) newUpstreamTask(c *call, r Request, u upstreamTask) (*task, *upstreamKind) {
	c.up.Close()
	c.cancelUp()
	b.release(c)
	c.caps = r.ClientCapabilities
	o := c.opts
	k := &upstreamKind{upID: u.id, c: c}
	t := &task{princ: c.princ, tool: c.name, upstream: c.key.Upstream, born: time.Now(), sess: c.sess,
		kind: k, stop: make(chan struct{}),
		taskState: taskState{status: u.status, note: u.note, created: u.created, updated: u.updated, place: b.newTaskPlace(o, c.princ)},
		pollMs:    u.pollMs}
	if !translate.KnownTaskStatus(t.status) || translate.TaskTerminal(t.status) || t.status == translate.TaskInputRequired {
		t.status = translate.TaskWorking // the result, or the questions, are still to fetch
	}
	t.ttl = o.Tasks.TTL
	if u.ttlMs > 0 && time.Duration(u.ttlMs)*time.Millisecond < t.ttl {
		t.ttl = time.Duration(u.ttlMs) * time.Millisecond
	}
	b.addTask(c, r, t, seal.Task{Upstream: u.id, Session: string(c.sess.ID)})
	return t, k
}

// names: the taskId names the upstream's task and the session it lives
// on.
func (k *upstreamKind) names(tk seal.Task) bool {
	return tk.Upstream != "" && k.upID == tk.Upstream && string(k.c.sess.ID) == tk.Session
}

// dropsQuestions: the upstream's tasks/cancel ends the task's questions.
func (k *upstreamKind) dropsQuestions() bool { return true }

// metaRelatedTask is the 2025 _meta key naming the task a message belongs
// to; a 2026 client never sees it.
const metaRelatedTask = "io.modelcontextprotocol/related-task"

// withoutRelatedTask returns obj (a JSON object) without the related-task
// member of its _meta (and without _meta when that leaves it empty).
func withoutRelatedTask(obj []byte) []byte {
	src := string(obj)
	if !gjson.Parse(src).IsObject() || !gjson.Get(src, "_meta").IsObject() {
		return obj
	}
	ms, _ := jsonrpc.Members(src)
	out := make([]byte, 0, len(src))
	out = append(out, '{')
	changed := false
	for _, m := range ms {
		val := m.Val.Raw
		if m.Name == "_meta" && m.Val.IsObject() && jsonrpc.ObjectHas(val, metaRelatedTask) {
			changed = true
			if val = jsonrpc.RemoveMembers(val, metaRelatedTask); val == "{}" {
				continue
			}
		}
		out = jsonrpc.AppendMember(out, m.Key, val)
	}
	if !changed {
		return obj
	}
	return append(out, '}')
}

// taskParams is the params of a 2025 tasks/* request naming id.
func taskParams(id string) []byte {
	p, _ := json.Marshal(struct {
		TaskID string `json:"taskId"`
	}{id})
	return p
}
