package seal

import (
	"errors"
	"fmt"
)

// This file is the codec of the taskId the forward bridge hands to a modern
// client when it turns a legacy call into a task (the Tasks extension,
// io.modelcontextprotocol/tasks). Like a requestState, the taskId names its
// owner (the instance holding the upstream call, and its advertised
// address, so that another instance of a fleet forwards tasks/get,
// tasks/update and tasks/cancel there) and the principal the task belongs
// to; it is sealed, so a client can neither read nor forge one. How long a
// task lives is the owner's table's business, not the token's. It may name
// the span of the call that created the task (Task.Trace), so that the
// task's later requests, on any instance, link to it.

// taskPurpose separates taskIds from every other sealed token.
const taskPurpose Purpose = "mcp-gateway/task/v1"

// taskVersion is the first byte of the sealed plaintext; task2025Version
// that of a taskId wrapping a task of the upstream's own (2025 experimental
// tasks: Task.Upstream and Task.Session set). taskTraceVersion and
// task2025TraceVersion are the same with a Trace after them: a taskId
// without one is sealed byte for byte as before it existed, so that
// instances of an older release open it.
const (
	taskVersion          = 1
	task2025Version      = 2
	taskTraceVersion     = 3
	task2025TraceVersion = 4
)

// traceSize is the length of a sealed TraceRef.
const traceSize = 16 + 8 + 1

// MaxUpstreamTaskLen bounds Task.Upstream and Task.Session.
const MaxUpstreamTaskLen = 255

// maxTaskToken bounds the length of a taskId OpenTask will try to open:
// the largest (255-byte instance, address, upstream task id and session,
// and a trace) is 1083 bytes, sealed 1116, 1488 characters in base64url.
const maxTaskToken = 1536

// ErrTaskInvalid means a taskId did not open or is malformed: tampered,
// truncated, sealed under an unknown key or for another purpose, or not
// one of the gateway's at all. It comes wrapped together with
// ErrUnsealable.
var ErrTaskInvalid = errors.New("seal: invalid taskId")

// Task is what a taskId carries.
type Task struct {
	// Instance is the id of the gateway instance that holds the task (at
	// most MaxInstanceLen bytes).
	Instance string
	// Address is the owner's advertised base URL ("" for none; at most
	// MaxAddressLen bytes).
	Address string
	// Handle is the task's handle in the owner's table.
	Handle [16]byte
	// Principal is the hash of the principal whose call the task is
	// (translate.PrincipalHash).
	Principal [16]byte
	// Upstream is the upstream's own taskId, for a task of an upstream
	// with 2025 experimental tasks ("" for a task the gateway hosts; at
	// most MaxUpstreamTaskLen bytes).
	Upstream string
	// Session is the upstream session the task lives on (its tasks are
	// visible on that session only); set with Upstream.
	Session string
	// Trace names the span of the call that created the task (zero for
	// none: no tracing, and no traceparent from the client).
	Trace TraceRef
}

// Plaintext layout:
//
//	version(1) | len(instance)(1) | instance | len(address)(1) | address | handle(16) | principal(16)
//
// and for version 2, after those:
//
//	len(upstream)(1) | upstream | len(session)(1) | session
//
// and for versions 3 (1 with a trace) and 4 (2 with a trace), after those:
//
//	traceID(16) | spanID(8) | flags(1)

var errMalformedTask = errors.New("malformed taskId")

// SealTask seals t into a taskId: a URL-safe string of about 100
// characters plus 4/3 of len(t.Instance)+len(t.Address). It panics if
// t.Instance or t.Address is too long (configuration errors the caller
// rejects earlier, as for SealState), or t.Upstream or t.Session (the
// caller bounds what an upstream sends before it seals it).
func SealTask(kr *Keyring, t Task) string {
	if len(t.Instance) > MaxInstanceLen || len(t.Address) > MaxAddressLen {
		panic("seal: Task.Instance or Task.Address too long")
	}
	if len(t.Upstream) > MaxUpstreamTaskLen || len(t.Session) > MaxUpstreamTaskLen {
		panic("seal: Task.Upstream or Task.Session too long")
	}
	version := byte(taskVersion)
	if t.Upstream != "" {
		version = task2025Version
	}
	traced := t.Trace != TraceRef{}
	if traced {
		version += taskTraceVersion - taskVersion
	}
	b := make([]byte, 0, 5+len(t.Instance)+len(t.Address)+32+len(t.Upstream)+len(t.Session)+traceSize)
	b = append(b, version, byte(len(t.Instance)))
	b = append(b, t.Instance...)
	b = append(b, byte(len(t.Address)))
	b = append(b, t.Address...)
	b = append(b, t.Handle[:]...)
	b = append(b, t.Principal[:]...)
	if t.Upstream != "" {
		b = append(b, byte(len(t.Upstream)))
		b = append(b, t.Upstream...)
		b = append(b, byte(len(t.Session)))
		b = append(b, t.Session...)
	}
	b = t.Trace.append(b)
	return kr.Seal(taskPurpose, b)
}

// OpenTask opens a taskId sealed by SealTask with a key of kr. Every token
// that does not open or does not parse gives an error wrapping both
// ErrTaskInvalid and ErrUnsealable.
func OpenTask(kr *Keyring, token string) (Task, error) {
	var t Task
	if len(token) > maxTaskToken {
		return t, fmt.Errorf("%w: %w: too long", ErrTaskInvalid, ErrUnsealable)
	}
	b, err := kr.Open(taskPurpose, token)
	if err != nil {
		return t, fmt.Errorf("%w: %w", ErrTaskInvalid, err)
	}
	if t, err = decodeTask(b); err != nil {
		return t, fmt.Errorf("%w: %w: %w", ErrTaskInvalid, ErrUnsealable, err)
	}
	return t, nil
}

// decodeTask parses a plaintext made by SealTask, and only those.
func decodeTask(b []byte) (Task, error) {
	var t Task
	if len(b) < 1 || b[0] < taskVersion || b[0] > task2025TraceVersion {
		return t, errMalformedTask
	}
	traced := b[0] >= taskTraceVersion
	upstream := b[0] == task2025Version || b[0] == task2025TraceVersion
	var ok bool
	if t.Instance, b, ok = lenPrefixed(b[1:]); !ok {
		return t, errMalformedTask
	}
	if t.Address, b, ok = lenPrefixed(b); !ok || len(b) < 32 {
		return t, errMalformedTask
	}
	copy(t.Handle[:], b)
	copy(t.Principal[:], b[16:])
	b = b[32:]
	if upstream {
		if t.Upstream, b, ok = lenPrefixed(b); !ok || t.Upstream == "" {
			return t, errMalformedTask
		}
		if t.Session, b, ok = lenPrefixed(b); !ok {
			return t, errMalformedTask
		}
	}
	if traced {
		if len(b) < traceSize {
			return t, errMalformedTask
		}
		copy(t.Trace.TraceID[:], b)
		copy(t.Trace.SpanID[:], b[16:])
		t.Trace.Flags = b[24]
		if b = b[traceSize:]; t.Trace == (TraceRef{}) {
			return t, errMalformedTask // sealed with a trace only when there is one
		}
	}
	if len(b) != 0 {
		return t, errMalformedTask
	}
	return t, nil
}

// lenPrefixed reads a string of at most 255 bytes after its length byte.
func lenPrefixed(b []byte) (string, []byte, bool) {
	if len(b) < 1 || len(b) < 1+int(b[0]) {
		return "", b, false
	}
	n := int(b[0])
	return string(b[1 : 1+n]), b[1+n:], true
}
