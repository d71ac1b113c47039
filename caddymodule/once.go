package caddymodule

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/certmagic"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/caddymodule/face"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/seal"
)

// This file makes a face's token single use across the fleet
// (face.Gateway.UseOnce: a sagaToken, a turn's Last-Event-ID). A use is
// checked first in this process's memory (usedTokens); then, with
// state_key configured, it is checked and recorded in Caddy's configured
// storage, which every instance of a fleet shares, under the storage's
// lock of the token, before the face goes on:
//
//	mcp_gateway/once/<bucket>/<purpose>/<token id>   a use (the instance that made it)
//
// <bucket> is the end of the minute the token expires in (Unix seconds):
// a bucket is deleted whole once every token in it has expired, so that a
// sweep lists one level and reads no record.

const (
	oncePrefix = "mcp_gateway/once"
	// onceBucket is the width of a bucket.
	onceBucket = time.Minute
	// onceSweepEvery is how often expired buckets are looked for.
	onceSweepEvery = 5 * time.Minute
	// onceSkew is how long after its end a bucket is kept: an instance
	// whose clock is that much behind still finds the uses of the tokens
	// it still takes.
	onceSkew = time.Minute
	// onceTimeout bounds the record of a use (the lock included: a
	// file_system lock is polled every second).
	onceTimeout = 10 * time.Second
	// maxUsedTokens bounds the uses this process remembers (see
	// seal.ReplayFilter): beyond it, during a flood, a token older than
	// the window is left to the storage, or, without state_key, refused.
	maxUsedTokens = 1 << 17
)

// usedTokens are the token uses this process has seen: a replay on the
// same instance is refused without asking the storage. Process-wide, so
// that a config reload does not forget them.
var usedTokens = seal.NewReplayFilter(maxUsedTokens)

// onceStore records the faces' token uses in Caddy's storage.
type onceStore struct {
	storage  certmagic.Storage
	instance string
	logger   *zap.Logger
	life     context.Context // the config's: the sweeper's
	sweeper  sync.Once
}

// newOnceStore is the onceStore of h, or nil without state_key: tokens
// sealed with a key made at start do not cross instances, and this
// process's memory is enough.
func newOnceStore(ctx caddy.Context, h *Handler) *onceStore {
	if len(h.Fleet.StateKeys) == 0 {
		return nil
	}
	return &onceStore{storage: ctx.Storage(), instance: h.fleet.instance, logger: h.logger, life: ctx}
}

// UseOnce implements face.Gateway.
func (g faceGateway) UseOnce(ctx context.Context, purpose string, id [16]byte, expires time.Time) error {
	mem := sha256.Sum256(append([]byte(purpose+"\x00"), id[:]...))
	key := [16]byte(mem[:16])
	// A token this process may have forgotten (ErrReplayFloor, during a
	// flood) is the storage's to decide, when there is one.
	switch err := usedTokens.Use(key, expires, time.Now()); {
	case errors.Is(err, seal.ErrReplayed), err != nil && g.once == nil:
		return fmt.Errorf("%w (on this instance: %v)", face.ErrUsed, err)
	case g.once == nil:
		return nil
	}
	err := g.once.use(ctx, purpose, id, expires)
	if errors.Is(err, face.ErrUseUnrecorded) {
		usedTokens.Forget(key)
		g.once.logger.Warn("a token's use could not be recorded in the storage: its request is refused (503)",
			zap.String("purpose", purpose), zap.Error(err))
	}
	return err
}

// use checks and records the use of the token id of purpose in the
// storage, holding the token's lock. A use not recorded (ctx ended, the
// storage failed) leaves the token unused.
func (s *onceStore) use(ctx context.Context, purpose string, id [16]byte, expires time.Time) error {
	ctx, cancel := context.WithTimeout(ctx, onceTimeout)
	defer cancel()
	name := hex.EncodeToString(id[:])
	lock := "mcp_gateway_once_" + purpose + "_" + name
	if err := s.storage.Lock(ctx, lock); err != nil {
		return fmt.Errorf("%w: locking: %w", face.ErrUseUnrecorded, err)
	}
	defer func() {
		uctx, ucancel := context.WithTimeout(context.WithoutCancel(ctx), onceTimeout)
		defer ucancel()
		_ = s.storage.Unlock(uctx, lock)
	}()
	end := expires.Truncate(onceBucket).Add(onceBucket)
	key := path.Join(oncePrefix, strconv.FormatInt(end.Unix(), 10), purpose, name)
	switch _, err := s.storage.Load(ctx, key); {
	case err == nil:
		return fmt.Errorf("%w (recorded in the storage)", face.ErrUsed)
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%w: reading: %w", face.ErrUseUnrecorded, err)
	}
	if err := s.storage.Store(ctx, key, []byte(s.instance)); err != nil {
		return fmt.Errorf("%w: writing: %w", face.ErrUseUnrecorded, err)
	}
	s.sweeper.Do(func() { go s.sweep() })
	return nil
}

// sweep deletes the expired buckets every onceSweepEvery until the
// config ends. Every instance of a fleet sweeps; a bucket deleted twice
// is no harm.
func (s *onceStore) sweep() {
	defer func() {
		if p := recover(); p != nil {
			s.logger.Error("the sweeper of used tokens panicked", zap.Any("panic", p))
		}
	}()
	t := time.NewTicker(onceSweepEvery)
	defer t.Stop()
	for {
		select {
		case <-s.life.Done():
			return
		case now := <-t.C:
			if n, err := s.sweepOnce(s.life, now); err != nil {
				s.logger.Warn("sweeping expired token uses failed", zap.Int("buckets_deleted", n), zap.Error(err))
			}
		}
	}
}

// sweepOnce deletes the buckets whose tokens have all expired at now
// (onceSkew ago), and returns how many.
func (s *onceStore) sweepOnce(ctx context.Context, now time.Time) (int, error) {
	keys, err := s.storage.List(ctx, oncePrefix, false)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	n := 0
	for _, key := range keys {
		end, err := strconv.ParseInt(path.Base(key), 10, 64)
		if err != nil || now.Before(time.Unix(end, 0).Add(onceSkew)) {
			continue
		}
		if err := s.storage.Delete(ctx, key); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}
