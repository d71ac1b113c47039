package rest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/seal"
)

// This file keeps the REST face's call records in Caddy's storage:
//
//	mcp_gateway/rest/<principal>/calls/<tool>/<call id>   a call (seal.RESTCall)
//	mcp_gateway/rest/<principal>/roots                    the principal's roots
//
// <principal> is the principal's keyed name (seal.Keyring.PrincipalName):
// who can list the storage learns nothing to test guessed credentials
// against. Tool names and call ids are pathNames (a strict charset), so a
// key is never more than those components. A record is sealed for its key
// (a record moved or copied elsewhere does not open) and counts its
// writes (Version): this process refuses a record older than one it wrote
// or read (versions). Every read-modify-write of a record holds the
// storage's lock of its key (one holder across the fleet).

const (
	storePrefix = "mcp_gateway/rest"
	// storeTimeout bounds one storage operation, the lock included: it
	// outlasts a lock left by an instance killed while it held it (a
	// file_system lock goes stale 10 s after its holder's last sign of
	// life, and is polled every second), so that the instance taking a
	// dead instance's call over gets the lock rather than a 503.
	storeTimeout = 15 * time.Second
)

// principalDir is the folder of a principal's records.
func (f *Face) principalDir(princ [16]byte) string {
	return path.Join(storePrefix, f.gw.Keyring().PrincipalName(princ))
}

// callKey is the storage key of a call.
func (f *Face) callKey(princ [16]byte, tool, id pathName) string {
	return path.Join(f.principalDir(princ), "calls", string(tool), string(id))
}

// toolPrefix is the prefix of a principal's calls of a tool.
func (f *Face) toolPrefix(princ [16]byte, tool pathName) string {
	return path.Join(f.principalDir(princ), "calls", string(tool))
}

// rootsKey is the storage key of a principal's roots.
func (f *Face) rootsKey(princ [16]byte) string {
	return path.Join(f.principalDir(princ), "roots")
}

// keysBefore are where an older gateway (or another key of the keyring,
// before a rotation) kept what is now at key, a key under princ's
// folder: the same key under each of seal.Keyring.PrincipalNamesBefore.
func (f *Face) keysBefore(key string, princ [16]byte) []string {
	rest := strings.TrimPrefix(key, f.principalDir(princ))
	var keys []string
	for _, name := range f.gw.Keyring().PrincipalNamesBefore(princ) {
		keys = append(keys, path.Join(storePrefix, name)+rest)
	}
	return keys
}

// lockName is the storage lock of key: a hash, since storages
// flatten lock names (file_system drops '/' and lowercases).
func lockName(key string) string {
	sum := sha256.Sum256([]byte(key))
	return "mcp_gateway_rest_" + hex.EncodeToString(sum[:16])
}

// errNoRecord is a call without a record (or whose record is gone).
var errNoRecord = errors.New("no such call")

// errExpired is a record past rest_call_ttl (it wraps errNoRecord).
var errExpired = fmt.Errorf("%w: expired", errNoRecord)

// errRolledBack is a record older than one this process wrote or read
// at its key: the storage was written back (a restored backup, or
// someone who can write to it). It is refused as a storage failure.
var errRolledBack = errors.New("the call's record is older than one this instance wrote or read at its key (the storage was written back): refused")

// withLock runs fn holding the storage lock of key. The client's leaving
// does not cut it short (a record half made would make the client's retry
// run its call again): storeTimeout bounds it.
func (f *Face) withLock(ctx context.Context, key string, fn func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
	defer cancel()
	name := lockName(key)
	if err := f.storage.Lock(ctx, name); err != nil {
		return fmt.Errorf("locking the call's record: %w", err)
	}
	defer func() {
		uctx, ucancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
		defer ucancel()
		_ = f.storage.Unlock(uctx, name)
	}()
	return fn(ctx)
}

// withRecord runs fn on the record at key as it reads at now (seen),
// holding the record's lock (withLock); found is false, and fn not run,
// when there is no record (errNoRecord).
func (f *Face) withRecord(ctx context.Context, key string, princ [16]byte, now time.Time, fn func(ctx context.Context, cur seal.RESTCall) error) (found bool, err error) {
	err = f.withLock(ctx, key, func(sctx context.Context) error {
		cur, err := f.load(sctx, key, princ, now)
		if errors.Is(err, errNoRecord) {
			return nil
		}
		if err != nil {
			return err
		}
		found = true
		return fn(sctx, seen(cur, now))
	})
	return found, err
}

// load reads and opens the record at key, for a caller that holds the
// key's lock: errNoRecord when there is none, or when it does not open
// (another key's or place's, tampered), is not princ's, or has expired.
// A record found where an older gateway kept it is moved to key.
func (f *Face) load(ctx context.Context, key string, princ [16]byte, now time.Time) (seal.RESTCall, error) {
	c, from, err := f.find(ctx, key, princ)
	if err == nil && from != key {
		if err = f.save(ctx, key, c); err == nil {
			_ = f.storage.Delete(ctx, from)
		}
	}
	return f.live(c, err, now)
}

// peek is load for a caller that holds no lock: a record found where an
// older gateway kept it is left there (the next change moves it).
func (f *Face) peek(ctx context.Context, key string, princ [16]byte, now time.Time) (seal.RESTCall, error) {
	c, _, err := f.find(ctx, key, princ)
	return f.live(c, err, now)
}

// live is the record c find returned with err, as load answers it.
func (f *Face) live(c seal.RESTCall, err error, now time.Time) (seal.RESTCall, error) {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return seal.RESTCall{}, errNoRecord
	case err != nil:
		return seal.RESTCall{}, err
	case f.expired(c, now):
		return seal.RESTCall{}, errExpired
	}
	return c, nil
}

// find reads the record at key, or else where an older gateway kept it
// (keysBefore), and says where it was: fs.ErrNotExist when nowhere.
func (f *Face) find(ctx context.Context, key string, princ [16]byte) (seal.RESTCall, string, error) {
	c, err := f.read(ctx, key, princ, false)
	if !errors.Is(err, fs.ErrNotExist) {
		return c, key, err
	}
	for _, old := range f.keysBefore(key, princ) {
		if c, err := f.read(ctx, old, princ, true); !errors.Is(err, fs.ErrNotExist) {
			return c, old, err
		}
	}
	return seal.RESTCall{}, "", err
}

// read reads and opens the record at key: an error wrapping
// fs.ErrNotExist when there is none, errNoRecord when it does not open
// for key or is not princ's, errRolledBack when it is older than one this
// process saw there. old also opens a record of an older gateway's
// format (bound to no key).
func (f *Face) read(ctx context.Context, key string, princ [16]byte, old bool) (seal.RESTCall, error) {
	b, err := f.storage.Load(ctx, key)
	if err != nil {
		return seal.RESTCall{}, fmt.Errorf("reading the call's record: %w", err)
	}
	c, err := seal.OpenRESTCall(f.gw.Keyring(), key, b)
	if err != nil && old {
		c, err = seal.OpenRESTCallV1(f.gw.Keyring(), b)
	}
	if err != nil || c.Principal != princ {
		return seal.RESTCall{}, errNoRecord
	}
	if c.Version < versions.note(key, c.Version) {
		return seal.RESTCall{}, errRolledBack
	}
	return c, nil
}

// expired reports whether c is past rest_call_ttl at now.
func (f *Face) expired(c seal.RESTCall, now time.Time) bool {
	return now.Sub(c.UpdatedAt()) > time.Duration(f.cfg.CallTTL)
}

// save seals and writes c at key, one version past both c's and the
// newest this process saw there.
func (f *Face) save(ctx context.Context, key string, c seal.RESTCall) error {
	c.Version = max(c.Version, versions.newest(key)) + 1
	b, err := seal.SealRESTCall(f.gw.Keyring(), key, c)
	if err != nil {
		return fmt.Errorf("sealing the call's record: %w", err)
	}
	if err := f.storage.Store(ctx, key, b); err != nil {
		return fmt.Errorf("writing the call's record: %w", err)
	}
	versions.note(key, c.Version)
	f.usage.wrote(c.Principal, int64(len(b)))
	return nil
}

// versionTable is the newest version of the records this process wrote
// or read, by key: bounded (the least recently used are forgotten), so
// a record written back is refused by the instances that saw a newer
// one lately.
type versionTable struct {
	mu sync.Mutex
	c  *lru.Cache[string, uint64]
}

// versions are this process's versionTable.
var versions = func() *versionTable {
	c, _ := lru.New[string, uint64](1 << 16)
	return &versionTable{c: c}
}()

// newest is the newest version seen at key (0: none).
func (t *versionTable) newest(key string) uint64 {
	v, _ := t.c.Peek(key)
	return v
}

// note records version v seen at key and returns the newest seen there.
func (t *versionTable) note(key string, v uint64) uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	if old, ok := t.c.Get(key); ok && old >= v {
		return old
	}
	t.c.Add(key, v)
	return v
}

// newETag is a new random entity tag (16 hex digits).
func newETag() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// running is a call running on this instance.
type running struct {
	princ    [16]byte
	cancel   context.CancelCauseFunc
	progress progress // the call's last progress (rpc.go)
	task     taskRef  // the task it follows (carry.go)
	untrack  func()   // ends its tracking by the gateway (Track)
}

// runTable is the calls running on this instance: process-wide, so
// that a reload neither forgets nor double counts them.
type runTable struct {
	mu     sync.Mutex
	runs   map[string]*running
	counts map[[16]byte]int
}

// runs are this process's running calls.
var runs = &runTable{runs: make(map[string]*running), counts: make(map[[16]byte]int)}

// errBusy: the principal has too many calls running here.
var errBusy = errors.New("too many calls running for this principal")

// start registers the run of key, or refuses it when the principal is at
// max (errBusy) or the call runs here already.
func (t *runTable) start(key string, run *running, max int) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.runs[key]; ok {
		return errors.New("the call is running already")
	}
	if t.counts[run.princ] >= max {
		return errBusy
	}
	t.runs[key] = run
	t.counts[run.princ]++
	return nil
}

// end forgets the run of key, its record written.
func (t *runTable) end(key string, run *running) {
	if run.untrack != nil {
		run.untrack()
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.runs[key] != run {
		return
	}
	delete(t.runs, key)
	if t.counts[run.princ]--; t.counts[run.princ] <= 0 {
		delete(t.counts, run.princ)
	}
}

// stop cancels the run of key, if it runs here, and reports whether it
// does.
func (t *runTable) stop(key string, cause error) bool {
	t.mu.Lock()
	run := t.runs[key]
	t.mu.Unlock()
	if run != nil {
		run.cancel(cause)
	}
	return run != nil
}
