package seal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// This file is the codec of a resumable requestState: the state of a call
// parked in front of an upstream whose streams are resumable (2025-11-25
// SSE event ids, GET with Last-Event-ID). Such a call keeps no stream and
// no table entry on the instance that parked it: everything its retry
// needs to go on with the call travels sealed here, so that any instance
// holding the key can resume it. It is sealed for a purpose of its own,
// so it never opens as a State nor a State as one of these
// (OpenRequestState tells them apart).

// resumePurpose separates resumable requestStates from every other token.
const resumePurpose Purpose = "mcp-gateway/request-state-resume/v1"

// The first byte of the sealed plaintext: resumeVersion, or
// resumeVersionHome for a state with a Home (two more fields), or
// resumeVersionTrace for a state with a Trace (the Home fields, empty or
// not, then the Trace). States without one are sealed byte for byte as
// before it existed, so that instances of an older release open them.
const (
	resumeVersion      = 1
	resumeVersionHome  = 2
	resumeVersionTrace = 3
)

// Bounds of a ResumeState's fields, in bytes (or entries). SealResume
// refuses a state beyond them: the caller then parks the call holding its
// stream instead.
const (
	MaxResumeUpstream = 1024 // Upstream
	MaxResumeShort    = 255  // Session, Version, After, an input's Key and Method
	MaxResumeID       = 128  // CallID, an input's ID (raw JSON)
	MaxResumeInputs   = 64   // Inputs
	MaxResumeKeys     = 1024 // Keys
	MaxResumeInfo     = 1024 // ServerInfo
	// maxResumePlain bounds the whole plaintext; a token is at most
	// about 4/3 of it plus 45 characters.
	maxResumePlain = 4096
)

// maxResumeToken bounds the length of a token OpenRequestState tries to
// open as a resumable state.
var maxResumeToken = (headerSize+maxResumePlain+16)*4/3 + 4

// ErrResumeTooLarge is returned by SealResume for a state beyond the bounds.
var ErrResumeTooLarge = errors.New("seal: resumable requestState too large")

// ResumeInput is one of the upstream's in-line requests a resumable call
// waits the answer of.
type ResumeInput struct {
	// ID is the raw JSON id of the upstream's request.
	ID []byte
	// Key is the input key the client answers it under.
	Key string
	// Method is the request's method (elicitation/create, ...).
	Method string
}

// ResumeState is what a resumable requestState carries.
type ResumeState struct {
	// Upstream is the URL of the legacy upstream the call runs on; the
	// resuming instance serves the retry only if it is one of its
	// configured upstreams.
	Upstream string
	// Session is the upstream's Mcp-Session-Id.
	Session string
	// Version is the session's negotiated protocol version.
	Version string
	// CallID is the raw JSON id of the call's upstream request.
	CallID []byte
	// After is the id of the last event of the call's stream before the
	// round's first message not fully handled: the stream is reopened
	// with it as Last-Event-ID.
	After string
	// Seen is how many messages of the call's stream after After the
	// gateway had received when it parked (the round's questions among
	// them): on the reopened stream, those are not handled again, except
	// questions still unanswered.
	Seen uint32
	// Inputs are the round's questions, waiting for answers.
	Inputs []ResumeInput
	// Keys is the call's input key counter, opaque here (at most
	// MaxResumeKeys bytes).
	Keys []byte
	// ServerInfo is the raw JSON serverInfo of the upstream's
	// InitializeResult (at most MaxResumeInfo bytes), which the call's
	// result carries in its _meta.
	ServerInfo []byte
	// Round counts the input_required rounds of the call.
	Round uint32
	// Principal is the hash of the authenticated principal.
	Principal [16]byte
	// Digest is the digest of the originating request.
	Digest [16]byte
	// Place is the random id of the place the parking instance holds for
	// the state (opaque here): a retry reaching that instance frees it.
	Place [16]byte
	// Started is when the call's first request came (millisecond
	// precision), for its report.
	Started time.Time
	// Expires is when the state stops opening (second precision).
	Expires time.Time
	// Home is the instance id of the parking instance when the call's
	// session belongs to its pool ("" otherwise), and HomeAddress that
	// instance's advertised base URL ("" for none): the instance that
	// ends the call elsewhere gives the session back to it rather than
	// ending it upstream. Sealed only when Home is set (version 2).
	Home        string
	HomeAddress string
	// Trace names the span of the call's first request (zero for none:
	// tracing off and no client traceparent). Sealed only when set
	// (version 3).
	Trace TraceRef
}

// Plaintext layout (varints minimal, strings and byte strings as
// uvarint(len) | bytes):
//
//	version(1) | upstream | session | version | callID | after | uvarint(seen) |
//	uvarint(n) | n × (id | key | method) | keys | serverInfo | uvarint(round) |
//	principal(16) | digest(16) | place(16) | varint(started, Unix ms) | varint(expires, Unix s)
//	[version 2: | home | homeAddress]
//	[version 3: | home | homeAddress | traceID(16) | spanID(8) | flags(1)]

func (s *ResumeState) check() error {
	switch {
	case len(s.Upstream) > MaxResumeUpstream, len(s.Session) > MaxResumeShort, len(s.Version) > MaxResumeShort,
		len(s.CallID) > MaxResumeID, len(s.After) > MaxResumeShort, len(s.Inputs) > MaxResumeInputs,
		len(s.Keys) > MaxResumeKeys, len(s.ServerInfo) > MaxResumeInfo,
		len(s.Home) > MaxResumeShort, len(s.HomeAddress) > MaxResumeUpstream, s.Home == "" && s.HomeAddress != "":
		return ErrResumeTooLarge
	}
	for _, in := range s.Inputs {
		if len(in.ID) > MaxResumeID || len(in.Key) > MaxResumeShort || len(in.Method) > MaxResumeShort {
			return ErrResumeTooLarge
		}
	}
	return nil
}

func appendField(b []byte, v string) []byte {
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

// encode appends the plaintext of s to b.
func (s *ResumeState) encode(b []byte) []byte {
	switch {
	case s.Trace != TraceRef{}:
		b = append(b, resumeVersionTrace)
	case s.Home != "":
		b = append(b, resumeVersionHome)
	default:
		b = append(b, resumeVersion)
	}
	b = appendField(b, s.Upstream)
	b = appendField(b, s.Session)
	b = appendField(b, s.Version)
	b = appendField(b, string(s.CallID))
	b = appendField(b, s.After)
	b = binary.AppendUvarint(b, uint64(s.Seen))
	b = binary.AppendUvarint(b, uint64(len(s.Inputs)))
	for _, in := range s.Inputs {
		b = appendField(b, string(in.ID))
		b = appendField(b, in.Key)
		b = appendField(b, in.Method)
	}
	b = appendField(b, string(s.Keys))
	b = appendField(b, string(s.ServerInfo))
	b = binary.AppendUvarint(b, uint64(s.Round))
	b = append(b, s.Principal[:]...)
	b = append(b, s.Digest[:]...)
	b = append(b, s.Place[:]...)
	b = binary.AppendVarint(b, s.Started.UnixMilli())
	b = binary.AppendVarint(b, s.Expires.Unix())
	if s.Home != "" || s.Trace != (TraceRef{}) {
		b = appendField(b, s.Home)
		b = appendField(b, s.HomeAddress)
	}
	return s.Trace.append(b)
}

// resumeDecoder reads a plaintext; the first error sticks.
type resumeDecoder struct {
	b   []byte
	err error
}

func (d *resumeDecoder) uvarint(max uint64) uint64 {
	if d.err != nil {
		return 0
	}
	v, w := binary.Uvarint(d.b)
	if w <= 0 || v > max || w != uvarintLen(v) {
		d.err = errMalformedState
		return 0
	}
	d.b = d.b[w:]
	return v
}

func (d *resumeDecoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, w := binary.Varint(d.b)
	if w <= 0 || w != varintLen(v) {
		d.err = errMalformedState
		return 0
	}
	d.b = d.b[w:]
	return v
}

func (d *resumeDecoder) field(max int) string {
	n := int(d.uvarint(uint64(max)))
	if d.err != nil {
		return ""
	}
	if len(d.b) < n {
		d.err = errMalformedState
		return ""
	}
	v := string(d.b[:n])
	d.b = d.b[n:]
	return v
}

func (d *resumeDecoder) bytes(max int) []byte {
	if v := d.field(max); v != "" {
		return []byte(v)
	}
	return nil
}

func (d *resumeDecoder) fixed(dst []byte) {
	if d.err != nil {
		return
	}
	if len(d.b) < len(dst) {
		d.err = errMalformedState
		return
	}
	copy(dst, d.b)
	d.b = d.b[len(dst):]
}

// decodeResume parses a plaintext made by encode; it accepts exactly the
// byte strings encode produces for states within the bounds.
func decodeResume(b []byte) (ResumeState, error) {
	var s ResumeState
	if len(b) < 1 || len(b) > maxResumePlain || b[0] < resumeVersion || b[0] > resumeVersionTrace {
		return s, errMalformedState
	}
	d := &resumeDecoder{b: b[1:]}
	s.Upstream = d.field(MaxResumeUpstream)
	s.Session = d.field(MaxResumeShort)
	s.Version = d.field(MaxResumeShort)
	s.CallID = d.bytes(MaxResumeID)
	s.After = d.field(MaxResumeShort)
	s.Seen = uint32(d.uvarint(1<<32 - 1))
	n := int(d.uvarint(MaxResumeInputs))
	for i := 0; i < n && d.err == nil; i++ {
		s.Inputs = append(s.Inputs, ResumeInput{ID: d.bytes(MaxResumeID), Key: d.field(MaxResumeShort), Method: d.field(MaxResumeShort)})
	}
	s.Keys = d.bytes(MaxResumeKeys)
	s.ServerInfo = d.bytes(MaxResumeInfo)
	s.Round = uint32(d.uvarint(1<<32 - 1))
	d.fixed(s.Principal[:])
	d.fixed(s.Digest[:])
	d.fixed(s.Place[:])
	s.Started = time.UnixMilli(d.varint())
	s.Expires = time.Unix(d.varint(), 0)
	if b[0] >= resumeVersionHome {
		s.Home = d.field(MaxResumeShort)
		s.HomeAddress = d.field(MaxResumeUpstream)
		if s.Home == "" && (b[0] == resumeVersionHome || s.HomeAddress != "") {
			d.err = errMalformedState // encode writes version 2 only with a Home, an address only with a Home
		}
	}
	if b[0] == resumeVersionTrace {
		s.Trace = d.traceRef()
	}
	if d.err != nil || len(d.b) != 0 {
		return ResumeState{}, errMalformedState
	}
	return s, nil
}

// SealResume seals s into a resumable requestState, or returns
// ErrResumeTooLarge when a field is beyond its bound.
func SealResume(kr *Keyring, s ResumeState) (string, error) {
	if err := s.check(); err != nil {
		return "", err
	}
	b := s.encode(make([]byte, 0, 256))
	if len(b) > maxResumePlain {
		return "", ErrResumeTooLarge
	}
	return kr.Seal(resumePurpose, b), nil
}

// OpenRequestState opens a requestState of either kind: a State (sealed by
// SealState, the call held by the instance it names) or a ResumeState
// (sealed by SealResume; then the returned *ResumeState is non-nil and the
// State zero). Errors are those of OpenState: ErrStateInvalid with
// ErrUnsealable, or ErrStateExpired together with the decoded state.
func OpenRequestState(kr *Keyring, token string, now time.Time) (State, *ResumeState, error) {
	if len(token) > maxResumeToken {
		return State{}, nil, fmt.Errorf("%w: %w: too long", ErrStateInvalid, ErrUnsealable)
	}
	purpose, b, err := kr.OpenAny(token, statePurpose, resumePurpose)
	if err != nil {
		return State{}, nil, fmt.Errorf("%w: %w", ErrStateInvalid, err)
	}
	if purpose == statePurpose {
		if len(token) > maxStateToken {
			return State{}, nil, fmt.Errorf("%w: %w: too long", ErrStateInvalid, ErrUnsealable)
		}
		s, err := decodeState(b)
		if err != nil {
			return State{}, nil, fmt.Errorf("%w: %w: %w", ErrStateInvalid, ErrUnsealable, err)
		}
		if !now.Before(s.Expires) {
			return s, nil, fmt.Errorf("%w at %s", ErrStateExpired, s.Expires.UTC().Format(time.RFC3339))
		}
		return s, nil, nil
	}
	rs, err := decodeResume(b)
	if err != nil {
		return State{}, nil, fmt.Errorf("%w: %w: %w", ErrStateInvalid, ErrUnsealable, err)
	}
	if !now.Before(rs.Expires) {
		return State{}, &rs, fmt.Errorf("%w at %s", ErrStateExpired, rs.Expires.UTC().Format(time.RFC3339))
	}
	return State{}, &rs, nil
}
