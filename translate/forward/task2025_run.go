package forward

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/tidwall/gjson"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/legacy"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
)

// The life of an upstream's task after its creation (task2025.go):
// run2025 holds the upstream's tasks/result, and the client's tasks/get,
// tasks/update and tasks/cancel are answered from the task and the
// upstream's own tasks/get and tasks/cancel.

// upstreamTaskTimeout bounds one tasks/get or tasks/cancel upstream.
const upstreamTaskTimeout = 10 * time.Second

// maxResultCalls bounds the tasks/result calls in a row whose stream ends
// without the result or a new question: the task then fails.
const maxResultCalls = 3

// run2025 calls tasks/result on t's session and reads it until the result,
// an error, or t's stop (calling it again when its stream ends first, up to
// maxResultCalls in a row): the questions it delivers in-line become t's
// inputRequests (after TaskGather, so that siblings show together). At the
// end the session goes back to the pool.
func (b *Bridge) run2025(t *task2025) {
	defer b.taskRuns.Done()
	c := t.c
	// t's stop ends the upstream requests too: tasks/result may not even
	// have its headers yet (some servers send them with the first message).
	ctx, cancel := context.WithCancel(b.ctx)
	defer cancel()
	go func() {
		select {
		case <-t.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	healthy := false
	defer func() { b.pool.Release(c.key, c.sess, healthy) }()

	var fresh []pendingInput // asked, not yet shown
	let := func(why string) {
		t.mu.Lock()
		asked := append(append([]pendingInput(nil), t.inputs...), fresh...)
		told := t.cancelled
		t.cancelled = true
		t.mu.Unlock()
		b.letGo2025(t, asked, !told, why)
		t.mu.Lock()
		status := t.status // cancelled, or failed by update2025
		t.mu.Unlock()
		outcome := translate.OutcomeCancelled
		if status == translate.TaskFailed {
			outcome = translate.OutcomeError
		}
		b.report(c, outcome, why)
		b.taskEvent(c, "ended", status)
	}
	var up *legacy.Call
	defer func() {
		if up != nil {
			up.Close()
		}
	}()
	var gather <-chan time.Time
	calls := 0 // tasks/result calls since the last question
follow:
	for {
		calls++
		var err error
		if up, err = c.sess.Call(ctx, "tasks/result", taskParams(t.upID)); err != nil {
			select {
			case <-t.stop:
				let("task cancelled")
			default:
				b.fail2025(t, translate.UpstreamFailure("the upstream refused tasks/result", err))
			}
			return
		}
		msgs := up.Messages()
		for {
			var m legacy.Message
			ok := true
			select {
			case m, ok = <-msgs:
			case <-c.sess.Inbox():
				continue
			case <-gather:
				gather = nil
				t.mu.Lock()
				if !translate.TaskTerminal(t.status) {
					t.inputs = append(t.inputs, fresh...)
					t.status, t.updated = translate.TaskInputRequired, time.Now()
					fresh = nil
				}
				t.mu.Unlock()
				continue
			case <-t.stop:
				let("task cancelled")
				return
			case <-b.ctx.Done():
				b.stop2025(t, "gateway shutting down")
				let("gateway shutting down")
				return
			}
			switch {
			case !ok:
				select {
				case <-t.stop:
					let("task cancelled")
					return
				default:
				}
				if calls < maxResultCalls {
					// The stream broke (a proxy's idle timeout, a
					// restart of the connection): the task goes on
					// upstream; its questions already asked stay
					// answerable (by their request ids).
					up.Close()
					continue follow
				}
				b.fail2025(t, translate.UpstreamFailure("the upstream ended tasks/result without a result", up.Err()))
				return
			case m.Kind == legacy.KindRequest:
				p, asks := b.question2025(t, m)
				if !asks {
					continue
				}
				calls = 0
				fresh = append(fresh, p)
				t.mu.Lock()
				n := len(t.inputs) + len(fresh)
				t.mu.Unlock()
				if n > c.opts.MaxInputsPerRound*c.opts.MaxRounds {
					b.stop2025(t, "too many requests for input")
					let("too many requests for input")
					return
				}
				if gather == nil {
					gather = time.After(TaskGather)
				}
			case m.Kind == legacy.KindResponse && string(m.ID) == string(up.ID):
				healthy = b.ended2025(ctx, t, m)
				return
			}
		}
	}
}

// question2025 takes a request the upstream delivered on tasks/result: an
// input request the client can answer is returned as a question (its
// related-task _meta dropped); others are answered at once.
func (b *Bridge) question2025(t *task2025, m legacy.Message) (pendingInput, bool) {
	c := t.c
	params := withoutRelatedTask(m.Params())
	if m.Method == "ping" || !translate.IsInputMethod(m.Method) || !translate.ClientSupports(c.caps, m.Method, params) {
		answerAside(b.ctx, c.sess, m)
		return pendingInput{}, false
	}
	ir, err := translate.NewInputRequest(m.Method, params, &c.keys)
	if err != nil {
		answerAside(b.ctx, c.sess, m)
		return pendingInput{}, false
	}
	return pendingInput{InputRequest: ir, upstreamID: m.ID}, true
}

// ended2025 records the end tasks/result gave: its error fails the task;
// its result completes it, unless the upstream's tasks/get says the task
// failed (the TypeScript SDK 1.x gives a failed task's stored result) or
// was cancelled. It reports whether the session is fit for reuse.
func (b *Bridge) ended2025(ctx context.Context, t *task2025, m legacy.Message) bool {
	c := t.c
	res := translate.ResultOf(m.Raw)
	if res == nil {
		_, e := translate.ReshapeError(translate.ErrorOf(m.Raw))
		b.close2025(t, translate.TaskFailed, nil, e, "")
		return true
	}
	res = withoutRelatedTask(res)
	status := translate.TaskCompleted
	if u, ok := b.getUpstream2025(ctx, t); ok && (u.status == translate.TaskFailed || u.status == translate.TaskCancelled) {
		status = u.status
	}
	switch status {
	case translate.TaskFailed:
		msg := "the upstream's task failed"
		if text := gjson.GetBytes(res, "content.0.text"); text.Type == gjson.String && text.Str != "" {
			msg += ": " + translate.Clip(text.Str)
		}
		e, _ := json.Marshal(map[string]any{"code": translate.InternalError, "message": msg})
		b.close2025(t, translate.TaskFailed, nil, e, "")
	case translate.TaskCancelled:
		b.close2025(t, translate.TaskCancelled, nil, nil, "cancelled by the upstream")
	default:
		out, err := translate.ReshapeResult("tools/call", res, b.reshapeOptions(c))
		if err != nil {
			_, e := translate.MalformedUpstreamError()
			b.close2025(t, translate.TaskFailed, nil, e, "")
			return false
		}
		b.close2025(t, translate.TaskCompleted, out, nil, "")
	}
	return true
}

// close2025 ends t with status, and reports the call's end.
func (b *Bridge) close2025(t *task2025, status string, result, errObj []byte, note string) {
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
	b.report(t.c, outcome, "")
	b.taskEvent(t.c, "ended", status)
}

// fail2025 fails t on an upstream failure.
func (b *Bridge) fail2025(t *task2025, rerr *translate.RPCError) {
	e, _ := json.Marshal(map[string]any{"code": translate.InternalError, "message": rerr.Message})
	if t.end(translate.TaskFailed, nil, e) {
		b.report(t.c, translate.OutcomeError, rerr.Detail())
		b.taskEvent(t.c, "ended", translate.TaskFailed)
	}
}

// letGo2025 ends t's hold on the upstream: its open questions are answered
// with a cancellation and, unless told already, the upstream is sent
// tasks/cancel.
func (b *Bridge) letGo2025(t *task2025, asked []pendingInput, tell bool, why string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	sess := t.c.sess
	for _, p := range asked {
		res, errObj := translate.CancelAnswer(p.Method)
		_ = sess.Respond(ctx, p.upstreamID, res, errObj)
	}
	if tell {
		b.cancelUpstream2025(ctx, t)
	}
}

// cancelUpstream2025 sends tasks/cancel for t upstream; the answer (the
// task, or an error for a task already ended) does not matter.
func (b *Bridge) cancelUpstream2025(ctx context.Context, t *task2025) {
	cancelUpstreamTask(ctx, t.c.sess, t.upID)
}

// cancelUpstreamTask sends tasks/cancel for the upstream's task id on
// sess, and waits for the answer, whatever it is.
func cancelUpstreamTask(ctx context.Context, sess *legacy.Session, id string) {
	call, err := sess.Call(ctx, "tasks/cancel", taskParams(id))
	if err != nil {
		return
	}
	defer call.Close()
	_, _ = call.Final()
}

// getUpstream2025 asks the upstream's tasks/get for t.
func (b *Bridge) getUpstream2025(ctx context.Context, t *task2025) (upstreamTask, bool) {
	ctx, cancel := context.WithTimeout(ctx, upstreamTaskTimeout)
	defer cancel()
	call, err := t.c.sess.Call(ctx, "tasks/get", taskParams(t.upID))
	if err != nil {
		return upstreamTask{}, false
	}
	defer call.Close()
	m, err := call.Final()
	if err != nil {
		return upstreamTask{}, false
	}
	u, ok := parseUpstreamTask(gjson.ParseBytes(translate.ResultOf(m.Raw)))
	if !ok || u.id != t.upID {
		return upstreamTask{}, false
	}
	return u, true
}

// serveTask2025 answers tasks/get, tasks/update and tasks/cancel for an
// upstream's task.
func (b *Bridge) serveTask2025(ctx context.Context, r Request, params []byte, t *task2025, sink translate.Sink) translate.Served {
	switch r.Method {
	case "tasks/get":
		b.refresh2025(ctx, t)
		_ = sink.Respond(http.StatusOK, translate.ResultResponse(r.ID, t.envelope("complete", true)))
	case "tasks/update":
		if rerr := b.update2025(t, translate.InputResponses(params)); rerr != nil {
			_ = sink.Respond(rerr.HTTPStatus, translate.ErrorResponse(r.ID, rerr))
			return translate.Served{Outcome: translate.OutcomeError}
		}
		_ = sink.Respond(http.StatusOK, translate.ResultResponse(r.ID, []byte(`{"resultType":"complete"}`)))
	default: // tasks/cancel: the upstream's answer (a task) becomes the empty ack
		t.mu.Lock()
		running := !translate.TaskTerminal(t.status)
		t.cancelled = t.cancelled || running
		t.mu.Unlock()
		if running {
			cctx, cancel := context.WithTimeout(b.ctx, upstreamTaskTimeout)
			b.cancelUpstream2025(cctx, t)
			cancel()
			b.stop2025(t, "tasks/cancel")
		}
		_ = sink.Respond(http.StatusOK, translate.ResultResponse(r.ID, []byte(`{"resultType":"complete"}`)))
	}
	return translate.Served{Outcome: translate.OutcomeComplete}
}

// refresh2025 brings a running t up to date with the upstream's tasks/get:
// its statusMessage and poll interval, and a cancellation of the
// upstream's own. The status shown stays working until the questions, or
// the result, are in hand (run2025 sets them).
func (b *Bridge) refresh2025(ctx context.Context, t *task2025) {
	t.mu.Lock()
	done := translate.TaskTerminal(t.status)
	t.mu.Unlock()
	if done {
		return
	}
	u, ok := b.getUpstream2025(ctx, t)
	if !ok {
		return
	}
	if u.status == translate.TaskCancelled {
		t.mu.Lock()
		t.cancelled = true // nothing to cancel upstream
		t.mu.Unlock()
		b.stop2025(t, "cancelled by the upstream")
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

// update2025 posts the answers to t's questions upstream, as JSON-RPC
// responses to the requests tasks/result delivered; as updateTask
// (task_serve.go) does for the gateway's own tasks.
func (b *Bridge) update2025(t *task2025, answers map[string]json.RawMessage) *translate.RPCError {
	t.mu.Lock()
	took := t.takeAnswers(answers)
	t.mu.Unlock()
	return b.postAnswers(&t.taskState, t.c.sess, took, func() {
		t.stopped.Do(func() { close(t.stop) }) // run2025 lets the upstream's task go
	})
}
