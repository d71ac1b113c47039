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
// task lives is the owner's table's business, not the token's.

// taskPurpose separates taskIds from every other sealed token.
const taskPurpose Purpose = "mcp-gateway/task/v1"

// taskVersion is the first byte of the sealed plaintext.
const taskVersion = 1

// maxTaskToken bounds the length of a taskId OpenTask will try to open:
// the largest (255-byte instance and address) is 546 bytes, sealed 579,
// 772 characters in base64url.
const maxTaskToken = 1024

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
}

// Plaintext layout:
//
//	version(1) | len(instance)(1) | instance | len(address)(1) | address | handle(16) | principal(16)

var errMalformedTask = errors.New("malformed taskId")

// SealTask seals t into a taskId: a URL-safe string of about 100
// characters plus 4/3 of len(t.Instance)+len(t.Address). It panics if
// t.Instance or t.Address is too long (configuration errors the caller
// rejects earlier, as for SealState).
func SealTask(kr *Keyring, t Task) string {
	if len(t.Instance) > MaxInstanceLen || len(t.Address) > MaxAddressLen {
		panic("seal: Task.Instance or Task.Address too long")
	}
	b := make([]byte, 0, 3+len(t.Instance)+len(t.Address)+32)
	b = append(b, taskVersion, byte(len(t.Instance)))
	b = append(b, t.Instance...)
	b = append(b, byte(len(t.Address)))
	b = append(b, t.Address...)
	b = append(b, t.Handle[:]...)
	b = append(b, t.Principal[:]...)
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
	if len(b) < 2 || b[0] != taskVersion {
		return t, errMalformedTask
	}
	n := int(b[1])
	b = b[2:]
	if len(b) < n+1 {
		return t, errMalformedTask
	}
	t.Instance = string(b[:n])
	b = b[n:]
	n = int(b[0])
	b = b[1:]
	if len(b) != n+32 {
		return t, errMalformedTask
	}
	t.Address = string(b[:n])
	copy(t.Handle[:], b[n:])
	copy(t.Principal[:], b[n+16:])
	return t, nil
}
