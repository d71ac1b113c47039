package forward

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/seal"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/traces"
)

// The gateway's own tasks: a legacy tools/call the bridge holds open for
// as long as the task lives (the life drawn in task.go). The task place
// the call took at start moves to its task.

// hostedKind is the kind of the tasks the gateway runs itself.
type hostedKind struct{}

// names: a hosted task's taskId names nothing but its handle.
func (hostedKind) names(seal.Task) bool { return true }

// refresh: the task is as the runner left it.
func (hostedKind) refresh(context.Context, *Bridge, *task) {}

// cancel: the same ack for a task that already ended.
func (hostedKind) cancel(b *Bridge, t *task) { b.cancelTask(t, "tasks/cancel") }

// dropsQuestions: the runner answers the questions of a cancelled task
// with a cancellation (abandon).
func (hostedKind) dropsQuestions() bool { return false }

// newHostedTask makes c's task, with status, and puts it in the table; its
// run's span is a child of the span of ctx, the request that made it.
func (b *Bridge) newHostedTask(ctx context.Context, c *call, r Request, status string) *task {
	o := c.opts
	now := time.Now()
	t := &task{princ: c.princ, tool: c.name, upstream: c.key.Upstream, born: now, ttl: o.Tasks.TTL,
		sess: c.sess, kind: hostedKind{}, stop: make(chan struct{}),
		taskState: taskState{status: status, created: now, updated: now, place: b.newTaskPlace(o, c.princ), forFace: r.HostTask},
		pollMs:    o.Tasks.PollInterval.Milliseconds(), opts: o}
	if c.resumeOn && c.sess.ID != "" && !c.inboxAsked {
		// Its record says where the call stands once a message of its
		// stream carried an event id (task_store.go).
		t.resume = resumePoint{ok: true, session: string(c.sess.ID), version: c.sess.Version, callID: c.up.ID,
			serverInfo: translate.ServerInfo(c.sess.InitResult)}
	}
	b.addTask(c, r, t, seal.Task{})
	t.startRun(ctx, traces.Ref{}, "", "")
	return t
}

// readByFace forgets t, hosted for a face, once the face has read its end
// (tasks/get): the face keeps the outcome in its own record, and nobody
// else knows the taskId, so t's record would only take room in the
// storage until its ttl.
func (b *Bridge) readByFace(t *task) {
	t.mu.Lock()
	read := t.forFace && translate.TaskTerminal(t.status)
	t.mu.Unlock()
	if read {
		t.timer.Stop()
		b.expireTask(t)
	}
}

// becomeTask turns c, held past its window, into a task: the client gets
// a CreateTaskResult, and runTask goes on with the call.
func (b *Bridge) becomeTask(ctx context.Context, c *call, r Request, sink translate.Sink) string {
	c.caps = r.ClientCapabilities // the questions from now on are the task's client's
	t := b.newHostedTask(ctx, c, r, translate.TaskWorking)
	t.letGo, t.primed = c.up.Close, c.up.Primed
	b.persist(t) // the record exists before the client holds the taskId
	if t.opts.Tasks.Store != nil && t.resume.ok {
		// Written again once the stream's priming event is known: the
		// call can then be resumed before it said anything.
		c.up.OnPrimed(func() { b.persist(t) })
	}
	_ = sink.Respond(http.StatusOK, translate.ResultResponse(r.ID, t.envelope("task", false)))
	b.startRunner(t, c, &hostedRun{b: b, t: t, c: c})
	return OutcomeTask
}

// completedTask answers a required tool's call that ended within its
// window with a task already terminal, holding the result.
func (b *Bridge) completedTask(ctx context.Context, c *call, r Request, m jsonrpc.Message, sink translate.Sink) string {
	status, result, errObj := b.taskEnding(c, r.Method, m)
	t := b.newHostedTask(ctx, c, r, status)
	t.mu.Lock()
	t.result, t.errObj = result, errObj
	t.mu.Unlock()
	b.persist(t)
	_ = sink.Respond(http.StatusOK, translate.ResultResponse(r.ID, t.envelope("task", false)))
	b.taskEvent(c, "ended", status) // created terminal: it ends at once
	return OutcomeTask
}

// taskEnding turns the upstream's final message into a task's end.
func (b *Bridge) taskEnding(c *call, method string, m jsonrpc.Message) (status string, result, errObj []byte) {
	if res := translate.ResultOf(m.Raw); res != nil {
		out, err := translate.ReshapeResult(method, res, b.reshapeOptions(c))
		if err != nil {
			_, e := translate.MalformedUpstreamError()
			return translate.TaskFailed, nil, e
		}
		return translate.TaskCompleted, out, nil
	}
	_, out := translate.ReshapeError(translate.ErrorOf(m.Raw))
	return translate.TaskFailed, nil, out
}

// hostedRun is the runner's part for a hosted task: it reads the call's
// own stream, once; from the task's creation on it alone touches c.
type hostedRun struct {
	b *Bridge
	t *task
	c *call
	// For a task taken over (adopt): recheck is how long the runner reads
	// a silent stream, with no question open, before it reopens it after
	// the last event handled (stale), and ctx the call's context. An
	// upstream whose event store sends nothing live on a reopened stream
	// (the TypeScript server-everything's) delivers the rest that way.
	recheck time.Duration
	ctx     context.Context
	stale   bool
}

func (h *hostedRun) open() (<-chan jsonrpc.Message, taskStep) {
	if !h.stale {
		return h.c.up.Messages(), stepOn
	}
	h.stale = false
	t, b := h.t, h.b
	t.mu.Lock()
	after, seen := t.resumeAt()
	t.mu.Unlock()
	if after == "" { // it cannot be reopened (an event without id): read on
		return h.c.up.Messages(), stepOn
	}
	why := b.reopenCall(h.ctx, t, h.c, h.c.up.ID, after, seen)
	if why == "" {
		return h.c.up.Messages(), stepOn
	}
	switch {
	case t.handingOver.Load():
		return nil, stepDone // the record stays for the next owner
	case t.stopped() || b.ctx.Err() != nil:
		return nil, stepLetGo
	}
	b.finish(h.c, false)
	if t.end(translate.TaskFailed, nil, taskErrorObject("the task's upstream call could not be followed after its instance was lost ("+why+"): start the call again")) {
		b.persist(t)
		b.storeEvent(t, StoreLost, errors.New(why))
	}
	return nil, stepDone
}

// quiet is how long the runner reads a silent stream before it calls
// reopen; 0: for ever.
func (h *hostedRun) quiet() time.Duration { return h.recheck }

// reopen makes the next open reopen the stream.
func (h *hostedRun) reopen() { h.stale = true }

// recheckAfter is hostedRun.recheck for o: five task_poll_intervals, 5s
// without one, at least 1s.
func recheckAfter(o *Options) time.Duration {
	if o.Tasks.PollInterval <= 0 {
		return 5 * time.Second
	}
	return max(5*o.Tasks.PollInterval, time.Second)
}

// pop takes the messages that arrived while the call was parked first.
func (h *hostedRun) pop() (jsonrpc.Message, bool) {
	if len(h.c.held) == 0 {
		return jsonrpc.Message{}, false
	}
	var m jsonrpc.Message
	m, h.c.held = h.c.held[0], h.c.held[1:]
	return m, true
}

// inboxAsks: a question on the session's standalone stream is the task's
// too.
func (h *hostedRun) inboxAsks() bool { return true }

func (h *hostedRun) question(m jsonrpc.Message) (pendingInput, bool) {
	return h.b.taskQuestion(h.c, m, m.Params())
}

func (h *hostedRun) callID() json.RawMessage { return h.c.up.ID }

// final ends the task with the call's answer.
func (h *hostedRun) final(m jsonrpc.Message) {
	b, c := h.b, h.c
	b.finish(c, true)
	status, result, errObj := b.taskEnding(c, "tools/call", m)
	if len(result)+len(errObj) > c.opts.maxTaskResult() {
		status, result, errObj = translate.TaskFailed, nil, taskErrorObject(fmt.Sprintf(
			"the tool's result is larger than the gateway keeps for a task (max_task_result, %d bytes)", c.opts.maxTaskResult()))
	}
	h.t.end(status, result, errObj)
	b.persist(h.t)
	outcome := translate.OutcomeComplete
	if status == translate.TaskFailed {
		outcome = translate.OutcomeError
	}
	b.report(c, outcome, "")
	b.taskEvent(c, "ended", status)
}

// broke fails the task: the upstream ended the call without its answer.
func (h *hostedRun) broke() taskStep {
	b, c := h.b, h.c
	if h.t.handingOver.Load() {
		// The gateway is stopping and another instance takes the task
		// over from its record: the upstream session stays open.
		b.pool.Detach(c.key, c.sess)
		return stepDone
	}
	rerr := translate.UpstreamFailure("the upstream ended the call without a result", c.up.Err())
	b.finish(c, false)
	h.t.end(translate.TaskFailed, nil, taskErrorObject(rerr.Message))
	b.persist(h.t)
	b.report(c, translate.OutcomeError, rerr.Detail())
	b.taskEvent(c, "ended", translate.TaskFailed)
	return stepDone
}

// letGo abandons the call: its questions answered with a cancellation,
// notifications/cancelled upstream.
func (h *hostedRun) letGo(asked []pendingInput, why string) {
	t := h.t
	t.mu.Lock()
	h.c.pending = asked
	status := t.status // cancelled, or failed (tasks/update)
	t.mu.Unlock()
	h.b.abandon(h.c, translate.OutcomeCancelled, why)
	h.b.taskEvent(h.c, "ended", status)
}

// done: finish or abandon gave the session back already.
func (h *hostedRun) done() {}
