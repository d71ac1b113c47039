package rest

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"path"
	"sync"
	"time"

	"github.com/dustin/go-humanize"
	lru "github.com/hashicorp/golang-lru/v2"
	"go.uber.org/zap"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/seal"
)

// This file bounds what the face keeps in the storage and sweeps what
// expired. A new call is admitted against its principal's records and
// against the whole store's, both estimates: a principal's is counted from
// the storage's names and sizes (Stat, no record read) when it is older
// than recountEvery or past half its bounds, the store's by the sweeper
// every minute; each plus this instance's writes since. The sweeper reads
// only the records whose last write is older than rest_call_ttl.

const (
	// censusEvery is how often each instance counts the records and
	// deletes the expired ones (at most every rest_call_ttl).
	censusEvery = time.Minute
	// recountEvery is how long a principal's count is trusted while it is
	// under half its bounds; past half, it is counted at every new call.
	recountEvery = 10 * time.Second
	// countedPrincipals bounds the principals whose counts are kept.
	countedPrincipals = 4096
)

// fullError refuses a new record: its status (429, 507) and why.
type fullError struct {
	status int
	detail string
}

func (e *fullError) Error() string { return e.detail }

// counted is an estimate of records and their bytes, and when it was
// last counted from the storage.
type counted struct {
	records int
	bytes   int64
	at      time.Time
}

// usage is this instance's estimates of the records kept: the store's
// (the last census plus what this instance wrote since) and the
// principals' lately counted (likewise).
type usage struct {
	mu         sync.Mutex
	store      counted
	principals *lru.Cache[[16]byte, counted]
}

func newUsage() *usage {
	c, _ := lru.New[[16]byte, counted](countedPrincipals)
	return &usage{principals: c}
}

// set makes the store's estimate the census's.
func (u *usage) set(records int, bytes int64) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.store = counted{records: records, bytes: bytes}
}

// wrote counts a write of n bytes of princ's as growth (until the next
// count).
func (u *usage) wrote(princ [16]byte, n int64) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.store.bytes += n
	if c, ok := u.principals.Peek(princ); ok {
		c.bytes += n
		u.principals.Add(princ, c)
	}
}

// freeing says what frees room in the store.
func (f *Face) freeing() string {
	return "DELETE finished calls (GET …/tools/{tool}/calls lists them), or wait: a record is deleted rest_call_ttl (" +
		time.Duration(f.cfg.CallTTL).String() + ") after its last change"
}

// admitStore refuses (507) a new record of size bytes when the store's
// estimate is at rest_max_records or would pass rest_max_bytes, and
// counts it otherwise.
func (f *Face) admitStore(size int64) *fullError {
	f.usage.mu.Lock()
	defer f.usage.mu.Unlock()
	st := f.usage.store
	if st.records+1 > f.cfg.MaxRecords || st.bytes+size > f.cfg.MaxBytes {
		return &fullError{http.StatusInsufficientStorage, fmt.Sprintf(
			"the gateway's store of REST records is full (about %d records and %s; rest_max_records %d, rest_max_bytes %s): %s",
			st.records, humanize.IBytes(uint64(max(st.bytes, 0))), f.cfg.MaxRecords, humanize.IBytes(uint64(f.cfg.MaxBytes)), f.freeing())}
	}
	f.usage.store.records++
	return nil
}

// admit refuses a new call of princ whose arguments are size bytes: 429
// when the principal's records are at rest_max_records_per_principal or
// would pass rest_max_bytes_per_principal, else 507 when the store is
// full (admitStore).
func (f *Face) admit(ctx context.Context, princ [16]byte, size int64, now time.Time) error {
	u := f.usage
	u.mu.Lock()
	c, ok := u.principals.Get(princ)
	u.mu.Unlock()
	if !ok || now.Sub(c.at) > recountEvery || c.records > f.cfg.MaxRecordsPerPrincipal/2 || c.bytes > f.cfg.MaxBytesPerPrincipal/2 {
		records, bytes, err := f.count(ctx, path.Join(f.principalDir(princ), "calls"), now)
		if err != nil {
			return fmt.Errorf("counting the principal's call records: %w", err)
		}
		c = counted{records: records, bytes: bytes, at: now}
	}
	if c.records+1 > f.cfg.MaxRecordsPerPrincipal || c.bytes+size > f.cfg.MaxBytesPerPrincipal {
		return &fullError{http.StatusTooManyRequests, fmt.Sprintf(
			"you keep %d call records of %s here (rest_max_records_per_principal %d, rest_max_bytes_per_principal %s): %s",
			c.records, humanize.IBytes(uint64(c.bytes)), f.cfg.MaxRecordsPerPrincipal, humanize.IBytes(uint64(f.cfg.MaxBytesPerPrincipal)), f.freeing())}
	}
	if full := f.admitStore(size); full != nil {
		return full
	}
	c.records++
	u.mu.Lock()
	u.principals.Add(princ, c)
	u.mu.Unlock()
	return nil
}

// count counts the records under prefix, and their bytes, from the
// storage's names and sizes: a record whose last write is older than
// rest_call_ttl is not counted (it has expired).
func (f *Face) count(ctx context.Context, prefix string, now time.Time) (int, int64, error) {
	keys, err := f.storage.List(ctx, prefix, true)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, err
	}
	records, bytes := 0, int64(0)
	for _, key := range keys {
		st, err := f.storage.Stat(ctx, key)
		if err != nil || !st.IsTerminal || f.stale(st.Modified, now) {
			continue // a folder, gone meanwhile, or expired
		}
		records++
		bytes += st.Size
	}
	return records, bytes, nil
}

// stale reports whether a record last written at modified (by the
// storage's clock; zero when the storage does not say) is surely past
// rest_call_ttl at now: its Updated is no later than its write.
func (f *Face) stale(modified, now time.Time) bool {
	return !modified.IsZero() && now.Sub(modified) > time.Duration(f.cfg.CallTTL)
}

// sweep counts the records (usage) and deletes the expired ones, at once
// and then every censusEvery (at most every rest_call_ttl), until ctx
// ends. Every instance of a fleet sweeps; a record deleted twice is no
// harm.
func (f *Face) sweep(ctx context.Context) {
	defer func() {
		if p := recover(); p != nil {
			f.gw.Logger().Error("REST face: the sweeper panicked", zap.Any("panic", p))
		}
	}()
	t := time.NewTicker(min(time.Duration(f.cfg.CallTTL), censusEvery))
	defer t.Stop()
	for now := time.Now(); ; {
		if n, err := f.sweepOnce(ctx, now); err != nil {
			f.gw.Logger().Warn("REST face: sweeping expired call records failed", zap.Int("deleted", n), zap.Error(err))
		}
		select {
		case <-ctx.Done():
			return
		case now = <-t.C:
		}
	}
}

// sweepOnce counts the records at now into usage and deletes the call
// records expired then, and returns how many. Only a record whose last
// write is older than rest_call_ttl is read; one that does not open
// (another key's) is left alone.
func (f *Face) sweepOnce(ctx context.Context, now time.Time) (int, error) {
	keys, err := f.storage.List(ctx, storePrefix, true)
	if errors.Is(err, fs.ErrNotExist) {
		f.usage.set(0, 0)
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	n, records, bytes := 0, 0, int64(0)
	for _, key := range keys {
		if ctx.Err() != nil {
			return n, ctx.Err()
		}
		st, err := f.storage.Stat(ctx, key)
		if err != nil || !st.IsTerminal {
			continue // a folder, or gone meanwhile
		}
		if path.Base(path.Dir(path.Dir(key))) == "calls" && f.stale(st.Modified, now) && f.sweepRecord(ctx, key, now) {
			n++
			continue
		}
		records++
		bytes += st.Size
	}
	f.usage.set(records, bytes)
	return n, nil
}

// sweepRecord deletes the call record at key if it opens and expired at
// now, and reports whether it did.
func (f *Face) sweepRecord(ctx context.Context, key string, now time.Time) bool {
	b, err := f.storage.Load(ctx, key)
	if err != nil {
		return false
	}
	c, err := seal.OpenRESTCall(f.gw.Keyring(), key, b)
	if err != nil {
		c, err = seal.OpenRESTCallV1(f.gw.Keyring(), b) // an older gateway's
	}
	return err == nil && f.expired(c, now) && f.storage.Delete(ctx, key) == nil
}
