package seal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// This file is the codec of a multi-turn SSE turn (SEP-1858): the state of
// a legacy client's tools/call between two of its turns. When the call
// needs the client's input, the gateway ends the call's SSE stream with an
// `input_required` event whose id is this token; the client POSTs its
// answers with the token as Last-Event-ID, to any instance. Everything the
// gateway needs to go on (the original request's id, the tool and its
// arguments, the modern call's requestState, which JSON-RPC ids it asked
// the client under) travels sealed here, for a purpose of its own, so that
// it never opens as any other token nor another token as one of these.

// turnPurpose separates turn tokens from every other token.
const turnPurpose Purpose = "mcp-gateway/multi-turn-sse/v1"

// The first byte of the sealed plaintext: turnVersion, or
// turnVersionTrace for a state with a Trace (appended). A state without
// one is sealed byte for byte as before the trace existed, so that
// instances of an older release open it.
const (
	turnVersion      = 1
	turnVersionTrace = 2
)

// Bounds of a TurnState's fields, in bytes (or entries), and of the whole
// state: the token travels as a Last-Event-ID header, so it is kept small.
// SealTurn refuses a state beyond them (ErrTurnTooLarge); OpenTurn refuses
// a token longer than the largest state seals to (MaxTurnToken).
const (
	MaxTurnCallID    = 128  // CallID (raw JSON)
	MaxTurnName      = 255  // Name (a tool name)
	MaxTurnArguments = 8192 // Arguments (raw JSON)
	MaxTurnState     = 8192 // RequestState
	MaxTurnUpstream  = 1024 // Upstream
	MaxTurnInputs    = 32   // Inputs
	MaxTurnKey       = 128  // an input's Key
	// MaxTurnPlain bounds the whole plaintext, whatever the fields.
	MaxTurnPlain = 12 << 10
)

// MaxTurnToken is the length of the longest token SealTurn makes (16 KiB
// and a little): the longest Last-Event-ID a client sends back.
var MaxTurnToken = (headerSize+MaxTurnPlain+16)*4/3 + 4

// Errors of the turn codec.
var (
	// ErrTurnTooLarge is returned by SealTurn for a state beyond the bounds.
	ErrTurnTooLarge = errors.New("seal: multi-turn state too large")
	// ErrTurnInvalid wraps every failure of OpenTurn to open a token.
	ErrTurnInvalid = errors.New("invalid multi-turn Last-Event-ID")
	// ErrTurnExpired is returned by OpenTurn for a token past its expiry.
	ErrTurnExpired = errors.New("multi-turn Last-Event-ID expired")
)

// Turn input kinds: the input method an input request stands for (the
// same values as the saga's steps).
const (
	TurnElicitation = SagaElicitation // elicitation/create
	TurnSampling    = SagaSampling    // sampling/createMessage
	TurnRoots       = SagaRoots       // roots/list
)

// TurnInput is one input request the client was sent in the turn.
type TurnInput struct {
	// Key is the input request's key in the modern call's inputRequests;
	// the gateway sent the request to the client with Key as its JSON-RPC
	// id (a string), so the client's response maps back to it.
	Key string
	// Kind is TurnElicitation, TurnSampling or TurnRoots.
	Kind byte
}

// TurnState is what a turn token carries.
type TurnState struct {
	// ID is the token's random id, for its single use.
	ID [16]byte
	// Principal is the hash of the authenticated principal.
	Principal [16]byte
	// Session is a hash of the client's Mcp-Session-Id: the answers come
	// in the same session.
	Session [16]byte
	// Expires is when the token stops opening (second precision).
	Expires time.Time
	// CallID is the raw JSON-RPC id of the client's tools/call: the
	// result is answered under it.
	CallID []byte
	// Name is the tool's name.
	Name string
	// Arguments is the tool's raw JSON arguments (empty for none): the
	// retry repeats the original request.
	Arguments []byte
	// RequestState is the requestState of the input_required answer.
	RequestState string
	// Upstream is the URL of the modern upstream the call is passed
	// through to, exactly as configured; empty when the call goes through
	// the forward bridge, whose requestState routes the retry itself.
	Upstream string
	// Inputs are the input requests of the turn.
	Inputs []TurnInput
	// Trace names the span of the call's first request (the client's
	// tools/call), which the spans of its later turns link to; zero for
	// none (tracing off). SealTurn leaves it out of a state that would not
	// fit MaxTurnPlain with it.
	Trace TraceRef
}

// Plaintext layout (varints minimal, strings as uvarint(len) | bytes):
//
//	version(1) | id(16) | principal(16) | session(16) | varint(expires,
//	Unix s) | callID | name | arguments | requestState | upstream |
//	uvarint(n) | n × (kind(1) | key)
//	[version 2: | traceID(16) | spanID(8) | flags(1)]

func (s *TurnState) check() error {
	if len(s.CallID) > MaxTurnCallID || len(s.Name) > MaxTurnName || len(s.Arguments) > MaxTurnArguments ||
		len(s.RequestState) > MaxTurnState || len(s.Upstream) > MaxTurnUpstream || len(s.Inputs) > MaxTurnInputs {
		return ErrTurnTooLarge
	}
	for _, in := range s.Inputs {
		if len(in.Key) > MaxTurnKey || in.Kind < TurnElicitation || in.Kind > TurnRoots {
			return ErrTurnTooLarge
		}
	}
	return nil
}

func (s *TurnState) encode(b []byte) []byte {
	if s.Trace != (TraceRef{}) {
		b = append(b, turnVersionTrace)
	} else {
		b = append(b, turnVersion)
	}
	b = append(b, s.ID[:]...)
	b = append(b, s.Principal[:]...)
	b = append(b, s.Session[:]...)
	b = binary.AppendVarint(b, s.Expires.Unix())
	b = appendField(b, string(s.CallID))
	b = appendField(b, s.Name)
	b = appendField(b, string(s.Arguments))
	b = appendField(b, s.RequestState)
	b = appendField(b, s.Upstream)
	b = binary.AppendUvarint(b, uint64(len(s.Inputs)))
	for _, in := range s.Inputs {
		b = append(b, in.Kind)
		b = appendField(b, in.Key)
	}
	return s.Trace.append(b)
}

// decodeTurn parses a plaintext made by encode; it accepts exactly the
// byte strings encode produces for states within the bounds.
func decodeTurn(b []byte) (TurnState, error) {
	var s TurnState
	if len(b) < 1 || len(b) > MaxTurnPlain || b[0] != turnVersion && b[0] != turnVersionTrace {
		return s, errMalformedState
	}
	d := &resumeDecoder{b: b[1:]}
	d.fixed(s.ID[:])
	d.fixed(s.Principal[:])
	d.fixed(s.Session[:])
	s.Expires = time.Unix(d.varint(), 0)
	s.CallID = d.bytes(MaxTurnCallID)
	s.Name = d.field(MaxTurnName)
	s.Arguments = d.bytes(MaxTurnArguments)
	s.RequestState = d.field(MaxTurnState)
	s.Upstream = d.field(MaxTurnUpstream)
	n := int(d.uvarint(MaxTurnInputs))
	for i := 0; i < n && d.err == nil; i++ {
		var kind [1]byte
		d.fixed(kind[:])
		if d.err == nil && (kind[0] < TurnElicitation || kind[0] > TurnRoots) {
			d.err = errMalformedState
		}
		s.Inputs = append(s.Inputs, TurnInput{Kind: kind[0], Key: d.field(MaxTurnKey)})
	}
	if b[0] == turnVersionTrace {
		s.Trace = d.traceRef()
	}
	if d.err != nil || len(d.b) != 0 {
		return TurnState{}, errMalformedState
	}
	return s, nil
}

// SealTurn seals s into a turn token, or returns ErrTurnTooLarge when a
// field, or the whole, is beyond its bound.
func SealTurn(kr *Keyring, s TurnState) (string, error) {
	if err := s.check(); err != nil {
		return "", err
	}
	b := s.encode(make([]byte, 0, 160+traceSize+len(s.Arguments)+len(s.RequestState)+len(s.Upstream)))
	if len(b) > MaxTurnPlain && s.Trace != (TraceRef{}) {
		s.Trace = TraceRef{} // a trace never makes a turn too large
		b = s.encode(b[:0])
	}
	if len(b) > MaxTurnPlain {
		return "", ErrTurnTooLarge
	}
	return kr.Seal(turnPurpose, b), nil
}

// OpenTurn opens a turn token. Errors wrap ErrTurnInvalid (with
// ErrUnsealable: tampered, sealed under another key or for another
// purpose, malformed, too long), or are ErrTurnExpired.
func OpenTurn(kr *Keyring, token string, now time.Time) (TurnState, error) {
	if len(token) > MaxTurnToken {
		return TurnState{}, fmt.Errorf("%w: %w: too long", ErrTurnInvalid, ErrUnsealable)
	}
	b, err := kr.Open(turnPurpose, token)
	if err != nil {
		return TurnState{}, fmt.Errorf("%w: %w", ErrTurnInvalid, err)
	}
	s, err := decodeTurn(b)
	if err != nil {
		return TurnState{}, fmt.Errorf("%w: %w: %w", ErrTurnInvalid, ErrUnsealable, err)
	}
	if !now.Before(s.Expires) {
		return TurnState{}, fmt.Errorf("%w at %s", ErrTurnExpired, s.Expires.UTC().Format(time.RFC3339))
	}
	return s, nil
}
