package forward

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"time"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/seal"
)

// Task records: with TaskOptions.Store, every task the gateway
// hosts has a record in storage the fleet shares — Caddy's configured
// storage (certmagic.Storage satisfies Storage): the file system under
// Caddy's data directory by default, or whatever module the operator
// configures for all instances (redis, consul, postgres, S3, a shared
// volume). The record (seal.TaskRecord, sealed with the Keyring: results
// can be sensitive, and whoever writes to the storage must not be able to
// make an instance resume a call of its choosing) holds what any instance
// needs to answer tasks/get and to go on: status, times, ttl, the pending
// inputRequests, the result or error, the owner (instance, boot, address),
// and where the upstream call stands when its stream is resumable.
//
// Keys: mcp_gateway/tasks/<principal>/<handle> (hex; the principal's
// keyed name, seal.Keyring.PrincipalName, so that the storage's names
// reveal nothing to test guessed credentials against), so that one
// principal's records are one listing. The owner's claim is its instance's
// lease (task_lease.go): one per instance, not per task, so that renewing
// costs one write per period whatever the number of tasks.
//
// Writes happen on transitions (created, input_required, working again,
// terminal, taken over), never on a poll; the owner serves its tasks from
// memory, and other instances read the record only when the owner cannot
// be reached (task_takeover.go), or to follow the task for a listener
// (task_push.go).

// Storage is what the task records need of a storage: certmagic.Storage
// (Caddy's storage modules) satisfies it. Load reports a missing key with
// an error wrapping fs.ErrNotExist; Lock is a distributed lock (one holder
// across the fleet), released by Unlock.
type Storage interface {
	Lock(ctx context.Context, name string) error
	Unlock(ctx context.Context, name string) error
	Store(ctx context.Context, key string, value []byte) error
	Load(ctx context.Context, key string) ([]byte, error)
	Delete(ctx context.Context, key string) error
	List(ctx context.Context, path string, recursive bool) ([]string, error)
}

const (
	recordsPrefix = "mcp_gateway/tasks"
	leasesPrefix  = "mcp_gateway/instances"
	// storeTimeout bounds one storage operation.
	storeTimeout = 5 * time.Second
)

// lockStore takes store's lock name (one holder across the fleet) and
// returns its release, which unlocks within storeTimeout whatever ctx has
// become.
func lockStore(ctx context.Context, store Storage, name string) (release func(), err error) {
	if err := store.Lock(ctx, name); err != nil {
		return nil, err
	}
	return func() {
		uctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
		defer cancel()
		_ = store.Unlock(uctx, name)
	}, nil
}

// recordKey is the key of the record of princ's task handle.
func recordKey(kr *seal.Keyring, princ, handle [16]byte) string {
	return path.Join(recordsPrefix, kr.PrincipalName(princ), hex.EncodeToString(handle[:]))
}

// recordKeysBefore are the keys an older gateway (or another key of kr,
// before a rotation) gave the record: loadRecord looks there on a miss.
func recordKeysBefore(kr *seal.Keyring, princ, handle [16]byte) []string {
	var keys []string
	for _, name := range kr.PrincipalNamesBefore(princ) {
		keys = append(keys, path.Join(recordsPrefix, name, hex.EncodeToString(handle[:])))
	}
	return keys
}

// positiveOr is v when it is set (positive), else d: an option's value or
// its default.
func positiveOr[T int | time.Duration](v, d T) T {
	if v > 0 {
		return v
	}
	return d
}

func (o *Options) taskLease() time.Duration { return positiveOr(o.Tasks.Lease, DefaultTaskLease) }

func (o *Options) maxTaskResult() int { return positiveOr(o.Tasks.MaxResult, DefaultMaxTaskResult) }

// resumePoint is where a hosted task's upstream call stands, when its
// stream is resumable (ok): what a record needs so that another instance
// reopens the stream (Session.Reopen) after the event after and skips the
// seen messages handled already (replaySeen).
type resumePoint struct {
	ok               bool
	session, version string
	callID           []byte
	after            string
	seen             uint32
	shown            uint32 // seen, but for the questions not shown yet (task.unshown)
	keys             []byte
	serverInfo       []byte
}

// saw moves the point past m, a message of the call's stream the runner
// handled: with no question open, the window starts again at m.
func (p *resumePoint) saw(after string, open bool) {
	if after == "" {
		p.ok = false // an event without id: the stream cannot be resumed here
		return
	}
	if !open {
		p.after, p.seen = after, 1
		return
	}
	p.seen++
}

// record is t's record, owned by this instance (boot). The caller holds
// t.mu.
func (t *task) record(boot [16]byte) seal.TaskRecord {
	o := t.opts
	rec := seal.TaskRecord{Handle: t.handle, Principal: t.princ, Tool: t.tool, Upstream: t.upstream,
		Status: t.status, Note: t.note, Created: t.created, Updated: t.updated, TTL: t.ttl, PollMs: t.pollMs,
		Result: t.result, Error: t.errObj, Owner: o.Instance, Boot: boot, Address: o.Address, Trace: seal.TraceRef(t.first)}
	for _, p := range t.inputs {
		rec.Inputs = append(rec.Inputs, seal.TaskInput{ID: p.upstreamID, Key: p.Key, Method: p.Method, Params: p.Params})
	}
	if after, seen := t.resumeAt(); after != "" {
		p := t.resume
		rec.Session, rec.Version, rec.CallID, rec.After, rec.Seen = p.session, p.version, p.callID, after, seen
		rec.Keys, rec.ServerInfo = p.keys, p.serverInfo
	}
	return rec
}

// resumeAt is where another instance would resume t's call ("" when it
// cannot): after the event before the first message not fully handled,
// skipping seen messages; before any message, after the stream's priming
// event. The caller holds t.mu.
func (t *task) resumeAt() (after string, seen uint32) {
	p := t.resume
	switch {
	case !p.ok || translate.TaskTerminal(t.status):
		return "", 0
	case p.after != "" && t.unshown:
		return p.after, p.shown // those questions are asked again
	case p.after != "":
		return p.after, p.seen
	case t.primed != nil:
		return t.primed(), 0
	}
	return "", 0
}

// persist writes t's record, if its options keep records. Writes of one
// task are serialized, each of the state at its time: the last write is
// of the latest state. A failure is reported to the observer (the task
// goes on in memory).
//
// Every transition calls it, with or without a store: it also pushes the
// new state to the task's listeners on this instance (task_push.go), and
// adds it to the task's run span (task_trace.go).
func (b *Bridge) persist(t *task) {
	store := t.opts != nil && t.opts.Tasks.Store != nil
	var boot [16]byte
	if store {
		boot = b.claim(t.opts)
	}
	t.saveMu.Lock()
	defer t.saveMu.Unlock()
	t.mu.Lock()
	b.pushTask(t)
	t.traceRun()
	if !store {
		t.mu.Unlock()
		return
	}
	rec := t.record(boot)
	t.recordResumes = rec.After != ""
	t.mu.Unlock()
	sealed, err := seal.SealTaskRecord(t.opts.Keyring, rec)
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
		err = t.opts.Tasks.Store.Store(ctx, recordKey(t.opts.Keyring, t.princ, t.handle), sealed)
		cancel()
	}
	if err != nil {
		b.storeEvent(t, StoreFailed, fmt.Errorf("writing the task's record: %w", err))
	}
}

// forget deletes t's record (its ttl passed).
func (b *Bridge) forget(t *task) {
	if t.opts == nil || t.opts.Tasks.Store == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	if err := t.opts.Tasks.Store.Delete(ctx, recordKey(t.opts.Keyring, t.princ, t.handle)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		b.storeEvent(t, StoreFailed, fmt.Errorf("deleting the task's record: %w", err))
	}
}

// Events of task records, reported to a TaskStoreObserver.
const (
	// StoreFailed: a record could not be written or deleted.
	StoreFailed = "store_failed"
	// StoreTakenOver: this instance took a task over, its call resumed.
	StoreTakenOver = "taken_over"
	// StoreLost: a task whose owner was lost failed, its call not
	// resumable.
	StoreLost = "lost"
)

// TaskStoreObserver is implemented by an Observer that wants to learn of
// the task records' events (StoreFailed, StoreTakenOver, StoreLost).
type TaskStoreObserver interface {
	TaskStored(event, upstream, tool string, err error)
}

func (b *Bridge) storeEvent(t *task, event string, err error) {
	if obs, ok := t.opts.Observer.(TaskStoreObserver); ok {
		obs.TaskStored(event, t.upstream, t.tool, err)
	}
}

// handOver leaves the running tasks whose calls another instance can
// resume from their records (a task store, a resumable stream with an
// event id) to the fleet, at a graceful stop: each runner lets its call's
// stream go without ending anything upstream, and the task leaves the
// table; the caller writes their records once the runners returned, then
// releases the lease, so that another instance takes them over at its
// next tasks/* without waiting for the lease to lapse.
func (b *Bridge) handOver() []*task {
	var handed []*task
	for _, t := range b.allTasks() {
		t.mu.Lock()
		after, _ := t.resumeAt()
		ok := t.opts != nil && t.opts.Tasks.Store != nil && after != "" && t.letGo != nil
		t.mu.Unlock()
		if !ok {
			continue
		}
		t.handingOver.Store(true)
		t.timer.Stop()
		b.tmu.Lock()
		delete(b.tasks, t.handle)
		b.tmu.Unlock()
		t.place.free()
		t.letGo()
		handed = append(handed, t)
	}
	return handed
}
