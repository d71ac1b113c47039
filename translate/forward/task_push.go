package forward

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/tidwall/gjson"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/seal"
)

// Task status pushed to listeners (the Tasks extension, SEP-2663): a
// subscriptions/listen whose notifications.taskIds names tasks the
// gateway hosts gets, on its stream, a notifications/tasks for each status
// change of each (and for a changed statusMessage), whose params are the
// full DetailedTask tasks/get would answer at that moment (without
// resultType, which belongs to a result), their _meta carrying the
// subscription id as on every notification of the stream. The
// acknowledgement echoes, in notifications.taskIds, the taskIds accepted:
// those of the listener's principal that this instance can follow, in the
// client's order, duplicates once, at most TaskOptions.MaxListenTaskIDs; a
// request naming taskIds without declaring the extension is refused with
// -32021 before anything else (the spec's MUST). Right after the
// acknowledgement the stream carries each accepted task's current state,
// so that a client learns of a change made before it listened.
//
// How the change reaches the listener:
//
//   - A task held by the listener's instance (its owner, or the instance
//     that took it over) pushes each change from memory, as it happens, in
//     order: persist, called on every transition with or without a task
//     store, hands the new state to the task's watches (pushTask).
//   - A task held by another instance of the fleet is followed from its
//     record in the fleet's storage (task_store.go), which its owner
//     writes on every transition: the listener's instance reads it every
//     TaskOptions.ListenPoll and pushes what changed. The owner need not
//     know who listens where, nothing new travels between instances, and
//     a listener survives its task's owner: the instance that takes the
//     task over writes the same record. A status that lasts less than
//     ListenPoll may be passed over for the next one (each notification
//     carries the whole task, so nothing of the task is lost, and the
//     terminal state is always sent), and the notification comes up to
//     ListenPoll plus one storage read after the change. Without a task
//     store another instance's task cannot be followed: its taskId is not
//     accepted.
//
// Bounds: at most TaskOptions.MaxTaskListenersPerPrincipal listens naming
// taskIds per principal on an instance (429, -32603 beyond), each of at
// most MaxListenTaskIDs taskIds; the storage reads are therefore at most
// their product per principal per ListenPoll. A watch's queue of pushed
// states holds maxPushQueue; a client too slow for it loses the oldest
// (each notification being the whole task, the latest state still
// arrives).

// Defaults of the TaskOptions that bound and pace the pushes.
const (
	DefaultListenPoll       = 500 * time.Millisecond
	DefaultMaxListenTaskIDs = 100
	DefaultMaxTaskListeners = 10
	// maxPushQueue bounds the states queued for one listen stream.
	maxPushQueue = 64
)

func (o *Options) listenPoll() time.Duration {
	return positiveOr(o.Tasks.ListenPoll, DefaultListenPoll)
}

func (o *Options) maxListenTaskIDs() int {
	return positiveOr(o.Tasks.MaxListenTaskIDs, DefaultMaxListenTaskIDs)
}

func (o *Options) maxTaskListeners() int {
	return positiveOr(o.Tasks.MaxTaskListenersPerPrincipal, DefaultMaxTaskListeners)
}

// taskPush is one state of a task, for its listeners.
type taskPush struct {
	handle  [16]byte
	status  string
	note    string
	updated time.Time
	params  []byte // the DetailedTask, as notification params
}

// watchedTask is one taskId a listen stream accepted.
type watchedTask struct {
	id   string
	tk   seal.Task
	sent *taskPush // the last state sent, nil before the first
}

// taskWatch is the task part of one listen stream: the tasks it follows,
// the states pushed to it not yet sent (queue, under mu; wake is signalled
// on each), and its principal's place toward MaxTaskListenersPerPrincipal.
type taskWatch struct {
	b     *Bridge
	o     *Options
	princ [16]byte
	tasks []*watchedTask
	mu    sync.Mutex
	queue []taskPush
	wake  chan struct{}
}

// watchTasks reads the taskIds a subscriptions/listen names (params) and
// returns the watch of those accepted (nil when it names none, or none is
// accepted), or the refusal: -32021 when r does not declare the Tasks
// extension, 429 when r's principal already has its most listens. The
// caller closes the watch when the stream ends.
func (b *Bridge) watchTasks(r Request, params []byte) (*taskWatch, *jsonrpc.RPCError) {
	asked := gjson.GetBytes(params, "notifications.taskIds")
	if !asked.Exists() {
		return nil, nil
	}
	if !DeclaresTasks(r.ClientCapabilities) {
		return nil, &jsonrpc.RPCError{HTTPStatus: http.StatusBadRequest, Code: jsonrpc.MissingRequiredClientCapability,
			Message: "Missing required client capability: task notifications (notifications.taskIds) need the Tasks extension (" + ExtTasks + ")",
			Data:    requiredTasksData}
	}
	o := r.Options
	w := &taskWatch{b: b, o: o, princ: r.Principal, wake: make(chan struct{}, 1)}
	seen := map[string]bool{}
	asked.ForEach(func(_, v gjson.Result) bool {
		if v.Type != gjson.String || seen[v.Str] {
			return true
		}
		seen[v.Str] = true
		if tk, err := seal.OpenTask(o.Keyring, v.Str); err == nil && tk.Principal == r.Principal && b.followable(o, tk) {
			w.tasks = append(w.tasks, &watchedTask{id: v.Str, tk: tk})
		}
		return len(w.tasks) < o.maxListenTaskIDs()
	})
	if len(w.tasks) == 0 {
		return nil, nil
	}
	b.wmu.Lock()
	defer b.wmu.Unlock()
	if b.listeners[r.Principal] >= o.maxTaskListeners() {
		return nil, &jsonrpc.RPCError{HTTPStatus: http.StatusTooManyRequests, Code: jsonrpc.InternalError,
			Message: "too many listens for task notifications of this principal (max_task_listeners_per_principal): close one, or poll with tasks/get"}
	}
	if b.watches == nil {
		b.watches, b.listeners = make(map[[16]byte]map[*taskWatch]bool), make(map[[16]byte]int)
	}
	b.listeners[r.Principal]++
	for _, wt := range w.tasks {
		set := b.watches[wt.tk.Handle]
		if set == nil {
			set = make(map[*taskWatch]bool)
			b.watches[wt.tk.Handle] = set
		}
		set[w] = true
	}
	return w, nil
}

// followable reports whether this instance can follow the task tk names:
// a task the gateway hosts (not a 2025 upstream's, whose changes the
// gateway learns only when a client asks), held here or with its record in
// the task store.
func (b *Bridge) followable(o *Options, tk seal.Task) bool {
	return tk.Upstream == "" && (o.Tasks.Store != nil || b.heldTask(tk.Handle, tk.Principal) != nil)
}

// close ends w: no more pushes, and its principal's place is free.
func (w *taskWatch) close() {
	if w == nil {
		return
	}
	b := w.b
	b.wmu.Lock()
	defer b.wmu.Unlock()
	for _, wt := range w.tasks {
		delete(b.watches[wt.tk.Handle], w)
		if len(b.watches[wt.tk.Handle]) == 0 {
			delete(b.watches, wt.tk.Handle)
		}
	}
	if n := b.listeners[w.princ] - 1; n > 0 {
		b.listeners[w.princ] = n
	} else {
		delete(b.listeners, w.princ)
	}
}

// pushTask hands t's state to its watches. The caller holds t.mu, so that
// the states of one task are queued in the order they happened.
func (b *Bridge) pushTask(t *task) {
	b.wmu.Lock()
	watched := len(b.watches[t.handle]) > 0
	b.wmu.Unlock()
	if !watched {
		return
	}
	p := pushOf(t) // outside wmu: the task's result may be large
	b.wmu.Lock()
	defer b.wmu.Unlock()
	for w := range b.watches[t.handle] {
		if w.princ == t.princ {
			w.enqueue(p)
		}
	}
}

// pushOf is t's state as a push. The caller holds t.mu.
func pushOf(t *task) taskPush {
	return taskPush{handle: t.handle, status: t.status, note: t.note, updated: t.updated,
		params: t.taskState.envelope(t.id, "", t.ttl, t.pollMs, true)}
}

func (w *taskWatch) enqueue(p taskPush) {
	w.mu.Lock()
	if len(w.queue) >= maxPushQueue {
		w.queue = w.queue[1:]
	}
	w.queue = append(w.queue, p)
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// wakeC fires when states were pushed to w (never for a nil w).
func (w *taskWatch) wakeC() <-chan struct{} {
	if w == nil {
		return nil
	}
	return w.wake
}

// pollC fires every ListenPoll when w follows a task store (never for a
// nil w); stop stops it.
func (w *taskWatch) pollC() (c <-chan time.Time, stop func()) {
	if w == nil || w.o.Tasks.Store == nil {
		return nil, func() {}
	}
	tk := time.NewTicker(w.o.listenPoll())
	return tk.C, tk.Stop
}

// start queues the current state of each task held here (under its mu,
// so that it comes before any later push) and sends it with those read
// from the records: the stream's first task notifications.
func (w *taskWatch) start(ctx context.Context, send func([]byte) error) error {
	for _, wt := range w.tasks {
		if t := w.b.heldTask(wt.tk.Handle, w.princ); t != nil {
			t.mu.Lock()
			w.enqueue(pushOf(t))
			t.mu.Unlock()
		}
	}
	if err := w.drain(send); err != nil {
		return err
	}
	return w.poll(ctx, send)
}

// drain sends the states pushed to w, each unless it is no news.
func (w *taskWatch) drain(send func([]byte) error) error {
	w.mu.Lock()
	queue := w.queue
	w.queue = nil
	w.mu.Unlock()
	for _, p := range queue {
		for _, wt := range w.tasks {
			if wt.tk.Handle == p.handle {
				if err := wt.send(p, send); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// poll reads the record of each task w follows that this instance does
// not hold and has not seen end, and sends what changed.
func (w *taskWatch) poll(ctx context.Context, send func([]byte) error) error {
	if w.o.Tasks.Store == nil {
		return nil
	}
	for _, wt := range w.tasks {
		if wt.ended() || w.b.heldTask(wt.tk.Handle, w.princ) != nil {
			continue
		}
		sctx, cancel := context.WithTimeout(ctx, storeTimeout)
		rec, err := loadRecord(sctx, w.o, wt.tk.Principal, wt.tk.Handle)
		cancel()
		if err != nil || rec == nil || rec.Principal != w.princ {
			continue // unreadable now, or gone with its ttl: nothing to say
		}
		view := w.b.recordView(rec, wt.id, w.o)
		if err := wt.send(pushOf(view), send); err != nil {
			return err
		}
	}
	return nil
}

// ended reports whether wt's terminal state was sent: nothing follows it.
func (wt *watchedTask) ended() bool {
	return wt.sent != nil && translate.TaskTerminal(wt.sent.status)
}

// send sends p as notifications/tasks unless it is no news: the state
// sent last, or an older one (a record read before a push from memory).
func (wt *watchedTask) send(p taskPush, send func([]byte) error) error {
	if last := wt.sent; last != nil && (wt.ended() || p.updated.Before(last.updated) ||
		(p.status == last.status && p.note == last.note && p.updated.Equal(last.updated))) {
		return nil
	}
	wt.sent = &p
	return send(taskNotification(p.params))
}

// taskNotification is the notifications/tasks carrying params.
func taskNotification(params []byte) []byte {
	b := make([]byte, 0, len(params)+64)
	b = append(b, `{"jsonrpc":"2.0","method":"notifications/tasks","params":`...)
	b = append(b, params...)
	return append(b, '}')
}

// acceptedIDs are the taskIds w accepted, for the acknowledgement.
func (w *taskWatch) acceptedIDs() []string {
	if w == nil {
		return nil
	}
	ids := make([]string, len(w.tasks))
	for i, wt := range w.tasks {
		ids[i] = wt.id
	}
	return ids
}
