package seal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// This file is the codec of the requestState the forward bridge hands to a
// modern client with an InputRequiredResult. The state names the parked
// upstream call and binds it to the principal, the originating request and
// an expiry (SEP-2322 server requirements 4 and 5); it is
// sealed with AES-256-GCM by a Keyring, so clients can neither read nor
// forge it. Single use is enforced by the parked-call registry, not
// here.

// statePurpose separates requestState tokens from every other sealed token.
const statePurpose Purpose = "mcp-gateway/request-state/v1"

// stateVersion is the first byte of the sealed plaintext. Version 2 added
// the owner's address; version 1 states no longer open.
const stateVersion = 2

// MaxInstanceLen is the longest State.Instance, in bytes.
const MaxInstanceLen = 255

// MaxAddressLen is the longest State.Address, in bytes.
const MaxAddressLen = 255

// maxStateToken bounds the length of a requestState OpenState will try to
// open: the largest state (255-byte instance and address, 5-byte round,
// 10-byte expiry) is 576 bytes, sealed 609, 812 characters in base64url.
const maxStateToken = 1024

// Sentinel errors of OpenState.
var (
	// ErrStateInvalid means the requestState did not open or is malformed
	// (tampered, truncated, sealed under an unknown key or for another
	// purpose). It comes wrapped together with ErrUnsealable.
	ErrStateInvalid = errors.New("seal: invalid requestState")
	// ErrStateExpired means the requestState opened but its expiry passed.
	ErrStateExpired = errors.New("seal: requestState expired")
)

// State is what a requestState carries.
type State struct {
	// Instance is the id of the gateway instance that owns the parked call
	// (at most MaxInstanceLen bytes).
	Instance string
	// Address is the owner's advertised base URL, where another instance
	// forwards the retry ("" when the owner advertises none; at most
	// MaxAddressLen bytes).
	Address string
	// Handle is the parked call's handle in the owner's registry.
	Handle [16]byte
	// Round counts the input_required rounds of the call.
	Round uint32
	// Principal is the hash of the authenticated principal
	// (translate.PrincipalHash).
	Principal [16]byte
	// Digest is the digest of the originating request
	// (translate.RequestDigest).
	Digest [16]byte
	// Expires is when the state stops opening (second precision).
	Expires time.Time
}

// Plaintext layout (all bounded; varints are minimal):
//
//	version(1) | len(instance)(1) | instance | len(address)(1) | address | handle(16) |
//	uvarint(round) | principal(16) | digest(16) | varint(expires, Unix s)

// encode appends the plaintext of s to b.
func (s State) encode(b []byte) []byte {
	b = append(b, stateVersion, byte(len(s.Instance)))
	b = append(b, s.Instance...)
	b = append(b, byte(len(s.Address)))
	b = append(b, s.Address...)
	b = append(b, s.Handle[:]...)
	b = binary.AppendUvarint(b, uint64(s.Round))
	b = append(b, s.Principal[:]...)
	b = append(b, s.Digest[:]...)
	return binary.AppendVarint(b, s.Expires.Unix())
}

var errMalformedState = errors.New("malformed state")

// decodeState parses a plaintext made by encode; it accepts exactly the
// byte strings encode produces.
func decodeState(b []byte) (State, error) {
	var s State
	if len(b) < 1 || b[0] != stateVersion {
		return s, errMalformedState
	}
	var ok bool
	if s.Instance, b, ok = lenPrefixed(b[1:]); !ok {
		return s, errMalformedState
	}
	if s.Address, b, ok = lenPrefixed(b); !ok || len(b) < 16 {
		return s, errMalformedState
	}
	copy(s.Handle[:], b)
	b = b[16:]
	round, w := binary.Uvarint(b)
	if w <= 0 || round > 1<<32-1 || w != uvarintLen(round) {
		return s, errMalformedState
	}
	s.Round = uint32(round)
	b = b[w:]
	if len(b) < 32 {
		return s, errMalformedState
	}
	copy(s.Principal[:], b)
	copy(s.Digest[:], b[16:])
	b = b[32:]
	exp, w := binary.Varint(b)
	if w <= 0 || w != len(b) || w != varintLen(exp) {
		return s, errMalformedState
	}
	s.Expires = time.Unix(exp, 0)
	return s, nil
}

func uvarintLen(v uint64) int {
	var buf [binary.MaxVarintLen64]byte
	return binary.PutUvarint(buf[:], v)
}

func varintLen(v int64) int {
	var buf [binary.MaxVarintLen64]byte
	return binary.PutVarint(buf[:], v)
}

// SealState seals s into a requestState: a URL-safe string of about 120
// characters plus 4/3 of len(s.Instance)+len(s.Address). Expires is kept to
// the second. It panics if s.Instance is longer than MaxInstanceLen or
// s.Address longer than MaxAddressLen, which are configuration errors the
// caller must reject earlier.
func SealState(kr *Keyring, s State) string {
	if len(s.Instance) > MaxInstanceLen || len(s.Address) > MaxAddressLen {
		panic("seal: State.Instance or State.Address longer than " + strconv.Itoa(MaxInstanceLen) + " bytes")
	}
	var buf [3 + MaxInstanceLen + MaxAddressLen + 16 + binary.MaxVarintLen32 + 32 + binary.MaxVarintLen64]byte
	return kr.Seal(statePurpose, s.encode(buf[:0]))
}

// OpenState opens a requestState sealed by SealState with a key of kr and
// checks its expiry against now. Every token that does not open or does not
// parse gives an error wrapping both ErrStateInvalid and
// ErrUnsealable. A state whose Expires is not after now gives an
// error wrapping ErrStateExpired, returned together with the decoded State
// so that the caller can release the parked call it names.
func OpenState(kr *Keyring, token string, now time.Time) (State, error) {
	if len(token) > maxStateToken {
		return State{}, fmt.Errorf("%w: %w: too long", ErrStateInvalid, ErrUnsealable)
	}
	b, err := kr.Open(statePurpose, token)
	if err != nil {
		return State{}, fmt.Errorf("%w: %w", ErrStateInvalid, err)
	}
	s, err := decodeState(b)
	if err != nil {
		return State{}, fmt.Errorf("%w: %w: %w", ErrStateInvalid, ErrUnsealable, err)
	}
	if !now.Before(s.Expires) {
		return s, fmt.Errorf("%w at %s", ErrStateExpired, s.Expires.UTC().Format(time.RFC3339))
	}
	return s, nil
}
