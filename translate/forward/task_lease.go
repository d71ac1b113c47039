package forward

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io/fs"
	"maps"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/seal"
)

// An instance's lease on the tasks it owns (task_store.go): one record per
// instance id, mcp_gateway/instances/<id> (hex), "<boot> <expiry Unix ms>",
// renewed every third of TaskOptions.Lease by the bridge's leaseKeeper and
// released (expiry 0) at a graceful stop. Another instance takes a task
// over only once its owner's lease lapsed or was released, or the owner's
// process changed (a boot id of its own per process). The keeper also
// sweeps, every sweepEvery, the records whose ttl passed while no
// instance held them.

func leaseKey(instance string) string {
	return path.Join(leasesPrefix, hex.EncodeToString([]byte(instance)))
}

// lease is an instance's claim on the tasks it owns.
type lease struct {
	boot    [16]byte
	expires time.Time // zero: released
}

func (l lease) String() string {
	ms := int64(0)
	if !l.expires.IsZero() {
		ms = l.expires.UnixMilli()
	}
	return hex.EncodeToString(l.boot[:]) + " " + strconv.FormatInt(ms, 10)
}

// parseLease reads a lease value; anything malformed is no lease.
func parseLease(b []byte) (lease, bool) {
	bootHex, msText, ok := strings.Cut(string(b), " ")
	var l lease
	if !ok || len(bootHex) != 32 || len(msText) > 20 {
		return l, false
	}
	if _, err := hex.Decode(l.boot[:], []byte(bootHex)); err != nil {
		return l, false
	}
	ms, err := strconv.ParseInt(msText, 10, 64)
	if err != nil || ms < 0 {
		return l, false
	}
	if ms > 0 {
		l.expires = time.UnixMilli(ms)
	}
	return l, true
}

// leaseKeeper renews this instance's lease in the storage of the options
// that keep task records: one lease per instance id (a process whose
// blocks have several ids holds one for each), in the storage its latest
// options named. One per bridge: the bridge outlives config reloads, and
// its boot id is the process's.
type leaseKeeper struct {
	boot [16]byte

	mu       sync.Mutex
	stores   map[string]Storage // instance id -> the storage its lease is in
	every    time.Duration
	running  bool
	released bool
	expires  time.Time // of the lease last written
	lost     bool      // expires passed before a renewal could be written
}

func newLeaseKeeper() *leaseKeeper {
	k := &leaseKeeper{stores: make(map[string]Storage)}
	_, _ = rand.Read(k.boot[:])
	return k
}

// claim makes sure this instance's lease in o's storage is held and
// renewed, and reports its boot id. It writes the lease at once the first
// time (a task's record must not name an owner without one).
func (b *Bridge) claim(o *Options) [16]byte {
	k := b.leases
	k.mu.Lock()
	first := k.stores[o.Instance] != o.Tasks.Store
	k.stores[o.Instance], k.every = o.Tasks.Store, o.taskLease()/3
	b.sweepKeyrings.Store(o.Keyring.ID(), o.Keyring)
	start := !k.running && !k.released
	k.running = k.running || start
	k.mu.Unlock()
	if first {
		b.renewLeases(o.taskLease())
	}
	if start {
		go b.keepLease()
	}
	return k.boot
}

// keepLease renews the leases until the bridge closes, and sweeps the
// records every sweepEvery.
func (b *Bridge) keepLease() {
	k := b.leases
	sweep := time.Now().Add(sweepEvery / 10) // soon after start, then regularly
	for {
		k.mu.Lock()
		every := k.every
		k.mu.Unlock()
		select {
		case <-time.After(every):
			b.renewLeases(3 * every)
		case <-b.ctx.Done():
			return
		}
		if time.Now().After(sweep) {
			b.sweepRecords()
			sweep = time.Now().Add(sweepEvery)
		}
	}
}

// sweepEvery is how often an instance looks for the records of tasks
// whose ttl passed while no instance held them (their owner lost, and no
// client asked since): one instance of the fleet at a time (the storage's
// lock), at most maxSwept records per sweep.
const (
	sweepEvery = 5 * time.Minute
	maxSwept   = 10000
)

// leased returns the leases held: instance id -> storage.
func (k *leaseKeeper) leased() map[string]Storage {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.released {
		return nil
	}
	return maps.Clone(k.stores)
}

// sweepRecords deletes the records whose ttl passed.
func (b *Bridge) sweepRecords() {
	var krs []*seal.Keyring
	b.sweepKeyrings.Range(func(_, v any) bool {
		krs = append(krs, v.(*seal.Keyring))
		return true
	})
	if len(krs) == 0 {
		return
	}
	for _, store := range b.leases.leased() {
		b.sweep(store, krs)
	}
}

func (b *Bridge) sweep(store Storage, krs []*seal.Keyring) {
	ctx, cancel := context.WithTimeout(b.ctx, time.Minute)
	defer cancel()
	const lock = "mcp_gateway/tasks-sweep"
	release, err := lockStore(ctx, store, lock)
	if err != nil {
		return
	}
	defer release()
	keys, err := store.List(ctx, recordsPrefix, true)
	if err != nil {
		return
	}
	now := time.Now()
	for i, key := range keys {
		if i >= maxSwept || ctx.Err() != nil {
			return
		}
		sealed, err := store.Load(ctx, key)
		if err != nil {
			continue // a directory of file_system's, or gone meanwhile
		}
		rec, err := openAny(krs, sealed)
		if err != nil || now.Before(rec.Created.Add(rec.TTL)) {
			continue // another key's (kept for its own instances), or alive
		}
		_ = store.Delete(ctx, key)
	}
}

// renewLeases writes this instance's leases, valid for d from now.
func (b *Bridge) renewLeases(d time.Duration) {
	k := b.leases
	expires := time.Now().Add(d)
	ok := true
	for instance, store := range k.leased() {
		ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
		ok = store.Store(ctx, leaseKey(instance), []byte(lease{boot: k.boot, expires: expires}.String())) == nil && ok
		cancel()
	}
	k.mu.Lock()
	lost := !ok && !k.lost && !k.expires.IsZero() && !time.Now().Before(k.expires)
	switch {
	case ok:
		k.expires, k.lost = expires, false
	case lost:
		k.lost = true // once per lapse
	}
	k.mu.Unlock()
	if lost {
		b.leaseLost() // task_trace.go
	}
}

// leaseExpires is when this instance's lease ends unless renewed (zero:
// none written).
func (b *Bridge) leaseExpires() time.Time {
	k := b.leases
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.expires
}

// releaseLease marks this instance's leases released, so that other
// instances take its tasks over at once (graceful stop).
func (b *Bridge) releaseLease() {
	k := b.leases
	held := k.leased()
	k.mu.Lock()
	k.released = true
	k.mu.Unlock()
	for instance, store := range held {
		ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
		_ = store.Store(ctx, leaseKey(instance), []byte(lease{boot: k.boot}.String()))
		cancel()
	}
}

// Why a task's owner no longer holds its lease (ownerAlive), for the span
// of a takeover (traces.Lease).
const (
	leaseNone      = "none"      // no lease (never written, deleted, or malformed)
	leaseRestarted = "restarted" // renewed by another process of the instance id
	leaseReleased  = "released"  // released at a graceful stop
	leaseLapsed    = "lapsed"    // not renewed in time
	leaseOwn       = "own"       // the record is this instance id's (no lease read)
)

// ownerAlive reports whether rec's owner still holds its lease: the same
// process (boot) renewed it and has not released it. lost is "" when it
// does, for left, else why not (leaseNone, …).
func ownerAlive(ctx context.Context, store Storage, rec seal.TaskRecord, now time.Time) (lost string, left time.Duration, err error) {
	b, err := store.Load(ctx, leaseKey(rec.Owner))
	if errors.Is(err, fs.ErrNotExist) {
		return leaseNone, 0, nil
	}
	if err != nil {
		return leaseNone, 0, err
	}
	l, ok := parseLease(b)
	switch {
	case !ok:
		return leaseNone, 0, nil
	case l.boot != rec.Boot:
		return leaseRestarted, 0, nil
	case l.expires.IsZero():
		return leaseReleased, 0, nil
	case !now.Before(l.expires):
		return leaseLapsed, 0, nil
	}
	return "", l.expires.Sub(now), nil
}

// openAny opens a task record with the first of krs it opens under.
func openAny(krs []*seal.Keyring, sealed []byte) (rec seal.TaskRecord, err error) {
	for _, kr := range krs {
		if rec, err = seal.OpenTaskRecord(kr, sealed); err == nil {
			return rec, nil
		}
	}
	return rec, err
}
