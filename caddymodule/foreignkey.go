package caddymodule

import (
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// A session id, requestState or taskId sealed under a key this instance
// lacks is refused as any invalid one is (404 Session not found, 400
// requestState not valid, 400 unknown taskId): the client learns nothing
// more. The operator is told, at
// warn and at most once per foreignKeyEvery per kind, since it is most
// often a fleet whose instances do not share state_key, or an instance
// that restarted with no state_key. No token is logged.

// foreignKeyEvery is the least time between two such lines of one kind.
const foreignKeyEvery = 10 * time.Second

// The kinds of token told apart in the log (field "kind").
const (
	foreignSessionID    = "session_id"
	foreignRequestState = "request_state"
	foreignTaskID       = "task_id"
)

// foreignKinds name each kind in the log line and hold its limiter; they
// are process-wide, so that a reload does not reset them.
var foreignKinds = map[string]struct {
	what string
	seen *everyLimiter
}{
	foreignSessionID:    {"a session id", &everyLimiter{every: foreignKeyEvery}},
	foreignRequestState: {"a requestState", &everyLimiter{every: foreignKeyEvery}},
	foreignTaskID:       {"a taskId", &everyLimiter{every: foreignKeyEvery}},
}

// warnForeignKey logs, rate-limited, that a token of kind was sealed under
// a key this instance lacks.
func (h *Handler) warnForeignKey(kind string) {
	k := foreignKinds[kind]
	ok, skipped := k.seen.allow(time.Now())
	if !ok {
		return
	}
	h.logger.Warn(k.what+" sealed under a key this instance lacks was refused: every instance of a fleet must share state_key "+
		"(and one with no state_key opens nothing sealed before it restarted)",
		zap.String("kind", kind), zap.Int64("not_logged_since_last_line", skipped))
}

// everyLimiter allows one event per period and counts the others.
type everyLimiter struct {
	every   time.Duration
	last    atomic.Int64 // UnixNano of the last allowed event, 0 for none
	skipped atomic.Int64 // events not allowed since
}

// allow reports whether an event at now may be logged and, if so, how many
// were not since the last one that was.
func (l *everyLimiter) allow(now time.Time) (bool, int64) {
	for {
		last := l.last.Load()
		if last != 0 && now.UnixNano()-last < int64(l.every) {
			l.skipped.Add(1)
			return false, 0
		}
		if l.last.CompareAndSwap(last, now.UnixNano()) {
			return true, l.skipped.Swap(0)
		}
	}
}
