package forward

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tidwall/gjson"
	"go.opentelemetry.io/otel/trace"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/legacy"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/seal"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/traces"
)

// Gateway-hosted tasks (the Tasks extension, io.modelcontextprotocol/tasks,
// SEP-2663) for legacy tools. A legacy server knows nothing of tasks; the
// bridge holds its call open instead, for as long as the task lives (a
// server with the 2025 experimental tasks runs the task itself instead:
// task_upstream.go; both kinds share the table, the expiry, the
// cancellation, the lookup and the runner, see task below):
//
//	tools/call, the tool's rule optional or required (task_policy.go) and
//	the request declaring the extension, or a face's call the gateway
//	hosts (Request.HostTask: a task at once): start, then run (run.go)
//	holds the call up to the rule's window
//	  |  the result within the window: plain (optional), or a task
//	  |  already completed (required)
//	  |  a question within the window: an ordinary input_required round
//	  |  (park); the retry runs the call again, with the window again
//	  v  the window passed: becomeTask answers a CreateTaskResult
//	WORKING / INPUT_REQUIRED: the runner (runTask in task_run.go, with
//	  |  hostedRun in task_hosted.go) owns the call and reads
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
	// Store, if set, keeps a record of each task the gateway hosts, sealed
	// with the Keyring, in storage the fleet shares (task_store.go): any
	// instance answers tasks/get from it when the task's owner is gone,
	// and takes the task over once the owner's lease lapsed. Nil: tasks
	// live in their instance's memory only.
	Store Storage
	// Lease is how long an instance's claim on the tasks it runs lasts
	// without renewal (it renews every third of it); 0: DefaultTaskLease.
	Lease time.Duration
	// MaxResult bounds a task's result (or error) in bytes, with or without
	// Store: a larger one fails the task with an error that says so;
	// 0: DefaultMaxTaskResult.
	MaxResult int
	// ListenPoll is how often a listen stream following a task another
	// instance holds reads its record in Store (task_push.go); 0:
	// DefaultListenPoll.
	ListenPoll time.Duration
	// MaxListenTaskIDs bounds the taskIds one listen stream follows (the
	// first ones named); 0: DefaultMaxListenTaskIDs.
	MaxListenTaskIDs int
	// MaxTaskListenersPerPrincipal bounds the listen streams following
	// tasks that one principal holds open on this instance (429, -32603
	// beyond); 0: DefaultMaxTaskListeners.
	MaxTaskListenersPerPrincipal int
}

// Defaults of TaskOptions' Store settings.
const (
	DefaultTaskLease     = 15 * time.Second
	DefaultMaxTaskResult = 4 << 20
)

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

// task is one task the bridge holds, of either kind: the gateway's own,
// which holds a legacy tools/call open itself (hostedKind, task_hosted.go),
// or a 2025 upstream's, which runs the task itself (upstreamKind,
// task_upstream.go). Both kinds live in one table (Bridge.tasks), expire,
// are cancelled, looked up and listed the same way (this file,
// task_serve.go, task_snapshot.go), and one runner loop (runTask,
// task_run.go) follows the upstream for either. What differs is the
// kind's: taskKind for the record, taskRunner for the runner.
type task struct {
	id       string
	handle   [16]byte
	princ    [16]byte
	tool     string          // the tool's name, for operators
	upstream string          // the upstream's URL, for operators
	born     time.Time       // when the gateway made it: its ttl runs from here
	ttl      time.Duration   // how long its record lives
	sess     *legacy.Session // where tasks/update posts answers
	kind     taskKind
	timer    *time.Timer   // ttl
	stop     chan struct{} // closed (stopOnce) to end the runner's hold
	stopOnce sync.Once

	taskState       // mu guards it, pollMs, resume, run and the kind's own state
	pollMs    int64 // the pollIntervalMs shown (0: none)

	// first names the span of the call that made the task (zero for
	// none), sealed in its taskId and record; run is the span of its run
	// on this instance (nil without tracing, or once ended), runShown the
	// status of run's last event (task_trace.go).
	first    traces.Ref
	run      trace.Span
	runShown string

	// opts are those of the request that made it; with a task store
	// (TaskOptions.Store) its record is written on every transition
	// (persist, serialized by saveMu), with resume: where its upstream
	// call stands (task_store.go).
	opts   *Options
	saveMu sync.Mutex
	resume resumePoint
	// recordResumes: the last record written says where the call
	// stands (under mu); the runner writes one when it first can.
	// unshown: the runner holds questions not yet in inputs (TaskGather).
	recordResumes bool
	unshown       bool
	// handingOver: the gateway is stopping, and the task, resumable, is
	// left to another instance (Close): its runner lets the call's
	// stream go without ending anything upstream.
	handingOver atomic.Bool
	// letGo closes the call's stream (nil: none to close), for handOver;
	// primed is its Call.Primed.
	letGo  func()
	primed func() string
	// resumeLater, under mu, reopens the call's stream of a task taken
	// over while it waited for answers, once they are posted
	// (task_takeover.go: resumeDeferred).
	resumeLater func() string
}

// taskKind is what differs between the two kinds of task once they are
// in the table.
type taskKind interface {
	// names reports whether tk, an opened taskId whose handle and
	// principal are t's, names t (an upstream's taskId also names its
	// upstream task and session).
	names(tk seal.Task) bool
	// refresh brings t up to date before tasks/get shows it.
	refresh(ctx context.Context, b *Bridge, t *task)
	// cancel answers the client's tasks/cancel: t is cancelled unless
	// it already ended.
	cancel(b *Bridge, t *task)
	// dropsQuestions reports whether a cancellation forgets the
	// questions t shows at once (the upstream's tasks/cancel ends them),
	// instead of leaving them to the runner, which answers them.
	dropsQuestions() bool
}

// taskSet counts the tasks of one options set.
type taskSet = parkSet

// taskRoom returns the refusal of a new task of princ with o, or nil, and
// takes the place when there is room.
func (b *Bridge) takeTaskPlace(o *Options, princ [16]byte) *jsonrpc.RPCError {
	b.tmu.Lock()
	defer b.tmu.Unlock()
	set := b.taskSetLocked(o)
	switch {
	case set.byPrin[princ] >= o.Tasks.MaxTasksPerPrincipal:
		return &jsonrpc.RPCError{HTTPStatus: http.StatusTooManyRequests, Code: jsonrpc.InternalError,
			Message: "too many running tasks of this principal (max_tasks_per_principal); the call was not sent: retry when one of its tasks ends (completed, failed, or cancelled with tasks/cancel)"}
	case set.held >= o.Tasks.MaxTasks:
		return &jsonrpc.RPCError{HTTPStatus: http.StatusServiceUnavailable, Code: jsonrpc.InternalError,
			Message: "the gateway runs too many tasks (max_tasks); the call was not sent: retry when a task ends"}
	}
	set.take(princ)
	return nil
}

// forceTaskPlace takes a place for a task of princ with o whatever the
// bounds: a task taken over from a lost instance is never refused.
func (b *Bridge) forceTaskPlace(o *Options, princ [16]byte) *taskPlace {
	b.tmu.Lock()
	b.taskSetLocked(o).take(princ)
	b.tmu.Unlock()
	return b.newTaskPlace(o, princ)
}

// taskSetLocked is the set counting the tasks of o, made when missing. The
// caller holds b.tmu.
func (b *Bridge) taskSetLocked(o *Options) *taskSet {
	set := b.taskSets[o]
	if set == nil {
		set = &taskSet{byPrin: make(map[[16]byte]int)}
		b.taskSets[o] = set
	}
	return set
}

// take counts a place of princ in s. The caller holds b.tmu.
func (s *taskSet) take(princ [16]byte) {
	s.held++
	s.byPrin[princ]++
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

// allTasks returns the tasks in the table, of both kinds.
func (b *Bridge) allTasks() []*task {
	b.tmu.Lock()
	defer b.tmu.Unlock()
	all := make([]*task, 0, len(b.tasks))
	for _, t := range b.tasks {
		all = append(all, t)
	}
	return all
}

// Tasks returns how many tasks the bridge holds, by status.
func (b *Bridge) Tasks() map[string]int {
	out := map[string]int{}
	for _, t := range b.allTasks() {
		t.mu.Lock()
		out[t.status]++
		t.mu.Unlock()
	}
	return out
}

// addTask puts t, made of c and shown to r's client, in the table: its
// taskId is sealed (sealed with the owner, handle, principal and the span
// of c's first request added),
// the task place c took moves to it, and its ttl starts. From now on a
// tasks/get resolves it.
func (b *Bridge) addTask(c *call, r Request, t *task, sealed seal.Task) {
	_, _ = rand.Read(t.handle[:])
	sealer := r.Options
	sealed.Instance, sealed.Address, sealed.Handle, sealed.Principal = sealer.Instance, sealer.Address, t.handle, c.princ
	t.first, sealed.Trace = c.first, seal.TraceRef(c.first)
	t.id = seal.SealTask(sealer.Keyring, sealed)
	status := t.status
	c.taskPlaced = false // the task holds it now
	b.tmu.Lock()
	b.tasks[t.handle] = t
	b.tmu.Unlock()
	if translate.TaskTerminal(status) {
		t.place.free() // made ended (completedTask): its record only
	}
	t.timer = time.AfterFunc(t.ttl, func() { b.expireTask(t) })
	b.taskEvent(c, "created", status)
}

// expireTask removes t at the end of its ttl, cancelling it if it still
// runs.
func (b *Bridge) expireTask(t *task) {
	b.cancelTask(t, "the task's ttl passed")
	b.tmu.Lock()
	delete(b.tasks, t.handle)
	b.tmu.Unlock()
	t.place.free()
	b.forget(t)
}

// cancelTask makes t cancelled, unless it already ended, gives its place
// back and tells the runner to let the upstream go (runTask). It reports
// whether t was running.
func (b *Bridge) cancelTask(t *task, why string) bool {
	return b.stopTask(t, translate.TaskCancelled, why, nil)
}

// stopTask is cancelTask ending t with status (cancelled, or failed with
// errObj).
func (b *Bridge) stopTask(t *task, status, why string, errObj []byte) bool {
	t.mu.Lock()
	running := !translate.TaskTerminal(t.status)
	unopened := running && t.resumeLater != nil // taken over, its stream not reopened
	if running {
		t.status, t.updated, t.note, t.errObj = status, time.Now(), why, errObj
		t.resumeLater = nil
		if t.kind.dropsQuestions() {
			t.inputs = nil
		}
	}
	t.mu.Unlock()
	if running {
		t.place.free()
		t.stopRunner()
		b.persist(t)
	}
	if unopened {
		go b.letGoUnopened(t, why)
	}
	return running
}

// stopped reports whether t's runner was told to let go (stopRunner).
func (t *task) stopped() bool {
	select {
	case <-t.stop:
		return true
	default:
		return false
	}
}

// stopRunner tells t's runner to let the upstream go; later calls do
// nothing.
func (t *task) stopRunner() {
	t.stopOnce.Do(func() { close(t.stop) })
}

// envelope is t as a flat CreateTaskResult or a DetailedTask
// (taskState's).
func (t *task) envelope(resultType string, detailed bool) []byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.taskState.envelope(t.id, resultType, t.ttl, t.pollMs, detailed)
}

// mayBecomeTask decides, before a tools/call starts, whether its call may
// become a task: the tool's rule is optional or required and the request
// declares the Tasks extension (a task place is then taken, which the
// caller frees if the call does not start), or the gateway hosts it
// (Request.HostTask). A required tool's request that does not declare it
// is refused with -32021.
func (b *Bridge) mayBecomeTask(r Request) (*TaskRule, *jsonrpc.RPCError) {
	if r.Method != "tools/call" {
		return nil, nil
	}
	if r.HostTask {
		if b.takeTaskPlace(r.Options, r.Principal) != nil {
			return nil, nil // no room: a plain call, as before tasks
		}
		return &TaskRule{Mode: TaskOptional}, nil // a task at once
	}
	return b.applyTaskRule(r, b.support.taskRule(&r.Options.Tasks.Policy, r.Upstream, r.Principal, r.Name))
}

// applyTaskRule applies the tool's rule to r: nil when its call may not become
// a task (forbidden, or optional and the extension not declared), -32021
// for a required tool whose request does not declare the extension, else
// the rule, with a task place taken (or the refusal when there is none).
func (b *Bridge) applyTaskRule(r Request, rule TaskRule) (*TaskRule, *jsonrpc.RPCError) {
	declared := DeclaresTasks(r.ClientCapabilities)
	switch {
	case rule.Mode == TaskForbidden:
		return nil, nil
	case !declared && rule.Mode == TaskRequired:
		return nil, &jsonrpc.RPCError{HTTPStatus: http.StatusBadRequest, Code: jsonrpc.MissingRequiredClientCapability,
			Message: "Missing required client capability: tool " + jsonrpc.Clip(r.Name) + " runs as a task, which needs the Tasks extension (" + ExtTasks + ")",
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
// capabilities.extensions. res is BuildDiscoverResult's, its capabilities
// the upstream's: it is read with gjson (of repeated members, the first
// counts) and edited by splicing, so every other member stays as it was,
// where it was. A capabilities or extensions member that is not an object
// becomes one.
func withTasksExtension(res []byte) ([]byte, error) {
	src := string(res)
	if err := jsonrpc.ValidJSONString(src); err != nil {
		return nil, fmt.Errorf("the discover result: %w", err)
	}
	if !gjson.Parse(src).IsObject() {
		return nil, errors.New("the discover result is not a JSON object")
	}
	caps := gjson.Get(src, "capabilities")
	ext := gjson.Get(caps.Raw, "extensions")
	if !caps.IsObject() || !ext.IsObject() {
		ext = gjson.Parse("{}")
	}
	withExt := setMember(ext.Raw, ExtTasks, "{}")
	if !caps.IsObject() {
		return []byte(setMember(src, "capabilities", `{"extensions":`+withExt+`}`)), nil
	}
	return []byte(setMember(src, "capabilities", setMember(caps.Raw, "extensions", withExt))), nil
}

// setMember returns the JSON object obj with its member name set to val
// (a JSON text): the first such member's value replaced and any later
// copies removed, or the member appended when obj has none.
func setMember(obj, name, val string) string {
	ms, _ := jsonrpc.Members(obj)
	var sp []jsonrpc.Splice
	for i, m := range ms {
		switch {
		case m.Name != name:
		case len(sp) == 0:
			sp = append(sp, jsonrpc.Splice{At: m.Val.Index, End: m.End(), Text: val})
		default: // a later copy, with the comma before it
			sp = append(sp, jsonrpc.Splice{At: ms[i-1].End(), End: m.End()})
		}
	}
	if len(sp) == 0 {
		key := translate.AppendJSONString(nil, name)
		sp = append(sp, jsonrpc.AppendMembers(obj, ms, []string{string(key) + ":" + val}))
	}
	return string(jsonrpc.ApplySplices(obj, sp))
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
