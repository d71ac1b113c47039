package forward

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"sync"
	"time"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/legacy"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/legacy/seal"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
)

// Gateway-hosted tasks (the Tasks extension, io.modelcontextprotocol/tasks,
// SEP-2663) for legacy tools. A legacy server knows nothing of tasks; the
// bridge holds its call open instead, for as long as the task lives:
//
//	tools/call, the tool's rule optional or required (task_policy.go) and
//	the request declaring the extension: start, then run (run.go)
//	holds the call up to the rule's window
//	  |  the result within the window: plain (optional), or a task
//	  |  already completed (required)
//	  |  a question within the window: an ordinary input_required round
//	  |  (park); the retry runs the call again, with the window again
//	  v  the window passed: becomeTask answers a CreateTaskResult
//	WORKING / INPUT_REQUIRED: runTask (this file) owns the call and reads
//	  |  the upstream's answer; its questions become the task's
//	  |  inputRequests (after TaskGather, so that siblings asked at once
//	  |  show together); tasks/update posts answers upstream
//	  v  (task_serve.go)
//	COMPLETED (a result, isError included) / FAILED (a JSON-RPC error, or
//	the upstream ended the call) / CANCELLED (tasks/cancel, the task's
//	ttl, the gateway stopping: terminal at once, then runTask abandons the
//	call: its questions answered with a cancellation, notifications/
//	cancelled upstream). A terminal state never changes.
//
// A task's record (and its result) lives TTL from its creation; a task
// still running then is cancelled. Its taskId is sealed (seal.Task): it
// names the owner instance, for a fleet's relay, and the principal, who
// alone sees it.

// TaskOptions configure the tasks the forward bridge hosts.
type TaskOptions struct {
	// Policy says which tools' calls may become tasks.
	Policy TaskPolicy
	// TTL is how long a task's record lives from its creation (ttlMs); a
	// task still running then is cancelled.
	TTL time.Duration
	// PollInterval is the pollIntervalMs suggested to clients (0: none).
	PollInterval time.Duration
	// MaxTasks bounds the tasks running with these options (and the
	// calls that may become tasks): a call that may become a task is
	// refused (503, -32603) before it is sent when there is no room. A
	// terminal task gives its place back at once (task_place.go); its
	// record, readable until its TTL, does not count.
	MaxTasks int
	// MaxTasksPerPrincipal bounds, within MaxTasks, those of one
	// principal (429, -32603).
	MaxTasksPerPrincipal int
}

// Defaults of TaskOptions.
const (
	defaultTaskWindow       = time.Second
	defaultTaskTTL          = time.Hour
	defaultTaskPollInterval = time.Second
	// TaskGather is how long a task that got a question waits for sibling
	// questions before it shows input_required: a client polling then sees
	// them all at once.
	TaskGather = 50 * time.Millisecond
)

// OutcomeTask is the outcome of a request answered with a CreateTaskResult
// (Served.Outcome); the call's own end is reported when the task ends.
const OutcomeTask = "task"

// task is one gateway-hosted task.
type task struct {
	id       string
	handle   [16]byte
	princ    [16]byte
	tool     string      // the tool's name, for operators
	upstream string      // the upstream's URL, for operators
	opts     *Options    // of the call's first request: limits, TTL
	timer    *time.Timer // TTL
	stop     chan struct{}

	taskState                 // mu guards it and sess
	sess      *legacy.Session // where tasks/update posts answers
	stopOnce  sync.Once
}

// taskSet counts the tasks of one options set.
type taskSet = parkSet

// taskRoom returns the refusal of a new task of princ with o, or nil, and
// takes the place when there is room.
func (b *Bridge) takeTaskPlace(o *Options, princ [16]byte) *translate.RPCError {
	b.tmu.Lock()
	defer b.tmu.Unlock()
	set := b.taskSets[o]
	if set == nil {
		set = &taskSet{byPrin: make(map[[16]byte]int)}
		b.taskSets[o] = set
	}
	switch {
	case set.byPrin[princ] >= o.Tasks.MaxTasksPerPrincipal:
		return &translate.RPCError{HTTPStatus: http.StatusTooManyRequests, Code: translate.InternalError,
			Message: "too many running tasks of this principal (max_tasks_per_principal); the call was not sent: retry when one of its tasks ends (completed, failed, or cancelled with tasks/cancel)"}
	case set.held >= o.Tasks.MaxTasks:
		return &translate.RPCError{HTTPStatus: http.StatusServiceUnavailable, Code: translate.InternalError,
			Message: "the gateway runs too many tasks (max_tasks); the call was not sent: retry when a task ends"}
	}
	set.held++
	set.byPrin[princ]++
	return nil
}

// releaseTaskPlace frees a place taken by takeTaskPlace.
func (b *Bridge) releaseTaskPlace(o *Options, princ [16]byte) {
	b.tmu.Lock()
	defer b.tmu.Unlock()
	set := b.taskSets[o]
	if set == nil {
		return
	}
	set.held--
	if n := set.byPrin[princ] - 1; n > 0 {
		set.byPrin[princ] = n
	} else {
		delete(set.byPrin, princ)
	}
	if set.held <= 0 {
		delete(b.taskSets, o)
	}
}

// Tasks returns how many tasks the bridge holds, by status.
func (b *Bridge) Tasks() map[string]int {
	b.tmu.Lock()
	all := make([]*task, 0, len(b.tasks))
	for _, t := range b.tasks {
		all = append(all, t)
	}
	all25 := make([]*task2025, 0, len(b.tasks25))
	for _, t := range b.tasks25 {
		all25 = append(all25, t)
	}
	b.tmu.Unlock()
	out := map[string]int{}
	for _, t := range all {
		t.mu.Lock()
		out[t.status]++
		t.mu.Unlock()
	}
	for _, t := range all25 {
		t.mu.Lock()
		out[t.status]++
		t.mu.Unlock()
	}
	return out
}

// newTask makes c's task, with status, and puts it in the table: from now
// on a tasks/get resolves it. The place c took at start moves to the task.
func (b *Bridge) newTask(c *call, r Request, status string) *task {
	o := c.opts
	now := time.Now()
	t := &task{opts: o, princ: c.princ, tool: c.name, upstream: c.key.Upstream, stop: make(chan struct{}),
		taskState: taskState{status: status, created: now, updated: now, place: b.newTaskPlace(o, c.princ)}, sess: c.sess}
	_, _ = rand.Read(t.handle[:])
	sealer := r.Options
	t.id = seal.SealTask(sealer.Keyring, seal.Task{Instance: sealer.Instance, Address: sealer.Address, Handle: t.handle, Principal: c.princ})
	c.taskPlaced = false // the task holds it now
	b.tmu.Lock()
	b.tasks[t.handle] = t
	b.tmu.Unlock()
	if translate.TaskTerminal(status) {
		t.place.free() // made ended (completedTask): its record only
	}
	t.timer = time.AfterFunc(o.Tasks.TTL, func() { b.expireTask(t) })
	b.taskEvent(c, "created", status)
	return t
}

// expireTask removes t at the end of its TTL, cancelling it if it still
// runs.
func (b *Bridge) expireTask(t *task) {
	b.cancelTask(t, "the task's ttl passed")
	b.tmu.Lock()
	delete(b.tasks, t.handle)
	b.tmu.Unlock()
	t.place.free()
}

// cancelTask makes t cancelled, unless it already ended, gives its place
// back and tells runTask to abandon its call. It reports whether t was
// running.
func (b *Bridge) cancelTask(t *task, why string) bool {
	t.mu.Lock()
	running := !translate.TaskTerminal(t.status)
	if running {
		t.status, t.updated, t.note = translate.TaskCancelled, time.Now(), why
	}
	t.mu.Unlock()
	if running {
		t.place.free()
		t.stopOnce.Do(func() { close(t.stop) })
	}
	return running
}

// becomeTask turns c, held past its window, into a task: the client gets
// a CreateTaskResult, and runTask goes on with the call.
func (b *Bridge) becomeTask(c *call, r Request, sink translate.Sink) string {
	c.caps = r.ClientCapabilities // the questions from now on are the task's client's
	t := b.newTask(c, r, translate.TaskWorking)
	_ = sink.Respond(http.StatusOK, translate.ResultResponse(r.ID, t.envelope("task", false)))
	b.taskRuns.Add(1)
	go func() {
		defer b.taskRuns.Done()
		b.runTask(t, c)
	}()
	return OutcomeTask
}

// completedTask answers a required tool's call that ended within its
// window with a task already terminal, holding the result.
func (b *Bridge) completedTask(c *call, r Request, m legacy.Message, sink translate.Sink) string {
	status, result, errObj := b.taskEnding(c, r.Method, m)
	t := b.newTask(c, r, status)
	t.mu.Lock()
	t.result, t.errObj = result, errObj
	t.mu.Unlock()
	_ = sink.Respond(http.StatusOK, translate.ResultResponse(r.ID, t.envelope("task", false)))
	b.taskEvent(c, "ended", status) // created terminal: it ends at once
	return OutcomeTask
}

// taskEnding turns the upstream's final message into a task's end.
func (b *Bridge) taskEnding(c *call, method string, m legacy.Message) (status string, result, errObj []byte) {
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

// runTask reads c's upstream answer for t until the call ends or t is
// cancelled; it alone touches c from the task's creation on.
func (b *Bridge) runTask(t *task, c *call) {
	var gather <-chan time.Time
	var fresh []pendingInput // asked, not yet shown
	msgs := c.up.Messages()
	abandon := func(reason string) {
		t.mu.Lock()
		c.pending = append(append([]pendingInput(nil), t.inputs...), fresh...)
		status := t.status // cancelled, or failed (tasks/update)
		t.mu.Unlock()
		b.abandon(c, translate.OutcomeCancelled, reason)
		b.taskEvent(c, "ended", status)
	}
	for {
		var m legacy.Message
		ok, inbox := true, false
		if len(c.held) > 0 {
			m, c.held = c.held[0], c.held[1:]
		} else {
			select {
			case m, ok = <-msgs:
			case m = <-c.sess.Inbox():
				inbox = true
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
				abandon("task cancelled")
				return
			case <-b.ctx.Done():
				b.cancelTask(t, "gateway shutting down")
				abandon("gateway shutting down")
				return
			}
		}
		switch {
		case !ok:
			rerr := translate.UpstreamFailure("the upstream ended the call without a result", c.up.Err())
			e, _ := json.Marshal(map[string]any{"code": translate.InternalError, "message": rerr.Message})
			b.finish(c, false)
			t.end(translate.TaskFailed, nil, e)
			b.report(c, translate.OutcomeError, rerr.Detail())
			b.taskEvent(c, "ended", translate.TaskFailed)
			return
		case m.Kind == legacy.KindRequest:
			if p, asks := b.taskQuestion(c, t, m); asks {
				fresh = append(fresh, p)
				if len(t.inputs)+len(fresh) > c.opts.MaxInputsPerRound*c.opts.MaxRounds {
					b.cancelTask(t, "too many requests for input")
					abandon("too many requests for input")
					return
				}
				if gather == nil {
					gather = time.After(TaskGather)
				}
			}
		case inbox:
		case m.Kind == legacy.KindResponse && string(m.ID) == string(c.up.ID):
			b.finish(c, true)
			status, result, errObj := b.taskEnding(c, "tools/call", m)
			t.end(status, result, errObj)
			outcome := translate.OutcomeComplete
			if status == translate.TaskFailed {
				outcome = translate.OutcomeError
			}
			b.report(c, outcome, "")
			b.taskEvent(c, "ended", status)
			return
		}
	}
}

// taskQuestion handles a request the upstream made during a task, as
// upstreamRequest does for a running call. It returns the question when it
// waits for the client.
func (b *Bridge) taskQuestion(c *call, t *task, m legacy.Message) (pendingInput, bool) {
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	params := m.Params()
	switch {
	case m.Method == "ping":
		_ = c.sess.Respond(ctx, m.ID, []byte("{}"), nil)
		return pendingInput{}, false
	case !translate.IsInputMethod(m.Method):
		_ = c.sess.Respond(ctx, m.ID, nil, []byte(`{"code":-32601,"message":"Method not found"}`))
		return pendingInput{}, false
	case !translate.ClientSupports(c.caps, m.Method, params):
		res, errObj := translate.CancelAnswer(m.Method)
		_ = c.sess.Respond(ctx, m.ID, res, errObj)
		return pendingInput{}, false
	}
	ir, err := translate.NewInputRequest(m.Method, params, &c.keys)
	if err != nil {
		res, errObj := translate.CancelAnswer(m.Method)
		_ = c.sess.Respond(ctx, m.ID, res, errObj)
		return pendingInput{}, false
	}
	return pendingInput{InputRequest: ir, upstreamID: m.ID}, true
}

// envelope is t as a CreateTaskResult or a DetailedTask (taskState's).
func (t *task) envelope(resultType string, detailed bool) []byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.taskState.envelope(t.id, resultType, t.opts.Tasks.TTL, t.opts.Tasks.PollInterval.Milliseconds(), detailed)
}

// mayBecomeTask decides, before a tools/call starts, whether its call may
// become a task: the tool's rule is optional or required and the request
// declares the Tasks extension (a task place is then taken, which the
// caller frees if the call does not start). A required tool's request
// that does not declare it is refused with -32021.
func (b *Bridge) mayBecomeTask(r Request) (*TaskRule, *translate.RPCError) {
	if r.Method != "tools/call" {
		return nil, nil
	}
	rule := b.support.taskRule(&r.Options.Tasks.Policy, r.Upstream, r.Principal, r.Name)
	declared := DeclaresTasks(r.ClientCapabilities)
	switch {
	case rule.Mode == TaskForbidden:
		return nil, nil
	case !declared && rule.Mode == TaskRequired:
		return nil, &translate.RPCError{HTTPStatus: http.StatusBadRequest, Code: translate.MissingRequiredClientCapability,
			Message: "Missing required client capability: tool " + translate.Clip(r.Name) + " runs as a task, which needs the Tasks extension (" + ExtTasks + ")",
			Data:    requiredTasksData}
	case !declared:
		return nil, nil
	}
	if rerr := b.takeTaskPlace(r.Options, r.Principal); rerr != nil {
		return nil, rerr
	}
	return &rule, nil
}

// withTasksExtension adds the Tasks extension to a discover result's
// capabilities.extensions.
func withTasksExtension(res []byte) ([]byte, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(res, &top); err != nil {
		return nil, err
	}
	var caps map[string]json.RawMessage
	if err := json.Unmarshal(top["capabilities"], &caps); err != nil || caps == nil {
		caps = map[string]json.RawMessage{}
	}
	var ext map[string]json.RawMessage
	if err := json.Unmarshal(caps["extensions"], &ext); err != nil || ext == nil {
		ext = map[string]json.RawMessage{}
	}
	ext[ExtTasks] = json.RawMessage(`{}`)
	caps["extensions"], _ = json.Marshal(ext)
	top["capabilities"], _ = json.Marshal(caps)
	return json.Marshal(top)
}

// TaskObserver is implemented by an Observer that wants to learn of tasks:
// created (with their first status) and ended (with their last).
type TaskObserver interface {
	TaskChanged(TaskReport)
}

// TaskReport describes a task event. It carries no principal or taskId.
type TaskReport struct {
	Upstream string
	Tool     string
	// Event is "created" or "ended".
	Event string
	// Status is the task's status after the event.
	Status string
	// Age is the time since the call's first request.
	Age time.Duration
}

// taskEvent tells c's observer, if it observes tasks.
func (b *Bridge) taskEvent(c *call, event, status string) {
	if obs, ok := c.opts.Observer.(TaskObserver); ok {
		obs.TaskChanged(TaskReport{Upstream: c.key.Upstream, Tool: c.name, Event: event, Status: status, Age: time.Since(c.started)})
	}
}
