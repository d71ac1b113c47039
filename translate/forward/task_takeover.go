package forward

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/legacy"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/seal"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/traces"
)

// Tasks served from their records (task_store.go), on an instance that
// does not hold them: the owner the taskId names could not be reached
// (Request.OwnerGone: the relay failed), or it is this instance, restarted
// with the same instance id, whose memory lost them.
//
//   - A record whose task ended answers from the record.
//   - A record whose owner still holds its lease (it is slow, or cut off
//     from this instance, or it died less than a lease ago) answers
//     tasks/get from the record (written on every transition, so current
//     to the last one); tasks/update and tasks/cancel wait for the lease
//     to lapse, one whole lease at most (an owner that renews it meanwhile
//     lives, cut off from this instance: then 503 and, in its text and
//     Retry-After, how long until the lease ends): then any instance takes
//     the task over.
//   - Otherwise this instance takes the task over, under the storage's lock
//     (one taker): in front of a resumable upstream it attaches the upstream
//     session, reopens the call's stream after the recorded event (as a
//     resumed round does), skips what was handled, and runs the task on from
//     there, owning it (its record says so; its taskId, which names the
//     first owner, finds it here); otherwise the task fails with an error
//     that says the instance running it was lost. Never left working for
//     ever, never a 5xx on tasks/get.

// storedTask is what a task's record lets this instance do for r: serve it
// in memory (t, taken over now or before), or from the record (view), or
// neither (both nil: unknown to r's principal).
type storedTask struct {
	t    *task
	view *task             // from the record, not in the table
	busy *jsonrpc.RPCError // the owner holds its lease: tasks/update and tasks/cancel wait
	// owner is the instance whose lease busy waits for, left how long
	// that lease still holds.
	owner string
	left  time.Duration
}

// recoverTask reads the record of the task tk names for r and acts on it
// as the file's comment says. A tasks/update or tasks/cancel whose task's
// owner still holds its lease waits for the lease to lapse — as long as
// the request lasts, and one task_lease at most, which a dead owner's
// lease always fits in — then takes the task over and goes on: a client
// never sees 503 for an owner that died (a Tasks client may take an error
// for the task's outcome, and stop). An owner that renewed its lease
// meanwhile is alive but cut off from here: 503. It does not wait for
// another instance that took the task over meanwhile.
func (b *Bridge) recoverTask(ctx context.Context, r Request, id string, tk seal.Task) (storedTask, error) {
	deadline := time.Now().Add(r.Options.taskLease() + leaseWaitMargin)
	first := ""
	for {
		st, err := b.recoverOnce(ctx, r, id, tk)
		if first == "" {
			first = st.owner
		}
		if st.busy == nil || r.Method == "tasks/get" || st.owner != first || time.Now().Add(st.left).After(deadline) {
			return st, err
		}
		select {
		case <-time.After(st.left + leaseWaitMargin):
		case <-ctx.Done():
			return st, err
		}
	}
}

// leaseWaitMargin is how long past a lease's end a waiting request reads
// the record again: the owner's clock, and the storage, may lag a little.
const leaseWaitMargin = 50 * time.Millisecond

// recoverOnce is one reading of the record for recoverTask.
func (b *Bridge) recoverOnce(ctx context.Context, r Request, id string, tk seal.Task) (storedTask, error) {
	o := r.Options
	store := o.Tasks.Store
	key := recordKey(o.Keyring, tk.Principal, tk.Handle)
	sctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	rec, err := loadRecord(sctx, o, tk.Principal, tk.Handle)
	if err != nil || rec == nil {
		return storedTask{}, err
	}
	now := time.Now()
	switch {
	case rec.Principal != r.Principal || rec.Handle != tk.Handle:
		return storedTask{}, nil
	case !now.Before(rec.Created.Add(rec.TTL)):
		_ = store.Delete(sctx, key)
		return storedTask{}, nil
	case translate.TaskTerminal(rec.Status):
		return storedTask{view: b.recordView(rec, id, o)}, nil
	}
	// A record this instance id owns is this process's (its table let it
	// go) or its previous process's (it restarted): no lease to wait for.
	b.claim(o)
	if rec.Owner != o.Instance {
		lost, left, err := ownerAlive(sctx, store, *rec, now)
		if err != nil {
			return storedTask{}, err
		}
		if lost == "" {
			return b.busyView(rec, id, o, left), nil
		}
	}
	// Orphaned, or this instance's: take it over, one taker.
	release, err := lockStore(ctx, store, key)
	if err != nil {
		return storedTask{}, fmt.Errorf("locking the task's record: %w", err)
	}
	defer release()
	if t := b.heldTask(tk.Handle, r.Principal); t != nil {
		return storedTask{t: t}, nil // taken over here while this one waited
	}
	if rec, err = loadRecord(sctx, o, tk.Principal, tk.Handle); err != nil || rec == nil {
		return storedTask{}, err
	}
	if translate.TaskTerminal(rec.Status) {
		return storedTask{view: b.recordView(rec, id, o)}, nil
	}
	lost := leaseOwn
	if rec.Owner != o.Instance {
		var left time.Duration
		if lost, left, err = ownerAlive(sctx, store, *rec, now); err != nil || lost == "" {
			// Another instance took it over while this one waited.
			return b.busyView(rec, id, o, left), err
		}
	}
	ctx, span := startTakeover(ctx, rec, lost) // task_trace.go; nil without tracing
	t, why := b.adopt(ctx, r, id, rec, lost)
	if t != nil {
		traces.End(span, "")
		b.storeEvent(t, StoreTakenOver, nil)
		return storedTask{t: t}, nil
	}
	traces.End(span, StoreLost)
	// Nothing can go on with the call: the task fails, for good.
	view := b.recordView(rec, id, o)
	view.status, view.updated, view.inputs, view.errObj = translate.TaskFailed, time.Now(), nil, taskErrorObject(
		"the gateway instance running the task was lost, and the upstream call could not be resumed ("+why+"): start the call again")
	b.persist(view) // as its owner: nothing runs it any more
	b.storeEvent(view, StoreLost, errors.New(why))
	return storedTask{view: view}, nil
}

// busyView is the task rec describes, named id, whose owner still holds
// its lease for left.
func (b *Bridge) busyView(rec *seal.TaskRecord, id string, o *Options, left time.Duration) storedTask {
	return storedTask{view: b.recordView(rec, id, o), busy: ownerBusy(rec.Owner, left), owner: rec.Owner, left: left}
}

// ownerBusy is the refusal of tasks/update and tasks/cancel while the
// task's owner, unreachable from here, still holds its lease.
func ownerBusy(owner string, left time.Duration) *jsonrpc.RPCError {
	secs := retrySeconds(left)
	return &jsonrpc.RPCError{HTTPStatus: http.StatusServiceUnavailable, Code: jsonrpc.InternalError,
		Message: "the gateway instance running the task (" + jsonrpc.Clip(owner) + ") cannot be reached; its lease on the task ends within " +
			strconv.FormatInt(secs, 10) + "s, then any instance takes the task over: retry then"}
}

// retrySeconds is left in whole seconds, rounded up past it.
func retrySeconds(left time.Duration) int64 { return int64(left/time.Second) + 1 }

// headerSink is a translate.Sink whose HTTP answer's headers the bridge
// may set before it responds.
type headerSink interface {
	Header() http.Header
}

// retryAfter says, in the Retry-After header of the answer sink writes,
// when a refused tasks/update or tasks/cancel may be sent again: once the
// owner's lease, which holds for left, lapsed.
func retryAfter(sink translate.Sink, left time.Duration) {
	if hs, ok := sink.(headerSink); ok {
		hs.Header().Set("Retry-After", strconv.FormatInt(retrySeconds(left), 10))
	}
}

// loadRecord reads and opens the record of princ's task handle: nil when
// there is none. On a miss it looks where an older gateway kept it
// (recordKeysBefore).
func loadRecord(ctx context.Context, o *Options, princ, handle [16]byte) (*seal.TaskRecord, error) {
	keys := append([]string{recordKey(o.Keyring, princ, handle)}, recordKeysBefore(o.Keyring, princ, handle)...)
	for _, key := range keys {
		b, err := o.Tasks.Store.Load(ctx, key)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("reading the task's record: %w", err)
		}
		rec, err := seal.OpenTaskRecord(o.Keyring, b)
		if err != nil {
			return nil, err
		}
		return &rec, nil
	}
	return nil, nil
}

// heldTask returns the task of handle in the table, if princ's.
func (b *Bridge) heldTask(handle, princ [16]byte) *task {
	b.tmu.Lock()
	defer b.tmu.Unlock()
	if t := b.tasks[handle]; t != nil && t.princ == princ {
		return t
	}
	return nil
}

// recordView is the task rec describes, named id, for answering from the
// record; it is in no table and runs nothing.
func (b *Bridge) recordView(rec *seal.TaskRecord, id string, o *Options) *task {
	t := &task{id: id, handle: rec.Handle, princ: rec.Principal, tool: rec.Tool, upstream: rec.Upstream, born: rec.Created,
		ttl: rec.TTL, kind: hostedKind{}, stop: make(chan struct{}), pollMs: rec.PollMs, opts: o, first: traces.Ref(rec.Trace),
		taskState: taskState{status: rec.Status, note: rec.Note, created: rec.Created, updated: rec.Updated,
			result: rec.Result, errObj: rec.Error}}
	for _, in := range rec.Inputs {
		t.inputs = append(t.inputs, pendingInput{InputRequest: translate.InputRequest{Key: in.Key, Method: in.Method, Params: in.Params}, upstreamID: in.ID})
	}
	if rec.Session != "" {
		t.resume = resumePoint{ok: true, session: rec.Session, version: rec.Version, callID: rec.CallID, after: rec.After,
			seen: rec.Seen, keys: rec.Keys, serverInfo: rec.ServerInfo}
	}
	return t
}

// adopt takes over the task rec describes, in front of a resumable
// upstream still configured: its upstream session attached, the task put
// in the table (its record rewritten with this instance as owner) and run
// on from the call's stream, reopened after the recorded event, in the
// background (resumeDeferred: a go-sdk server answers the reopening with
// the call's next message, which an idle tool may send minutes later);
// else nil, and why not. A task waiting for answers reopens its stream
// only once they are posted (tasks/update), as a resumed round does: an
// upstream whose event store maps a replay to no stream (the TypeScript
// server-everything's) sends what follows the replay nowhere. Its run's
// span (task_trace.go) is a child of the call that made it, its first
// event taken_over, naming rec's owner and why its lease was lost.
func (b *Bridge) adopt(ctx context.Context, r Request, id string, rec *seal.TaskRecord, lost string) (*task, string) {
	if rec.Session == "" || rec.After == "" {
		return nil, "its stream is not resumable"
	}
	target := translate.Target{Upstream: rec.Upstream}
	if r.TargetOf != nil {
		tg, ok := r.TargetOf(rec.Upstream)
		if !ok {
			return nil, "its upstream is no longer configured"
		}
		target = tg
	}
	o := r.Options
	key := legacy.PoolKey{Upstream: rec.Upstream, Principal: hex.EncodeToString(rec.Principal[:]), Client: target.Client}
	sess := legacy.Attach(b.pool.Client(key), rec.Upstream, r.Header, legacy.UpstreamSessionID(rec.Session), rec.Version)
	sess.SetCallBuffer(o.Lease.CallBuffer)
	if rec.ServerInfo != nil {
		sess.InitResult = append(append([]byte(`{"serverInfo":`), rec.ServerInfo...), '}')
	}
	c := &call{opts: o, method: "tools/call", name: rec.Tool, started: rec.Created, princ: rec.Principal, caps: r.ClientCapabilities,
		key: key, resumeOn: true, own: true, sess: sess, resumeAt: rec.After}
	c.keys = translate.DecodeKeyCounter(rec.Keys)
	t := b.recordView(rec, id, o)
	t.sess = sess
	t.letGo = func() {} // nothing open yet: handOver only writes its record
	t.resumeLater = func() string {
		callCtx, why := b.reopenTask(t, c, rec)
		if why != "" {
			return why
		}
		b.startRunner(t, c, &hostedRun{b: b, t: t, c: c, ctx: callCtx, recheck: recheckAfter(o)})
		return ""
	}
	t.place = b.forceTaskPlace(o, rec.Principal)
	t.startRun(ctx, t.first, rec.Owner, lost)
	b.tmu.Lock()
	b.tasks[t.handle] = t
	b.tmu.Unlock()
	t.timer = time.AfterFunc(time.Until(rec.Created.Add(rec.TTL)), func() { b.expireTask(t) })
	b.persist(t)
	if len(rec.Inputs) == 0 {
		go b.resumeDeferred(t)
	}
	return t, ""
}

// reopenTask reopens the stream of t's call c after the event rec
// recorded, and reads past what was handled before (its questions still
// unanswered become t's again); "" when it did, with the call's context
// (ended when the task is cancelled), else why not (the call is then let
// go).
func (b *Bridge) reopenTask(t *task, c *call, rec *seal.TaskRecord) (context.Context, string) {
	callCtx, cancelCall := context.WithCancel(b.ctx)
	go func() { // the task cancelled while the upstream has not answered
		select {
		case <-t.stop:
			cancelCall()
		case <-callCtx.Done():
		}
	}()
	c.cancelUp = cancelCall
	if why := b.reopenCall(callCtx, t, c, rec.CallID, rec.After, rec.Seen); why != "" {
		if c.up == nil { // never reopened: the session stays, to be let go
			cancelCall()
		} else {
			b.finish(c, false)
		}
		return nil, why
	}
	return callCtx, ""
}

// reopenCall reopens the stream of t's call c, callID, after the event
// after, and reads the seen messages handled before (t's questions still
// unanswered among them become t's again); "" when it did, else why not.
// A stream of c's still open is closed first: an upstream may allow one
// reader per stream.
func (b *Bridge) reopenCall(ctx context.Context, t *task, c *call, callID json.RawMessage, after string, seen uint32) string {
	if c.up != nil {
		c.up.Close()
	}
	up, err := c.sess.Reopen(ctx, callID, after)
	if err != nil {
		return "the upstream did not reopen its stream: " + err.Error()
	}
	c.up = up
	t.mu.Lock()
	unanswered := make(map[string]seal.ResumeInput, len(t.inputs))
	for _, in := range t.inputs {
		unanswered[string(in.upstreamID)] = seal.ResumeInput{ID: in.upstreamID, Key: in.Key, Method: in.Method}
	}
	t.mu.Unlock()
	pending, err := b.replaySeen(ctx, c, seen, unanswered)
	if err != nil {
		return "the upstream's replay of the call differs: " + err.Error()
	}
	t.mu.Lock()
	t.inputs, t.letGo, t.primed = pending, up.Close, up.Primed
	t.mu.Unlock()
	return ""
}

// resumeDeferred reopens the stream of t, taken over, and starts its
// runner (t.resumeLater, once): at once for a task working, once the
// answers are posted for one that waited for them. The task fails when the
// stream cannot be reopened; one cancelled meanwhile lets the upstream go.
func (b *Bridge) resumeDeferred(t *task) {
	t.mu.Lock()
	resume := t.resumeLater
	t.resumeLater = nil
	t.mu.Unlock()
	if resume == nil {
		return
	}
	why := resume()
	switch {
	case why == "", t.handingOver.Load(): // the record stays for the next owner
	case t.stopped():
		b.letGoUnopened(t, "task cancelled")
	case t.end(translate.TaskFailed, nil, taskErrorObject("the task could not go on after its instance was lost ("+why+"): start the call again")):
		b.persist(t)
		b.storeEvent(t, StoreLost, errors.New(why))
	}
}

// letGoUnopened lets go of the upstream call of a task taken over whose
// stream was never reopened here (cancelled, or its ttl passed): its open
// questions answered with a cancellation, notifications/cancelled, its
// session ended.
func (b *Bridge) letGoUnopened(t *task, why string) {
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	t.mu.Lock()
	inputs := slices.Clone(t.inputs)
	t.mu.Unlock()
	for _, p := range inputs {
		res, errObj := translate.CancelAnswer(p.Method)
		_ = t.sess.Respond(ctx, p.upstreamID, res, errObj)
	}
	b.cancelUpstream(t.sess, t.resume.callID, why)
	t.sess.Close(ctx)
}

// StoredOwner reads the record of the task a tasks/* request names, for a
// request whose taskId's owner could not be reached: found is false when
// there is none (no task store, a storage not shared with the owner, no
// such task of r's principal); owner is the instance that holds the task
// now, when that is neither this instance nor the one the taskId names
// and it holds its lease (it took the task over: relay r there), and zero
// otherwise (serve r here with OwnerGone).
func (b *Bridge) StoredOwner(ctx context.Context, r *Request) (owner translate.Owner, found bool) {
	o := b.optionsOf(r)
	tk, ok := b.taskIDOf(r)
	if !ok || o.Tasks.Store == nil {
		return owner, false
	}
	ctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	rec, err := loadRecord(ctx, o, tk.Principal, tk.Handle)
	if err != nil || rec == nil || rec.Principal != r.Principal {
		return owner, false
	}
	if translate.TaskTerminal(rec.Status) || rec.Owner == tk.Instance || rec.Owner == o.Instance {
		return owner, true
	}
	if lost, _, err := ownerAlive(ctx, o.Tasks.Store, *rec, time.Now()); err != nil || lost != "" {
		return owner, true
	}
	return translate.Owner{Instance: rec.Owner, Address: rec.Address}, true
}

// HoldsTask reports whether the tasks/* request r names a task this
// instance holds in its table (its own, or one it took over).
func (b *Bridge) HoldsTask(r *Request) bool {
	tk, ok := b.taskIDOf(r)
	return ok && b.heldTask(tk.Handle, tk.Principal) != nil
}
