package rest

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/tidwall/gjson"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/caddymodule/face"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/forward"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/seal"
)

// This file carries a REST call over to another instance when the one
// running it goes, as the gateway's tasks are.
//
// How: the call's internal tools/call is made as a task the gateway hosts
// (face.Internal.Task): in front of a legacy server the forward bridge
// makes it a task at once, whatever the task rules, and answers its taskId
// (a CreateTaskResult); the run then follows the task with tasks/get, posts
// the round's answers with tasks/update and cancels it with tasks/cancel,
// all through the gateway's own routing. The record keeps the taskId
// (seal.RESTCall.TaskID). The task machinery already does what carrying a
// call over needs: a record of each task in the fleet's storage, written on
// every transition with where the upstream call stands; a lease per
// instance; a tasks/get whose owner cannot be reached served from the
// record, and the task taken over once the owner's lease lapsed (or at
// once, by the owner's own instance id restarted, or after a graceful stop
// that handed it over), the call's stream reopened after the last event the
// upstream's event store kept — the tool never runs twice. So a REST call
// whose lease lapsed is not lost when its record names a task: the instance
// a client asks about it adopts it (adopt: under the record's lock, one
// adopter) and follows the task, whose tasks/get takes it over.
//
// Why this and not a takeover of the REST face's own: the resumable
// continuation (the upstream session, the call's request id, the last
// event handled, the questions seen) lives in the forward bridge's call,
// which the face never sees; tasks record and resume exactly that, with
// their lease, takeover, hand-over on stop and the tests that attack them.
// A REST takeover of its own would have to duplicate all of it inside the
// bridge. What following a task changes for the face:
//
//   - Questions asked mid-call are the task's (input_required, its
//     inputRequests), shown as before; the advance that answers the last of
//     a round posts them with tasks/update instead of retrying the call
//     with a requestState. The gateway answers roots itself as before.
//   - A graceful stop hands the call over: the run, stopped, writes the
//     record's lease lapsed now (outcome keeps it running; the gateway's
//     stop waits for that, as the run is tracked until its record is
//     written: runTable.end), and the bridge hands the task over (or
//     fails it, saying why, when the upstream cannot resume it): the next
//     GET on any instance adopts the call at once.
//   - A call on a modern upstream is passed through: the upstream holds
//     no stream the gateway could reopen, nothing is a task, and its record
//     says it was lost (errLost) when its instance goes, as before; so does
//     a call whose task could not be made (no task place left: it ran as a
//     plain call) or not yet recorded. A task in front of a legacy server
//     without an event store is taken over and fails with the task's own
//     error, which says the upstream call could not be resumed. A legacy
//     server that runs tasks itself (2025's experimental tasks) runs the
//     call as its own task, which no other instance takes over: the call
//     fails, saying its task was lost with its instance.
//   - The task bounds the call: it counts toward max_tasks while it runs,
//     and lives task_ttl (a call still running or waiting for answers
//     then is cancelled). Once the face has read its end, the task and its
//     record are forgotten (the REST record holds the outcome, and the
//     REST bounds on the storage hold; a task another instance took over
//     is kept until its ttl, and shows no progress): an instance that dies
//     between that read and the write of its REST record leaves a call
//     that reads failed, its task gone (lostTask), though the tool ran to
//     its end.
//   - Progress: the task keeps its call's last progress notification,
//     which tasks/get shows the face (forward.MetaProgress) and the run
//     writes into the record as before.

// Bounds of following a task.
const (
	// taskPollMin and taskPollMax bound the wait between two tasks/get of
	// a followed task: a short call is seen ending within milliseconds, a
	// long one is asked every taskPollMax.
	taskPollMin = time.Millisecond
	taskPollMax = 250 * time.Millisecond
	// taskTries bounds the tasks/get in a row that get no answer (the
	// gateway's storage unavailable, a relay failing) before the call
	// fails.
	taskTries = 40
)

// taskRef is the taskId a run follows ("" until the call is a task).
type taskRef struct {
	mu sync.Mutex
	id string
}

func (t *taskRef) get() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.id
}

func (t *taskRef) set(id string) {
	t.mu.Lock()
	t.id = id
	t.mu.Unlock()
}

// taskMeta is the _meta of the task requests: the face's, its
// clientCapabilities (which hide Meta's) declaring the Tasks extension.
type taskMeta struct {
	face.Meta
	ClientCapabilities taskCapabilities `json:"io.modelcontextprotocol/clientCapabilities"`
}

// taskCapabilities are the face's capabilities with the Tasks extension.
type taskCapabilities struct {
	face.Capabilities
	Extensions map[string]struct{} `json:"extensions"`
}

var tasksMeta = taskMeta{Meta: meta, ClientCapabilities: taskCapabilities{Extensions: map[string]struct{}{forward.ExtTasks: {}}}}

// taskParams are the params of tasks/get, tasks/update and tasks/cancel.
type taskParams struct {
	TaskID         string                     `json:"taskId"`
	InputResponses map[string]json.RawMessage `json:"inputResponses,omitempty"`
	Meta           taskMeta                   `json:"_meta"`
}

// taskRequest makes the task request method on the task id.
func (f *Face) taskRequest(ctx context.Context, r *http.Request, method, id string, answers map[string]json.RawMessage) (face.Answer, *face.Failure) {
	return face.Client{GW: f.gw}.Do(ctx, r, face.Internal{Method: method, Name: id,
		Params: taskParams{TaskID: id, InputResponses: answers, Meta: tasksMeta}})
}

// step makes one round of rec's call for the run: the tools/call (which
// the gateway may answer with a task, then followed), or, once the call
// is a task, its answers posted (if any) and the task followed to its
// next question or its end.
func (f *Face) step(ctx context.Context, r *http.Request, rec *seal.RESTCall, c face.ToolCall, run *running) (face.Answer, error) {
	id := run.task.get()
	switch {
	case id == "":
		a, err := f.toolCall(ctx, r, c, &run.progress)
		if err != nil || a.Result().Get("resultType").String() != "task" {
			return a, err
		}
		id = a.Result().Get("taskId").String()
		if id == "" || len(id) > seal.MaxRESTTask {
			return a, errors.New("the gateway's task for the call has no usable taskId")
		}
		run.task.set(id)
		rec.TaskID = id
	case len(c.Responses) > 0:
		if a, done, err := f.answerTask(ctx, r, id, c.Responses); done || err != nil {
			return a, err
		}
	}
	return f.follow(ctx, r, id, &run.progress)
}

// answerTask posts a round's answers to the task id (tasks/update). A
// refusal to wait (503: the task's owner is gone but still holds its
// lease, or the storage is unavailable) is tried again until the lease
// has lapsed twice over; another error ends the call (done).
func (f *Face) answerTask(ctx context.Context, r *http.Request, id string, answers map[string]json.RawMessage) (face.Answer, bool, error) {
	until := time.Now().Add(2*f.gw.Limits().Lease + storeTimeout)
	wait := taskPollMin
	for {
		a, fail := f.taskRequest(ctx, r, "tasks/update", id, answers)
		switch {
		case ctx.Err() != nil:
			return a, true, ctx.Err()
		case fail == nil && a.Status != http.StatusServiceUnavailable:
			_, failed := a.Error()
			return a, failed, nil
		case time.Now().After(until):
			if fail != nil {
				return a, true, fail
			}
			return a, true, nil
		}
		if !sleep(ctx, &wait) {
			return a, true, ctx.Err()
		}
	}
}

// follow asks tasks/get of the task id until it asks for input or ends,
// and returns that as the tools/call's answer would have said it; the
// call's progress, which tasks/get shows the face, goes to p.
func (f *Face) follow(ctx context.Context, r *http.Request, id string, p *progress) (face.Answer, error) {
	wait, misses := taskPollMin, 0
	for {
		a, fail := f.taskRequest(ctx, r, "tasks/get", id, nil)
		switch {
		case ctx.Err() != nil:
			return a, ctx.Err()
		case fail != nil || a.Status == http.StatusServiceUnavailable || a.Status == http.StatusGatewayTimeout:
			if misses++; misses >= taskTries {
				if fail != nil {
					return a, fail
				}
				return a, nil
			}
		default:
			if e, ok := a.Error(); ok {
				// The task is gone: its instance went, and no record of it
				// was kept (task_store off, or the storage is not shared),
				// or it expired.
				return answerOf(http.StatusOK, `{"error":`+lostTask(e)+`}`), nil
			}
			misses = 0
			if pg := a.Result().Get("_meta." + forward.MetaProgress); pg.IsObject() {
				p.set([]byte(pg.Raw))
			}
			if ans, ok := taskAnswer(a.Result()); ok {
				return ans, nil
			}
		}
		if !sleep(ctx, &wait) {
			return a, ctx.Err()
		}
	}
}

// taskAnswer is the answer a task's state stands for, or false while it
// works.
func taskAnswer(t gjson.Result) (face.Answer, bool) {
	switch t.Get("status").String() {
	case "completed":
		return answerOf(http.StatusOK, `{"result":`+t.Get("result").Raw+`}`), true
	case "failed":
		if e := t.Get("error"); e.IsObject() {
			return answerOf(http.StatusOK, `{"error":`+e.Raw+`}`), true
		}
		return answerOf(http.StatusOK, `{"error":`+errorObject("the tool call failed: "+t.Get("statusMessage").String())+`}`), true
	case "cancelled":
		return answerOf(http.StatusOK, `{"error":`+errorObject("the gateway's task running the call was cancelled: "+t.Get("statusMessage").String())+`}`), true
	case "input_required":
		if reqs := t.Get("inputRequests"); reqs.IsObject() {
			return answerOf(http.StatusOK, `{"result":{"resultType":"input_required","inputRequests":`+reqs.Raw+`}}`), true
		}
	}
	return face.Answer{}, false
}

// answerOf is an answer of status whose JSON-RPC response is resp.
func answerOf(status int, resp string) face.Answer {
	return face.Answer{Status: status, Response: gjson.Parse(resp)}
}

// errorObject is a JSON-RPC error object (-32603) saying message.
func errorObject(message string) string {
	b, _ := json.Marshal(callError{Code: -32603, Message: message})
	return string(b)
}

// lostTask is the error of a call whose task is gone (e, tasks/get's
// error, for the log-minded: its message).
func lostTask(e gjson.Result) string {
	return errorObject("the gateway instance running the call was lost, and its task with it (" + e.Get("message").String() + "): start the call again")
}

// sleep waits *wait (then doubled, up to taskPollMax), or until ctx ends:
// it reports whether it waited.
func sleep(ctx context.Context, wait *time.Duration) bool {
	t := time.NewTimer(*wait)
	defer t.Stop()
	*wait = min(2**wait, taskPollMax)
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// cancelTask cancels the task id (tasks/cancel), in the background of a
// cancelled call: the upstream call is abandoned.
func (f *Face) cancelTask(r *http.Request, id string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), dismissTimeout)
	defer cancel()
	_, _ = f.taskRequest(ctx, r, "tasks/cancel", id, nil)
}

// orphaned reports whether c is a running call that names a task and that
// no instance runs any more: its owner's lease lapsed (it died, or stopped
// and handed the call over), or its owner is this instance id, which does
// not run it (a restart).
func (f *Face) orphaned(key string, c seal.RESTCall, now time.Time) bool {
	if c.Status != statusRunning || c.TaskID == "" {
		return false
	}
	if c.Owner == f.gw.Instance() {
		return !runs.has(key)
	}
	return c.Lease != 0 && now.After(c.LeaseUntil())
}

// adopt makes this instance run the orphaned call at key (one adopter,
// under the record's lock), following its task on r's behalf (r's
// principal is the call's), and returns the record as it is now.
func (f *Face) adopt(r *http.Request, key string, c seal.RESTCall) (seal.RESTCall, error) {
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(r.Context()))
	run := &running{princ: c.Principal, cancel: cancel}
	var pending <-chan seal.RESTCall
	adopted := false
	err := f.withLock(r.Context(), key, func(sctx context.Context) error {
		now := time.Now()
		cur, err := f.load(sctx, key, c.Principal, now)
		if err != nil || !f.orphaned(key, cur, now) {
			c = cur
			return err
		}
		rec, p, err := f.start(ctx, r, key, cur, face.ToolCall{Name: cur.Tool}, run, now)
		if err != nil {
			c = cur
			return err
		}
		c, pending, adopted = rec, p, true
		return f.save(sctx, key, c)
	})
	switch {
	case !adopted:
		cancel(nil)
		if errors.Is(err, errBusy) {
			err = nil // left for later: running still
		}
	case pending == nil:
		runs.end(key, run)
	case err != nil:
		stopStarted(key, run, pending)
	default:
		go f.continueRun(key, c.ETag, pending, run, make(chan seal.RESTCall, 1))
	}
	return c, err
}

// has reports whether the call of key runs here.
func (t *runTable) has(key string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.runs[key] != nil
}
