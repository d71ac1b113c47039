package seal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"
)

// This file is the codec of a task record: what the forward bridge keeps in
// the fleet's shared storage (Caddy's configured storage) of each task it
// hosts, so that any instance answers tasks/get when the task's owner is
// gone, and takes the task over (resuming the upstream call when its stream
// is resumable). A record is sealed, for a purpose of its own: a task's
// result can be sensitive, and whoever can write to the storage must not be
// able to make an instance resume a call of its choosing.

// taskRecordPurpose separates task records from every other sealed token.
const taskRecordPurpose Purpose = "mcp-gateway/task-record/v1"

// taskRecordVersion is the first byte of a record's plaintext;
// taskRecordTraceVersion that of a record with a Trace, after the rest. A
// record without one is sealed byte for byte as before it existed, so that
// instances of an older release open it.
const (
	taskRecordVersion      = 1
	taskRecordTraceVersion = 2
)

// Bounds of a TaskRecord's fields, in bytes (or entries). SealTaskRecord
// refuses a record beyond them.
const (
	MaxRecordShort   = 255     // Tool, Status, Session, Version, After, Owner, an input's Key and Method
	MaxRecordURL     = 1024    // Upstream, Address
	MaxRecordNote    = 1024    // Note
	MaxRecordID      = 128     // CallID, an input's ID (raw JSON)
	MaxRecordInputs  = 64      // Inputs
	MaxRecordParams  = 1 << 20 // an input's Params
	MaxRecordKeys    = 1024    // Keys
	MaxRecordInfo    = 1024    // ServerInfo
	MaxRecordPayload = 1 << 26 // Result, Error (the caller bounds them lower: max_task_result)
	// maxRecordPlain bounds the whole plaintext.
	maxRecordPlain = MaxRecordPayload + 4<<20
)

// ErrRecordTooLarge is returned by SealTaskRecord for a record beyond the
// bounds.
var ErrRecordTooLarge = errors.New("seal: task record too large")

// ErrRecordInvalid means a record did not open or is malformed.
var ErrRecordInvalid = errors.New("seal: invalid task record")

// TaskInput is one question a recorded task waits the answer of.
type TaskInput struct {
	// ID is the raw JSON id of the upstream's request.
	ID []byte
	// Key is the input key the client answers it under.
	Key string
	// Method is the request's method (elicitation/create, ...).
	Method string
	// Params is the request's raw JSON params as the client sees them.
	Params []byte
}

// TaskRecord is what a task record carries.
type TaskRecord struct {
	// Handle is the task's handle (sealed in its taskId).
	Handle [16]byte
	// Principal is the hash of the principal whose task it is.
	Principal [16]byte
	// Tool and Upstream name the call, for operators.
	Tool, Upstream string
	// Status is the task's status; Note its statusMessage.
	Status, Note string
	// Created and Updated are the task's times (millisecond precision).
	Created, Updated time.Time
	// TTL is how long the record lives from Created (milliseconds).
	TTL time.Duration
	// PollMs is the pollIntervalMs shown (0: none).
	PollMs int64
	// Inputs are the questions shown in inputRequests, not yet answered.
	Inputs []TaskInput
	// Result (completed) and Error (failed) are the task's end, raw JSON.
	Result, Error []byte
	// Owner is the instance id of the instance running the task, Boot the
	// random id of that instance's process (a restarted instance keeps its
	// id, not its boot), and Address its advertised base URL ("" for none).
	Owner   string
	Boot    [16]byte
	Address string
	// Session, Version, CallID, After and Seen say where the task's
	// upstream call stands when its stream is resumable (Session ""
	// otherwise): the upstream session, its protocol version, the call's
	// upstream request id, the id of the event before the first message
	// not fully handled, and how many messages after it were handled.
	Session, Version string
	CallID           []byte
	After            string
	Seen             uint32
	// Keys is the call's input key counter, opaque here.
	Keys []byte
	// ServerInfo is the raw JSON serverInfo of the upstream's
	// InitializeResult, which the task's result carries in its _meta.
	ServerInfo []byte
	// Trace names the span of the call that created the task (zero for
	// none), which the spans of an instance taking it over link to.
	Trace TraceRef
}

// Plaintext layout (as ResumeState's: varints minimal, strings and byte
// strings as uvarint(len) | bytes):
//
//	version(1) | handle(16) | principal(16) | tool | upstream | status | note |
//	varint(created ms) | varint(updated ms) | varint(ttl ms) | varint(pollMs) |
//	uvarint(n) | n × (id | key | method | params) | result | error |
//	owner | boot(16) | address | session | version | callID | after | uvarint(seen) |
//	keys | serverInfo
//
// and for version 2, after those:
//
//	traceID(16) | spanID(8) | flags(1)

func (r *TaskRecord) check() error {
	switch {
	case len(r.Tool) > MaxRecordShort, len(r.Upstream) > MaxRecordURL, len(r.Status) > MaxRecordShort,
		len(r.Note) > MaxRecordNote, len(r.Inputs) > MaxRecordInputs, len(r.Result) > MaxRecordPayload,
		len(r.Error) > MaxRecordPayload, len(r.Owner) > MaxRecordShort, len(r.Address) > MaxRecordURL,
		len(r.Session) > MaxRecordShort, len(r.Version) > MaxRecordShort, len(r.CallID) > MaxRecordID,
		len(r.After) > MaxRecordShort, len(r.Keys) > MaxRecordKeys, len(r.ServerInfo) > MaxRecordInfo:
		return ErrRecordTooLarge
	}
	for _, in := range r.Inputs {
		if len(in.ID) > MaxRecordID || len(in.Key) > MaxRecordShort || len(in.Method) > MaxRecordShort || len(in.Params) > MaxRecordParams {
			return ErrRecordTooLarge
		}
	}
	return nil
}

func (r *TaskRecord) encode(b []byte) []byte {
	if r.Trace != (TraceRef{}) {
		b = append(b, taskRecordTraceVersion)
	} else {
		b = append(b, taskRecordVersion)
	}
	b = append(b, r.Handle[:]...)
	b = append(b, r.Principal[:]...)
	b = appendField(b, r.Tool)
	b = appendField(b, r.Upstream)
	b = appendField(b, r.Status)
	b = appendField(b, r.Note)
	b = binary.AppendVarint(b, r.Created.UnixMilli())
	b = binary.AppendVarint(b, r.Updated.UnixMilli())
	b = binary.AppendVarint(b, r.TTL.Milliseconds())
	b = binary.AppendVarint(b, r.PollMs)
	b = binary.AppendUvarint(b, uint64(len(r.Inputs)))
	for _, in := range r.Inputs {
		b = appendField(b, string(in.ID))
		b = appendField(b, in.Key)
		b = appendField(b, in.Method)
		b = appendField(b, string(in.Params))
	}
	b = appendField(b, string(r.Result))
	b = appendField(b, string(r.Error))
	b = appendField(b, r.Owner)
	b = append(b, r.Boot[:]...)
	b = appendField(b, r.Address)
	b = appendField(b, r.Session)
	b = appendField(b, r.Version)
	b = appendField(b, string(r.CallID))
	b = appendField(b, r.After)
	b = binary.AppendUvarint(b, uint64(r.Seen))
	b = appendField(b, string(r.Keys))
	b = appendField(b, string(r.ServerInfo))
	return r.Trace.append(b)
}

// decodeTaskRecord parses a plaintext made by encode.
func decodeTaskRecord(b []byte) (TaskRecord, error) {
	var r TaskRecord
	if len(b) < 1 || len(b) > maxRecordPlain || (b[0] != taskRecordVersion && b[0] != taskRecordTraceVersion) {
		return r, errMalformedState
	}
	traced := b[0] == taskRecordTraceVersion
	d := &resumeDecoder{b: b[1:]}
	d.fixed(r.Handle[:])
	d.fixed(r.Principal[:])
	r.Tool = d.field(MaxRecordShort)
	r.Upstream = d.field(MaxRecordURL)
	r.Status = d.field(MaxRecordShort)
	r.Note = d.field(MaxRecordNote)
	r.Created = time.UnixMilli(d.varint())
	r.Updated = time.UnixMilli(d.varint())
	ttl := d.varint()
	if ttl < 0 || ttl > math.MaxInt64/int64(time.Millisecond) {
		d.err = errMalformedState // a Duration holds no more
	}
	r.TTL = time.Duration(ttl) * time.Millisecond
	r.PollMs = d.varint()
	n := int(d.uvarint(MaxRecordInputs))
	for i := 0; i < n && d.err == nil; i++ {
		r.Inputs = append(r.Inputs, TaskInput{ID: d.bytes(MaxRecordID), Key: d.field(MaxRecordShort),
			Method: d.field(MaxRecordShort), Params: d.bytes(MaxRecordParams)})
	}
	r.Result = d.bytes(MaxRecordPayload)
	r.Error = d.bytes(MaxRecordPayload)
	r.Owner = d.field(MaxRecordShort)
	d.fixed(r.Boot[:])
	r.Address = d.field(MaxRecordURL)
	r.Session = d.field(MaxRecordShort)
	r.Version = d.field(MaxRecordShort)
	r.CallID = d.bytes(MaxRecordID)
	r.After = d.field(MaxRecordShort)
	r.Seen = uint32(d.uvarint(1<<32 - 1))
	r.Keys = d.bytes(MaxRecordKeys)
	r.ServerInfo = d.bytes(MaxRecordInfo)
	if traced {
		r.Trace = d.traceRef()
	}
	if d.err != nil || len(d.b) != 0 {
		return TaskRecord{}, errMalformedState
	}
	return r, nil
}

// SealTaskRecord seals r, or returns ErrRecordTooLarge when a field is
// beyond its bound.
func SealTaskRecord(kr *Keyring, r TaskRecord) ([]byte, error) {
	if err := r.check(); err != nil {
		return nil, err
	}
	b := r.encode(make([]byte, 0, 512+len(r.Result)+len(r.Error)))
	if len(b) > maxRecordPlain {
		return nil, ErrRecordTooLarge
	}
	return []byte(kr.Seal(taskRecordPurpose, b)), nil
}

// OpenTaskRecord opens a record sealed by SealTaskRecord under a key of kr.
// Errors wrap ErrRecordInvalid.
func OpenTaskRecord(kr *Keyring, sealed []byte) (TaskRecord, error) {
	if len(sealed) > (headerSize+maxRecordPlain+16)*4/3+4 {
		return TaskRecord{}, fmt.Errorf("%w: too long", ErrRecordInvalid)
	}
	b, err := kr.Open(taskRecordPurpose, string(sealed))
	if err != nil {
		return TaskRecord{}, fmt.Errorf("%w: %w", ErrRecordInvalid, err)
	}
	r, err := decodeTaskRecord(b)
	if err != nil {
		return TaskRecord{}, fmt.Errorf("%w: %w", ErrRecordInvalid, err)
	}
	return r, nil
}
