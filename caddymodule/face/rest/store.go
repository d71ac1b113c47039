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
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/seal"
)

// This file keeps the REST face's call records in Caddy's storage:
//
//	mcp_gateway/rest/<principal hash>/calls/<tool>/<call id>   a call (seal.RESTCall)
//	mcp_gateway/rest/<principal hash>/roots                    the principal's roots
//
// Tool names and call ids are pathNames (a strict charset), so a key is
// never more than those components. Every read-modify-write of a record
// holds the storage's lock of its key (one holder across the fleet).

const (
	storePrefix = "mcp_gateway/rest"
	// storeTimeout bounds one storage operation (the lock included:
	// a file_system lock is polled every second).
	storeTimeout = 10 * time.Second
)

// callKey is the storage key of a call.
func callKey(princ [16]byte, tool, id pathName) string {
	return path.Join(storePrefix, hex.EncodeToString(princ[:]), "calls", string(tool), string(id))
}

// toolPrefix is the prefix of a principal's calls of a tool.
func toolPrefix(princ [16]byte, tool pathName) string {
	return path.Join(storePrefix, hex.EncodeToString(princ[:]), "calls", string(tool))
}

// rootsKey is the storage key of a principal's roots.
func rootsKey(princ [16]byte) string {
	return path.Join(storePrefix, hex.EncodeToString(princ[:]), "roots")
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

// load reads and opens the record at key: errNoRecord when there
// is none, or when it does not open (another key's, tampered), is not
// princ's, or has expired.
func (f *Face) load(ctx context.Context, key string, princ [16]byte, now time.Time) (seal.RESTCall, error) {
	b, err := f.storage.Load(ctx, key)
	if errors.Is(err, fs.ErrNotExist) {
		return seal.RESTCall{}, errNoRecord
	}
	if err != nil {
		return seal.RESTCall{}, fmt.Errorf("reading the call's record: %w", err)
	}
	c, err := seal.OpenRESTCall(f.gw.Keyring(), b)
	if err != nil || c.Principal != princ {
		return seal.RESTCall{}, errNoRecord
	}
	if f.expired(c, now) {
		return seal.RESTCall{}, errExpired
	}
	return c, nil
}

// expired reports whether c is past rest_call_ttl at now.
func (f *Face) expired(c seal.RESTCall, now time.Time) bool {
	return now.Sub(c.UpdatedAt()) > time.Duration(f.cfg.CallTTL)
}

// sweepEvery bounds how often expired records are looked for.
const sweepEvery = time.Hour

// sweep deletes the expired call records of every principal, every
// rest_call_ttl (at most hourly), until ctx ends. Every instance of a
// fleet sweeps; a record deleted twice is no harm.
func (f *Face) sweep(ctx context.Context) {
	defer func() {
		if p := recover(); p != nil {
			f.gw.Logger().Error("REST face: the sweeper panicked", zap.Any("panic", p))
		}
	}()
	t := time.NewTicker(min(time.Duration(f.cfg.CallTTL), sweepEvery))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			if n, err := f.sweepOnce(ctx, now); err != nil {
				f.gw.Logger().Warn("REST face: sweeping expired call records failed", zap.Int("deleted", n), zap.Error(err))
			}
		}
	}
}

// sweepOnce deletes the call records expired at now, and returns how
// many. A record that does not open (another key's) is left alone.
func (f *Face) sweepOnce(ctx context.Context, now time.Time) (int, error) {
	keys, err := f.storage.List(ctx, storePrefix, true)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	n := 0
	for _, key := range keys {
		if ctx.Err() != nil {
			return n, ctx.Err()
		}
		if path.Base(path.Dir(path.Dir(key))) != "calls" {
			continue // roots, or a folder
		}
		b, err := f.storage.Load(ctx, key)
		if err != nil {
			continue
		}
		c, err := seal.OpenRESTCall(f.gw.Keyring(), b)
		if err != nil || !f.expired(c, now) {
			continue
		}
		if err := f.storage.Delete(ctx, key); err == nil {
			n++
		}
	}
	return n, nil
}

// save seals and writes c at key.
func (f *Face) save(ctx context.Context, key string, c seal.RESTCall) error {
	b, err := seal.SealRESTCall(f.gw.Keyring(), c)
	if err != nil {
		return fmt.Errorf("sealing the call's record: %w", err)
	}
	if err := f.storage.Store(ctx, key, b); err != nil {
		return fmt.Errorf("writing the call's record: %w", err)
	}
	return nil
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

// end forgets the run of key.
func (t *runTable) end(key string, run *running) {
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
