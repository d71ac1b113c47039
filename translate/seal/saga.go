package seal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// This file is the codec of a sagaToken: the state of a tool-call saga
// (tools/callSaga, tools/resumeSaga) between two of its turns. A saga is
// a modern tools/call the gateway makes on the client's behalf; when the
// call answers input_required, everything the gateway needs to retry it
// (the call's own requestState, the tool and its arguments, the steps the
// client is asked) travels sealed here, so that any instance holding the
// key serves the next turn. It is sealed for a purpose of its own, so it
// never opens as any other token nor another token as one of these.

// sagaPurpose separates sagaTokens from every other token.
const sagaPurpose Purpose = "mcp-gateway/saga-token/v1"

// The first byte of the sealed plaintext: sagaVersion, or
// sagaVersionTrace for a state with a Trace (appended). A state without
// one is sealed byte for byte as before the trace existed, so that
// instances of an older release open it.
const (
	sagaVersion      = 1
	sagaVersionTrace = 2
)

// Bounds of a SagaState's fields, in bytes (or entries). SealSaga refuses
// a state beyond them (ErrSagaTooLarge); OpenSaga refuses a token longer
// than the largest state seals to.
const (
	MaxSagaName      = 255   // Name (a tool name)
	MaxSagaArguments = 16384 // Arguments (raw JSON)
	MaxSagaState     = 16384 // RequestState
	MaxSagaSteps     = 64    // Steps
	MaxSagaStepID    = 128   // a step's ID (an input key)
	// maxSagaPlain bounds the whole plaintext.
	maxSagaPlain = 1 + 16 + 16 + 10 + 3 + MaxSagaName + 3 + MaxSagaArguments + 3 + MaxSagaState +
		1 + MaxSagaSteps*(2+1+MaxSagaStepID) + traceSize
)

// maxSagaToken bounds the length of a token OpenSaga tries to open.
var maxSagaToken = (headerSize+maxSagaPlain+16)*4/3 + 4

// Errors of the saga codec.
var (
	// ErrSagaTooLarge is returned by SealSaga for a state beyond the bounds.
	ErrSagaTooLarge = errors.New("seal: saga state too large")
	// ErrSagaInvalid wraps every failure of OpenSaga to open a token.
	ErrSagaInvalid = errors.New("invalid sagaToken")
	// ErrSagaExpired is returned by OpenSaga for a token past its expiry.
	ErrSagaExpired = errors.New("sagaToken expired")
)

// SagaStep kinds: the input method a step stands for.
const (
	SagaElicitation byte = 1 // elicitation/create
	SagaSampling    byte = 2 // sampling/createMessage
	SagaRoots       byte = 3 // roots/list (answered by the gateway)
)

// SagaStep is one input request of the current suspension.
type SagaStep struct {
	// ID is the step's id: the key of the input request.
	ID string
	// Kind is SagaElicitation, SagaSampling or SagaRoots.
	Kind byte
}

// SagaState is what a sagaToken carries.
type SagaState struct {
	// ID is the token's random id, for its single use.
	ID [16]byte
	// Principal is the hash of the authenticated principal.
	Principal [16]byte
	// Expires is when the token stops opening (second precision).
	Expires time.Time
	// Name is the tool's name.
	Name string
	// Arguments is the tool's raw JSON arguments ("" for none): the
	// retry repeats the original request.
	Arguments []byte
	// RequestState is the requestState of the input_required answer.
	RequestState string
	// Steps are the input requests of the current suspension.
	Steps []SagaStep
	// Trace names the span of the saga's first request (tools/callSaga),
	// which the spans of its resumeSagas link to; zero for none (tracing
	// off).
	Trace TraceRef
}

// Plaintext layout (varints minimal, strings as uvarint(len) | bytes):
//
//	version(1) | id(16) | principal(16) | varint(expires, Unix s) | name |
//	arguments | requestState | uvarint(n) | n × (kind(1) | stepID)
//	[version 2: | traceID(16) | spanID(8) | flags(1)]

func (s *SagaState) check() error {
	if len(s.Name) > MaxSagaName || len(s.Arguments) > MaxSagaArguments || len(s.RequestState) > MaxSagaState ||
		len(s.Steps) > MaxSagaSteps {
		return ErrSagaTooLarge
	}
	for _, st := range s.Steps {
		if len(st.ID) > MaxSagaStepID || st.Kind < SagaElicitation || st.Kind > SagaRoots {
			return ErrSagaTooLarge
		}
	}
	return nil
}

func (s *SagaState) encode(b []byte) []byte {
	if s.Trace != (TraceRef{}) {
		b = append(b, sagaVersionTrace)
	} else {
		b = append(b, sagaVersion)
	}
	b = append(b, s.ID[:]...)
	b = append(b, s.Principal[:]...)
	b = binary.AppendVarint(b, s.Expires.Unix())
	b = appendField(b, s.Name)
	b = appendField(b, string(s.Arguments))
	b = appendField(b, s.RequestState)
	b = binary.AppendUvarint(b, uint64(len(s.Steps)))
	for _, st := range s.Steps {
		b = append(b, st.Kind)
		b = appendField(b, st.ID)
	}
	return s.Trace.append(b)
}

// decodeSaga parses a plaintext made by encode; it accepts exactly the
// byte strings encode produces for states within the bounds.
func decodeSaga(b []byte) (SagaState, error) {
	var s SagaState
	if len(b) < 1 || len(b) > maxSagaPlain || b[0] != sagaVersion && b[0] != sagaVersionTrace {
		return s, errMalformedState
	}
	d := &resumeDecoder{b: b[1:]}
	d.fixed(s.ID[:])
	d.fixed(s.Principal[:])
	s.Expires = time.Unix(d.varint(), 0)
	s.Name = d.field(MaxSagaName)
	s.Arguments = d.bytes(MaxSagaArguments)
	s.RequestState = d.field(MaxSagaState)
	n := int(d.uvarint(MaxSagaSteps))
	for i := 0; i < n && d.err == nil; i++ {
		var kind [1]byte
		d.fixed(kind[:])
		if d.err == nil && (kind[0] < SagaElicitation || kind[0] > SagaRoots) {
			d.err = errMalformedState
		}
		s.Steps = append(s.Steps, SagaStep{Kind: kind[0], ID: d.field(MaxSagaStepID)})
	}
	if b[0] == sagaVersionTrace {
		s.Trace = d.traceRef()
	}
	if d.err != nil || len(d.b) != 0 {
		return SagaState{}, errMalformedState
	}
	return s, nil
}

// SealSaga seals s into a sagaToken, or returns ErrSagaTooLarge when a
// field is beyond its bound.
func SealSaga(kr *Keyring, s SagaState) (string, error) {
	if err := s.check(); err != nil {
		return "", err
	}
	return kr.Seal(sagaPurpose, s.encode(make([]byte, 0, 128+len(s.Arguments)+len(s.RequestState)))), nil
}

// OpenSaga opens a sagaToken. Errors wrap ErrSagaInvalid (with
// ErrUnsealable: tampered, sealed under another key or for another
// purpose, malformed), or are ErrSagaExpired.
func OpenSaga(kr *Keyring, token string, now time.Time) (SagaState, error) {
	if len(token) > maxSagaToken {
		return SagaState{}, fmt.Errorf("%w: %w: too long", ErrSagaInvalid, ErrUnsealable)
	}
	b, err := kr.Open(sagaPurpose, token)
	if err != nil {
		return SagaState{}, fmt.Errorf("%w: %w", ErrSagaInvalid, err)
	}
	s, err := decodeSaga(b)
	if err != nil {
		return SagaState{}, fmt.Errorf("%w: %w: %w", ErrSagaInvalid, ErrUnsealable, err)
	}
	if !now.Before(s.Expires) {
		return SagaState{}, fmt.Errorf("%w at %s", ErrSagaExpired, s.Expires.UTC().Format(time.RFC3339))
	}
	return s, nil
}
