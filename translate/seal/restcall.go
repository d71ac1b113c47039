package seal

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// This file is the codec of a REST call record: what the REST face
// (option `rest`) keeps in Caddy's configured storage of each tool call a
// client started with PUT <base>/tools/{tool}/calls/{id}, so that any
// instance of the fleet reads, advances, cancels and lists it. A record is
// sealed for a purpose of its own: it holds the call's arguments, its
// result and the requestState of the call's current round, and whoever can
// write to the storage must not be able to read a result, nor to make an
// instance retry a call of its choosing (beyond an earlier round of the
// same call, written back: see Version).
//
// A record is sealed for its place (its storage key, bound as additional
// data), so that a record moved or copied under another key does not
// open, and carries a Version its writers count up, so that an instance
// can refuse a record older than one it wrote or read. The sealed bytes
// are kept as they are (no base64). The plaintext is a version byte then
// JSON (the record is made of JSON pieces already: arguments, input
// requests, results); decodeRESTCall accepts only a record within the
// bounds.

// restCallPurpose separates REST call records from every other token;
// restCallAt binds it to the record's place.
const restCallPurpose Purpose = "mcp-gateway/rest-call/v2"

// restCallPurposeV1 is the purpose of the records older gateways wrote:
// base64, bound to no place (OpenRESTCallV1).
const restCallPurposeV1 Purpose = "mcp-gateway/rest-call/v1"

// restCallAt is the purpose of a record kept at place.
func restCallAt(place string) Purpose {
	return restCallPurpose + "\x00" + Purpose(place)
}

// restRootsPurpose separates a principal's roots (PUT <base>/roots).
const restRootsPurpose Purpose = "mcp-gateway/rest-roots/v1"

const restCallVersion = 1

// Bounds of a RESTCall's fields, in bytes (or entries). SealRESTCall
// refuses a record beyond them (ErrRESTTooLarge).
const (
	MaxRESTName      = 128      // Tool, ID (path segments)
	MaxRESTShort     = 255      // IdempotencyKey, Status, ETag, Owner, an input's Key and Method
	MaxRESTArguments = 1 << 20  // Arguments (raw JSON)
	MaxRESTState     = 1 << 20  // RequestState
	MaxRESTInputs    = 64       // Inputs
	MaxRESTParams    = 1 << 20  // an input's Params, an answer, Progress
	MaxRESTPayload   = 16 << 20 // Result, Error
	MaxRESTTask      = 1024     // TaskID
	// maxRESTPlain bounds the whole plaintext.
	maxRESTPlain = 32 << 20
	// MaxRESTRoots bounds a principal's roots (raw JSON).
	MaxRESTRoots = 1 << 20
)

// Errors of the REST call codec.
var (
	// ErrRESTTooLarge is returned by SealRESTCall for a record beyond the bounds.
	ErrRESTTooLarge = errors.New("seal: REST call record too large")
	// ErrRESTInvalid wraps every failure to open a record.
	ErrRESTInvalid = errors.New("seal: invalid REST call record")
)

// RESTInput is one question of a call's current round.
type RESTInput struct {
	// Key is the question's key in inputRequests.
	Key string `json:"k"`
	// Method is its method (elicitation/create, sampling/createMessage,
	// roots/list).
	Method string `json:"m"`
	// Params are its raw JSON params.
	Params json.RawMessage `json:"p,omitempty"`
	// Answer is the client's answer, raw JSON, once given.
	Answer json.RawMessage `json:"a,omitempty"`
}

// RESTCall is what a REST call record carries.
type RESTCall struct {
	// Principal is the hash of the principal whose call it is.
	Principal [16]byte `json:"pr"`
	// Tool and ID are the call's names in its URL.
	Tool string `json:"t"`
	ID   string `json:"i"`
	// IdempotencyKey is the key of the PUT that started it.
	IdempotencyKey string `json:"ik"`
	// Status is the call's status as the client sees it; ETag changes on
	// every transition.
	Status string `json:"s"`
	ETag   string `json:"e"`
	// Arguments are the tool's raw JSON arguments (empty: none).
	Arguments json.RawMessage `json:"ar,omitempty"`
	// Inputs are the questions of the current round, in key order, while
	// the call awaits input; RequestState is that round's requestState.
	Inputs       []RESTInput `json:"in,omitempty"`
	RequestState string      `json:"rs,omitempty"`
	// Progress is the params of the last progress notification of a
	// running call, raw JSON.
	Progress json.RawMessage `json:"pg,omitempty"`
	// Result and Error are the call's end, raw JSON.
	Result json.RawMessage `json:"re,omitempty"`
	Error  json.RawMessage `json:"er,omitempty"`
	// Created and Updated are in Unix milliseconds; Lease is when the
	// claim of the instance running the call (Owner) lapses, while the
	// call runs.
	Created int64  `json:"c"`
	Updated int64  `json:"u"`
	Owner   string `json:"o,omitempty"`
	Lease   int64  `json:"l,omitempty"`
	// TaskID is the taskId of the task the gateway hosts the call's
	// current round as (in front of a legacy server), which any instance
	// follows when the one running the call goes.
	TaskID string `json:"tk,omitempty"`
	// Version counts the record's writes: each writer writes one more
	// than the record it read (0 in records older gateways wrote). An
	// instance refuses a record older than one it saw at its key; one
	// that saw none cannot tell an earlier record written back.
	Version uint64 `json:"v,omitempty"`
	// Trace names the span of the request that started the call (the
	// PUT), which the spans of its later requests (polls, advances,
	// cancel) link to; zero for none (tracing off), and then not written,
	// so that a record without one reads as before the trace existed.
	Trace TraceRef `json:"tr,omitzero"`
}

// CreatedAt, UpdatedAt and LeaseUntil are the record's times.
func (c *RESTCall) CreatedAt() time.Time  { return time.UnixMilli(c.Created) }
func (c *RESTCall) UpdatedAt() time.Time  { return time.UnixMilli(c.Updated) }
func (c *RESTCall) LeaseUntil() time.Time { return time.UnixMilli(c.Lease) }

func (c *RESTCall) check() error {
	switch {
	case len(c.Tool) > MaxRESTName, len(c.ID) > MaxRESTName, len(c.IdempotencyKey) > MaxRESTShort,
		len(c.Status) > MaxRESTShort, len(c.ETag) > MaxRESTShort, len(c.Owner) > MaxRESTShort,
		len(c.Arguments) > MaxRESTArguments, len(c.RequestState) > MaxRESTState, len(c.Inputs) > MaxRESTInputs,
		len(c.Result) > MaxRESTPayload, len(c.Error) > MaxRESTPayload, len(c.Progress) > MaxRESTParams,
		len(c.TaskID) > MaxRESTTask:
		return ErrRESTTooLarge
	}
	for _, in := range c.Inputs {
		if len(in.Key) > MaxRESTShort || len(in.Method) > MaxRESTShort || len(in.Params) > MaxRESTParams || len(in.Answer) > MaxRESTParams {
			return ErrRESTTooLarge
		}
	}
	return nil
}

// encodeRESTCall is the plaintext of c.
func encodeRESTCall(c *RESTCall) ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteByte(restCallVersion)
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(c); err != nil {
		return nil, err
	}
	b := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	if len(b) > maxRESTPlain {
		return nil, ErrRESTTooLarge
	}
	return b, nil
}

// decodeRESTCall parses a plaintext made by encodeRESTCall.
func decodeRESTCall(b []byte) (RESTCall, error) {
	var c RESTCall
	if len(b) < 2 || len(b) > maxRESTPlain || b[0] != restCallVersion {
		return c, errMalformedState
	}
	dec := json.NewDecoder(bytes.NewReader(b[1:])) // our own plaintext, authenticated by Open: not JSON from a peer
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil || dec.More() {
		return RESTCall{}, errMalformedState
	}
	if c.check() != nil {
		return RESTCall{}, errMalformedState
	}
	if len(c.Inputs) == 0 {
		c.Inputs = nil // "in":[] reads as no inputs, as encodeRESTCall writes them
	}
	return c, nil
}

// SealRESTCall seals c for place (its storage key), or returns
// ErrRESTTooLarge when a field is beyond its bound.
func SealRESTCall(kr *Keyring, place string, c RESTCall) ([]byte, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	b, err := encodeRESTCall(&c)
	if err != nil {
		return nil, err
	}
	return kr.SealBytes(restCallAt(place), b), nil
}

// OpenRESTCall opens a record sealed by SealRESTCall under a key of kr
// for place: a record sealed for another place does not open. Errors wrap
// ErrRESTInvalid.
func OpenRESTCall(kr *Keyring, place string, sealed []byte) (RESTCall, error) {
	if len(sealed) > headerSize+maxRESTPlain+16 {
		return RESTCall{}, fmt.Errorf("%w: too long", ErrRESTInvalid)
	}
	b, err := kr.OpenBytes(restCallAt(place), sealed)
	return openedRESTCall(b, err)
}

// OpenRESTCallV1 opens a record an older gateway sealed (base64, bound to
// no place), so that its reader can move it where it belongs now. Errors
// wrap ErrRESTInvalid.
func OpenRESTCallV1(kr *Keyring, sealed []byte) (RESTCall, error) {
	if len(sealed) > (headerSize+maxRESTPlain+16)*4/3+4 {
		return RESTCall{}, fmt.Errorf("%w: too long", ErrRESTInvalid)
	}
	b, err := kr.Open(restCallPurposeV1, string(sealed))
	return openedRESTCall(b, err)
}

// openedRESTCall decodes the plaintext b an open returned with err.
func openedRESTCall(b []byte, err error) (RESTCall, error) {
	if err != nil {
		return RESTCall{}, fmt.Errorf("%w: %w", ErrRESTInvalid, err)
	}
	c, err := decodeRESTCall(b)
	if err != nil {
		return RESTCall{}, fmt.Errorf("%w: %w", ErrRESTInvalid, err)
	}
	return c, nil
}

// SealRESTRoots seals a principal's roots (raw JSON, at most MaxRESTRoots
// bytes) bound to the principal.
func SealRESTRoots(kr *Keyring, principal [16]byte, roots []byte) ([]byte, error) {
	if len(roots) > MaxRESTRoots {
		return nil, ErrRESTTooLarge
	}
	return []byte(kr.Seal(restRootsPurpose, append(principal[:], roots...))), nil
}

// OpenRESTRoots opens roots sealed by SealRESTRoots for principal.
func OpenRESTRoots(kr *Keyring, principal [16]byte, sealed []byte) ([]byte, error) {
	if len(sealed) > (headerSize+MaxRESTRoots+16+16)*4/3+4 {
		return nil, fmt.Errorf("%w: too long", ErrRESTInvalid)
	}
	b, err := kr.Open(restRootsPurpose, string(sealed))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrRESTInvalid, err)
	}
	if len(b) < 16 || !bytes.Equal(b[:16], principal[:]) {
		return nil, fmt.Errorf("%w: another principal's", ErrRESTInvalid)
	}
	return b[16:], nil
}
