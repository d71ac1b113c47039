package forward

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"time"
)

// TaskInfo describes one task the forward bridge holds, for operators
// (the admin API). It carries no taskId, principal, arguments or result:
// ID and Principal are short digests, salted per process, that tell tasks
// and principals apart without revealing either.
type TaskInfo struct {
	ID        string    `json:"id"`        // a digest of the task's handle, not its taskId
	Upstream  string    `json:"upstream"`  // the upstream's URL
	Tool      string    `json:"tool"`      // the tool's name
	Status    string    `json:"status"`    // working, input_required, completed, failed or cancelled
	Principal string    `json:"principal"` // a digest of the principal
	Waiting   int       `json:"waiting_inputs"`
	Created   time.Time `json:"created"`
	Expires   time.Time `json:"expires"` // the end of its ttl: then it is forgotten (cancelled if still running)
	TTLMillis int64     `json:"ttl_ms"`
	AgeMillis int64     `json:"age_ms"`
	// Owner is this instance's id, for a task whose record lives in the
	// task store (task_store), and LeaseExpires when its lease on the
	// task ends unless renewed: until then no other instance takes it
	// over. Both empty for a task kept in memory only.
	Owner        string     `json:"owner,omitempty"`
	LeaseExpires *time.Time `json:"lease_expires,omitempty"`
}

// snapshotSalt keys the digests of TaskInfo, so that a principal's digest
// cannot be matched against a guessed credential.
var snapshotSalt = func() (s [16]byte) {
	_, _ = rand.Read(s[:])
	return s
}()

// shortDigest is 12 hex digits of a salted digest of b.
func shortDigest(kind string, b [16]byte) string {
	h := sha256.New()
	h.Write(snapshotSalt[:])
	h.Write([]byte(kind))
	h.Write(b[:])
	return hex.EncodeToString(h.Sum(nil)[:6])
}

// TaskList lists the tasks the bridge holds, oldest first.
func (b *Bridge) TaskList() []TaskInfo {
	now := time.Now()
	all := b.allTasks()
	out := make([]TaskInfo, 0, len(all))
	lease := b.leaseExpires()
	for _, t := range all {
		info := t.info(now)
		if t.opts != nil && t.opts.Tasks.Store != nil && !lease.IsZero() {
			info.Owner, info.LeaseExpires = t.opts.Instance, &lease
		}
		out = append(out, info)
	}
	slices.SortFunc(out, func(x, y TaskInfo) int { return x.Created.Compare(y.Created) })
	return out
}

// info describes t for operators.
func (t *task) info(now time.Time) TaskInfo {
	t.mu.Lock()
	defer t.mu.Unlock()
	return TaskInfo{
		ID: shortDigest("task", t.handle), Upstream: t.upstream, Tool: t.tool, Status: t.status,
		Principal: shortDigest("principal", t.princ), Waiting: len(t.inputs),
		Created: t.born, Expires: t.born.Add(t.ttl), TTLMillis: t.ttl.Milliseconds(),
		AgeMillis: now.Sub(t.born).Milliseconds(),
	}
}
