package caddymodule

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
// Tool names and call ids are restNames (a strict charset), so a key is
// never more than those components. Every read-modify-write of a record
// holds the storage's lock of its key (one holder across the fleet).

const (
	restPrefix = "mcp_gateway/rest"
	// restStoreTimeout bounds one storage operation (the lock included:
	// a file_system lock is polled every second).
	restStoreTimeout = 10 * time.Second
)

// restCallKey is the storage key of a call.
func restCallKey(princ [16]byte, tool, id restName) string {
	return path.Join(restPrefix, hex.EncodeToString(princ[:]), "calls", string(tool), string(id))
}

// restToolPrefix is the prefix of a principal's calls of a tool.
func restToolPrefix(princ [16]byte, tool restName) string {
	return path.Join(restPrefix, hex.EncodeToString(princ[:]), "calls", string(tool))
}

// restRootsKey is the storage key of a principal's roots.
func restRootsKey(princ [16]byte) string {
	return path.Join(restPrefix, hex.EncodeToString(princ[:]), "roots")
}

// restLockName is the storage lock of key: a hash, since storages
// flatten lock names (file_system drops '/' and lowercases).
func restLockName(key string) string {
	sum := sha256.Sum256([]byte(key))
	return "mcp_gateway_rest_" + hex.EncodeToString(sum[:16])
}

// errRESTNoRecord is a call without a record (or whose record is gone).
var errRESTNoRecord = errors.New("no such call")

// errRESTExpired is a record past rest_call_ttl (it wraps errRESTNoRecord).
var errRESTExpired = fmt.Errorf("%w: expired", errRESTNoRecord)

// withLock runs f holding the storage lock of key. The client's leaving
// does not cut it short (a record half made would make the client's retry
// run its call again): restStoreTimeout bounds it.
func (f *restFace) withLock(ctx context.Context, key string, fn func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), restStoreTimeout)
	defer cancel()
	name := restLockName(key)
	if err := f.storage.Lock(ctx, name); err != nil {
		return fmt.Errorf("locking the call's record: %w", err)
	}
	defer func() {
		uctx, ucancel := context.WithTimeout(context.WithoutCancel(ctx), restStoreTimeout)
		defer ucancel()
		_ = f.storage.Unlock(uctx, name)
	}()
	return fn(ctx)
}

// restLoad reads and opens the record at key: errRESTNoRecord when there
// is none, or when it does not open (another key's, tampered), is not
// princ's, or has expired.
func (h *Handler) restLoad(ctx context.Context, key string, princ [16]byte, now time.Time) (seal.RESTCall, error) {
	b, err := h.rest.storage.Load(ctx, key)
	if errors.Is(err, fs.ErrNotExist) {
		return seal.RESTCall{}, errRESTNoRecord
	}
	if err != nil {
		return seal.RESTCall{}, fmt.Errorf("reading the call's record: %w", err)
	}
	c, err := seal.OpenRESTCall(h.keyring, b)
	if err != nil || c.Principal != princ {
		return seal.RESTCall{}, errRESTNoRecord
	}
	if h.restExpired(c, now) {
		return seal.RESTCall{}, errRESTExpired
	}
	return c, nil
}

// restExpired reports whether c is past rest_call_ttl at now.
func (h *Handler) restExpired(c seal.RESTCall, now time.Time) bool {
	return now.Sub(c.UpdatedAt()) > time.Duration(h.REST.CallTTL)
}

// restSweepEvery bounds how often expired records are looked for.
const restSweepEvery = time.Hour

// restSweep deletes the expired call records of every principal, every
// rest_call_ttl (at most hourly), until ctx ends. Every instance of a
// fleet sweeps; a record deleted twice is no harm.
func (h *Handler) restSweep(ctx context.Context) {
	defer func() {
		if p := recover(); p != nil {
			h.logger.Error("REST face: the sweeper panicked", zap.Any("panic", p))
		}
	}()
	t := time.NewTicker(min(time.Duration(h.REST.CallTTL), restSweepEvery))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			if n, err := h.restSweepOnce(ctx, now); err != nil {
				h.logger.Warn("REST face: sweeping expired call records failed", zap.Int("deleted", n), zap.Error(err))
			}
		}
	}
}

// restSweepOnce deletes the call records expired at now, and returns how
// many. A record that does not open (another key's) is left alone.
func (h *Handler) restSweepOnce(ctx context.Context, now time.Time) (int, error) {
	keys, err := h.rest.storage.List(ctx, restPrefix, true)
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
		b, err := h.rest.storage.Load(ctx, key)
		if err != nil {
			continue
		}
		c, err := seal.OpenRESTCall(h.keyring, b)
		if err != nil || !h.restExpired(c, now) {
			continue
		}
		if err := h.rest.storage.Delete(ctx, key); err == nil {
			n++
		}
	}
	return n, nil
}

// restSave seals and writes c at key.
func (h *Handler) restSave(ctx context.Context, key string, c seal.RESTCall) error {
	b, err := seal.SealRESTCall(h.keyring, c)
	if err != nil {
		return fmt.Errorf("sealing the call's record: %w", err)
	}
	if err := h.rest.storage.Store(ctx, key, b); err != nil {
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

// restRun is a call running on this instance.
type restRun struct {
	princ    [16]byte
	cancel   context.CancelCauseFunc
	progress restProgress // the call's last progress (rest_progress.go)
}

// restRunTable is the calls running on this instance: process-wide, so
// that a reload neither forgets nor double counts them.
type restRunTable struct {
	mu     sync.Mutex
	runs   map[string]*restRun
	counts map[[16]byte]int
}

var restRuns = &restRunTable{runs: make(map[string]*restRun), counts: make(map[[16]byte]int)}

// errRESTBusy: the principal has too many calls running here.
var errRESTBusy = errors.New("too many calls running for this principal")

// start registers the run of key, or refuses it when the principal is at
// max (errRESTBusy) or the call runs here already.
func (t *restRunTable) start(key string, run *restRun, max int) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.runs[key]; ok {
		return errors.New("the call is running already")
	}
	if t.counts[run.princ] >= max {
		return errRESTBusy
	}
	t.runs[key] = run
	t.counts[run.princ]++
	return nil
}

// end forgets the run of key.
func (t *restRunTable) end(key string, run *restRun) {
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
func (t *restRunTable) stop(key string, cause error) bool {
	t.mu.Lock()
	run := t.runs[key]
	t.mu.Unlock()
	if run != nil {
		run.cancel(cause)
	}
	return run != nil
}
