package caddymodule

import (
	"context"
	"crypto/rand"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/caddyserver/certmagic"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/caddymodule/face"
)

// testOnceStore is a onceStore on storage, as instance.
func testOnceStore(t testing.TB, storage certmagic.Storage, instance string) *onceStore {
	return &onceStore{storage: storage, instance: instance, logger: zap.NewNop(), life: t.Context()}
}

// randomID is a fresh token id.
func randomID(t testing.TB) [16]byte {
	var id [16]byte
	if _, err := rand.Read(id[:]); err != nil {
		t.Fatal(err)
	}
	return id
}

// downStorage is a storage whose lock fails, as one unreachable.
type downStorage struct{ certmagic.Storage }

func (downStorage) Lock(context.Context, string) error { return errors.New("storage unreachable") }

// TestOnceAcrossInstances: instances sharing a file_system storage use a
// token once between them, whoever comes first, however many race; the
// same id under another purpose is another token.
func TestOnceAcrossInstances(t *testing.T) {
	storage := &certmagic.FileStorage{Path: t.TempDir()}
	exp := time.Now().Add(time.Minute)
	id := randomID(t)
	if err := testOnceStore(t, storage, "a").use(t.Context(), "saga", id, exp); err != nil {
		t.Fatalf("the first use: %v", err)
	}
	if err := testOnceStore(t, storage, "b").use(t.Context(), "saga", id, exp); !errors.Is(err, face.ErrUsed) {
		t.Fatalf("the use on another instance: %v, want ErrUsed", err)
	}
	if err := testOnceStore(t, storage, "b").use(t.Context(), "turn", id, exp); err != nil {
		t.Fatalf("the id under another purpose: %v", err)
	}

	race := randomID(t)
	var wins, used atomic.Int32
	var wg sync.WaitGroup
	for i := range 6 {
		s := testOnceStore(t, storage, string(rune('a'+i)))
		wg.Go(func() {
			switch err := s.use(t.Context(), "saga", race, exp); {
			case err == nil:
				wins.Add(1)
			case errors.Is(err, face.ErrUsed):
				used.Add(1)
			default:
				t.Errorf("a racing use: %v", err)
			}
		})
	}
	wg.Wait()
	if wins.Load() != 1 || used.Load() != 5 {
		t.Fatalf("6 racing uses: %d won, %d found it used", wins.Load(), used.Load())
	}
}

// TestUseOnceStorageDown: a use the storage cannot record is refused with
// ErrUseUnrecorded and leaves the token unused, here too, so that it is
// taken once the storage is back; then it is used, on this instance and
// across the fleet. Without state_key, this instance's memory decides.
func TestUseOnceStorageDown(t *testing.T) {
	storage := &certmagic.FileStorage{Path: t.TempDir()}
	id, exp := randomID(t), time.Now().Add(time.Minute)
	down := faceGateway{once: testOnceStore(t, downStorage{storage}, "a")}
	if err := down.UseOnce(t.Context(), "saga", id, exp); !errors.Is(err, face.ErrUseUnrecorded) {
		t.Fatalf("storage down: %v, want ErrUseUnrecorded", err)
	}
	up := faceGateway{once: testOnceStore(t, storage, "a")}
	if err := up.UseOnce(t.Context(), "saga", id, exp); err != nil {
		t.Fatalf("storage back: %v", err)
	}
	if err := up.UseOnce(t.Context(), "saga", id, exp); !errors.Is(err, face.ErrUsed) {
		t.Fatalf("used here: %v, want ErrUsed", err)
	}
	if err := testOnceStore(t, storage, "b").use(t.Context(), "saga", id, exp); !errors.Is(err, face.ErrUsed) {
		t.Fatalf("used on another instance: %v, want ErrUsed", err)
	}

	mem, other := faceGateway{}, randomID(t)
	if err := mem.UseOnce(t.Context(), "turn", other, exp); err != nil {
		t.Fatalf("without state_key: %v", err)
	}
	if err := mem.UseOnce(t.Context(), "turn", other, exp); !errors.Is(err, face.ErrUsed) {
		t.Fatalf("without state_key, again: %v, want ErrUsed", err)
	}
}

// TestOnceSweep: a sweep deletes the buckets whose tokens have all
// expired (onceSkew ago) and keeps the others, whose tokens stay used.
func TestOnceSweep(t *testing.T) {
	storage := &certmagic.FileStorage{Path: t.TempDir()}
	s := testOnceStore(t, storage, "a")
	if n, err := s.sweepOnce(t.Context(), time.Now()); n != 0 || err != nil {
		t.Fatalf("nothing stored yet: %d, %v", n, err)
	}
	now := time.Now()
	old, live := randomID(t), randomID(t)
	if err := s.use(t.Context(), "saga", old, now.Add(-2*time.Minute-onceSkew)); err != nil {
		t.Fatal(err)
	}
	if err := s.use(t.Context(), "saga", live, now.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if n, err := s.sweepOnce(t.Context(), now); n != 1 || err != nil {
		t.Fatalf("swept %d buckets (%v), want the expired one", n, err)
	}
	if err := s.use(t.Context(), "saga", live, now.Add(time.Minute)); !errors.Is(err, face.ErrUsed) {
		t.Fatalf("a live token after the sweep: %v, want ErrUsed", err)
	}
	if err := s.use(t.Context(), "saga", old, now.Add(-2*time.Minute-onceSkew)); err != nil {
		t.Fatalf("the expired token's use was not deleted: %v", err)
	}
}

// BenchmarkUseOnce is the cost of a token's use: with state_key, recorded
// in a file_system storage (lock, read, write, unlock) after the
// in-process check; without, the in-process check alone. It is what a
// saga resume or a turn's answers pay before the retry goes out.
func BenchmarkUseOnce(b *testing.B) {
	exp := time.Now().Add(5 * time.Minute)
	for _, c := range []struct {
		name string
		gw   faceGateway
	}{
		{"file_system", faceGateway{once: testOnceStore(b, &certmagic.FileStorage{Path: b.TempDir()}, "a")}},
		{"no_state_key", faceGateway{}},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				exp = exp.Add(time.Microsecond) // each fresher: the in-process filter stays open
				if err := c.gw.UseOnce(b.Context(), "saga", randomID(b), exp); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
