package forward

import (
	"context"
	"encoding/json"
	"time"

	"github.com/tidwall/gjson"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/legacy"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
)

// The life of an upstream's task after its creation (task_upstream.go):
// its runner (runTask, with upstreamRun) holds the upstream's
// tasks/result, and the client's tasks/get and tasks/cancel are answered
// from the task and the upstream's own tasks/get and tasks/cancel
// (upstreamKind's refresh and cancel).

// upstreamTaskTimeout bounds one tasks/get or tasks/cancel upstream.
const upstreamTaskTimeout = 10 * time.Second

// maxResultCalls bounds the tasks/result calls in a row whose stream ends
// without the result or a new question: the task then fails.
const maxResultCalls = 3

// upstreamRun is the runner's part for an upstream's task: it calls
// tasks/result on the task's session and reads it until the result, an
// error, or the task's stop (calling it again when its stream ends first,
// up to maxResultCalls in a row); the questions it delivers in-line become
// the task's inputRequests. At the end the session goes back to the pool.
type upstreamRun struct {
	b *Bridge
	t *task
	k *upstreamKind
	// ctx ends with the task's stop too: tasks/result may not even have
	// its headers yet (some servers send them with the first message).
	ctx     context.Context
	cancel  context.CancelFunc
	up      *legacy.Call // the tasks/result being read
	calls   int          // tasks/result calls since the last question
	healthy bool         // the session is fit for reuse
}

// newUpstreamRun is the runner's part for t, of kind k.
func (b *Bridge) newUpstreamRun(t *task, k *upstreamKind) *upstreamRun {
	ctx, cancel := context.WithCancel(b.ctx)
	go func() {
		select {
		case <-t.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	return &upstreamRun{b: b, t: t, k: k, ctx: ctx, cancel: cancel}
}

// open calls tasks/result.
func (u *upstreamRun) open() (<-chan jsonrpc.Message, taskStep) {
	u.calls++
	var err error
	if u.up, err = u.k.c.sess.Call(u.ctx, "tasks/result", taskParams(u.k.upID)); err != nil {
		select {
		case <-u.t.stop:
			return nil, stepLetGo
		default:
		}
		u.fail(translate.UpstreamFailure("the upstream refused tasks/result", err))
		return nil, stepDone
	}
	return u.up.Messages(), stepOn
}

func (u *upstreamRun) pop() (jsonrpc.Message, bool) { return jsonrpc.Message{}, false }

// inboxAsks: a 2025 task's questions come on tasks/result only.
func (u *upstreamRun) inboxAsks() bool { return false }

// question takes a request tasks/result delivered (its related-task
// _meta dropped).
func (u *upstreamRun) question(m jsonrpc.Message) (pendingInput, bool) {
	p, asks := u.b.taskQuestion(u.k.c, m, withoutRelatedTask(m.Params()))
	if asks {
		u.calls = 0
	}
	return p, asks
}

func (u *upstreamRun) callID() json.RawMessage { return u.up.ID }

// broke calls tasks/result again when its stream broke (a proxy's idle
// timeout, a restart of the connection): the task goes on upstream; its
// questions already asked stay answerable (by their request ids). After
// maxResultCalls in a row, the task fails.
func (u *upstreamRun) broke() taskStep {
	select {
	case <-u.t.stop:
		return stepLetGo
	default:
	}
	if u.calls < maxResultCalls {
		u.up.Close()
		return stepOn
	}
	u.fail(translate.UpstreamFailure("the upstream ended tasks/result without a result", u.up.Err()))
	return stepDone
}

// final records the end tasks/result gave: its error fails the task; its
// result completes it, unless the upstream's tasks/get says the task
// failed (the TypeScript SDK 1.x gives a failed task's stored result) or
// was cancelled.
func (u *upstreamRun) final(m jsonrpc.Message) {
	u.healthy = true
	res := translate.ResultOf(m.Raw)
	if res == nil {
		_, e := translate.ReshapeError(translate.ErrorOf(m.Raw))
		u.end(translate.TaskFailed, nil, e, "")
		return
	}
	res = withoutRelatedTask(res)
	status := translate.TaskCompleted
	if up, ok := u.k.upstreamGet(u.ctx); ok && (up.status == translate.TaskFailed || up.status == translate.TaskCancelled) {
		status = up.status
	}
	switch status {
	case translate.TaskFailed:
		msg := "the upstream's task failed"
		if text := gjson.GetBytes(res, "content.0.text"); text.Type == gjson.String && text.Str != "" {
			msg += ": " + jsonrpc.Clip(text.Str)
		}
		u.end(translate.TaskFailed, nil, taskErrorObject(msg), "")
	case translate.TaskCancelled:
		u.end(translate.TaskCancelled, nil, nil, "cancelled by the upstream")
	default:
		out, err := translate.ReshapeResult("tools/call", res, u.b.reshapeOptions(u.k.c))
		if err != nil {
			_, e := translate.MalformedUpstreamError()
			u.end(translate.TaskFailed, nil, e, "")
			u.healthy = false
			return
		}
		u.end(translate.TaskCompleted, out, nil, "")
	}
}

// end ends the task with status, and reports the call's end.
func (u *upstreamRun) end(status string, result, errObj []byte, note string) {
	t := u.t
	if !t.end(status, result, errObj) {
		return // cancelled meanwhile: the cancellation reported it
	}
	if note != "" {
		t.mu.Lock()
		t.note = note
		t.mu.Unlock()
	}
	outcome := translate.OutcomeComplete
	switch status {
	case translate.TaskFailed:
		outcome = translate.OutcomeError
	case translate.TaskCancelled:
		outcome = translate.OutcomeCancelled
	}
	u.b.report(u.k.c, outcome, "")
	u.b.taskEvent(u.k.c, "ended", status)
}

// fail fails the task on an upstream failure.
func (u *upstreamRun) fail(rerr *jsonrpc.RPCError) {
	if u.t.end(translate.TaskFailed, nil, taskErrorObject(rerr.Message)) {
		u.b.report(u.k.c, translate.OutcomeError, rerr.Detail())
		u.b.taskEvent(u.k.c, "ended", translate.TaskFailed)
	}
}

// letGo ends the task's hold on the upstream: its open questions are
// answered with a cancellation and, unless told already, the upstream is
// sent tasks/cancel.
func (u *upstreamRun) letGo(asked []pendingInput, why string) {
	t, c := u.t, u.k.c
	t.mu.Lock()
	told := u.k.told
	u.k.told = true
	t.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	for _, p := range asked {
		res, errObj := translate.CancelAnswer(p.Method)
		_ = c.sess.Respond(ctx, p.upstreamID, res, errObj)
	}
	if !told {
		cancelUpstreamTask(ctx, c.sess, u.k.upID)
	}
	cancel()
	t.mu.Lock()
	status := t.status // cancelled, or failed by tasks/update
	t.mu.Unlock()
	outcome := translate.OutcomeCancelled
	if status == translate.TaskFailed {
		outcome = translate.OutcomeError
	}
	u.b.report(c, outcome, why)
	u.b.taskEvent(c, "ended", status)
}

// done gives the session back to the pool.
func (u *upstreamRun) done() {
	if u.up != nil {
		u.up.Close()
	}
	u.b.pool.Release(u.k.c.key, u.k.c.sess, u.healthy)
	u.cancel()
}

// cancelUpstreamTask sends tasks/cancel for the upstream's task id on
// sess, and waits for the answer, whatever it is (the task, or an error
// for a task already ended).
func cancelUpstreamTask(ctx context.Context, sess *legacy.Session, id string) {
	call, err := sess.Call(ctx, "tasks/cancel", taskParams(id))
	if err != nil {
		return
	}
	defer call.Close()
	_, _ = call.Final()
}

// upstreamGet asks the upstream's tasks/get for the task.
func (k *upstreamKind) upstreamGet(ctx context.Context) (upstreamTask, bool) {
	ctx, cancel := context.WithTimeout(ctx, upstreamTaskTimeout)
	defer cancel()
	call, err := k.c.sess.Call(ctx, "tasks/get", taskParams(k.upID))
	if err != nil {
		return upstreamTask{}, false
	}
	defer call.Close()
	m, err := call.Final()
	if err != nil {
		return upstreamTask{}, false
	}
	u, ok := parseUpstreamTask(gjson.ParseBytes(translate.ResultOf(m.Raw)))
	if !ok || u.id != k.upID {
		return upstreamTask{}, false
	}
	return u, true
}

// cancel answers tasks/cancel: the upstream's tasks/cancel first (its
// answer, a task, becomes the empty ack), then the task is cancelled.
func (k *upstreamKind) cancel(b *Bridge, t *task) {
	t.mu.Lock()
	running := !translate.TaskTerminal(t.status)
	k.told = k.told || running
	t.mu.Unlock()
	if running {
		ctx, cancel := context.WithTimeout(b.ctx, upstreamTaskTimeout)
		cancelUpstreamTask(ctx, k.c.sess, k.upID)
		cancel()
		b.cancelTask(t, "tasks/cancel")
	}
}

// refresh brings a running task up to date with the upstream's tasks/get:
// its statusMessage and poll interval, and a cancellation of the
// upstream's own. The status shown stays working until the questions, or
// the result, are in hand (the runner sets them).
func (k *upstreamKind) refresh(ctx context.Context, b *Bridge, t *task) {
	t.mu.Lock()
	done := translate.TaskTerminal(t.status)
	t.mu.Unlock()
	if done {
		return
	}
	u, ok := k.upstreamGet(ctx)
	if !ok {
		return
	}
	if u.status == translate.TaskCancelled {
		t.mu.Lock()
		k.told = true // nothing to cancel upstream
		t.mu.Unlock()
		b.cancelTask(t, "cancelled by the upstream")
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if translate.TaskTerminal(t.status) {
		return
	}
	t.note = u.note
	if u.pollMs > 0 {
		t.pollMs = u.pollMs
	}
	if u.updated.After(t.updated) {
		t.updated = u.updated
	}
}
