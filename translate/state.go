package translate

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"slices"
	"strconv"
	"time"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/legacy"
	"github.com/tidwall/gjson"
)

// This file is the codec of the requestState the forward bridge hands to a
// modern client with an InputRequiredResult. The state names the parked
// upstream call and binds it to the principal, the originating request and
// an expiry (SEP-2322 server requirements 4 and 5, PROTOCOL.md §3.3); it is
// sealed with AES-256-GCM by a legacy.Keyring, so clients can neither read
// nor forge it. Single use is enforced by the parked-call registry, not
// here.

// statePurpose separates requestState tokens from every other sealed token.
const statePurpose legacy.Purpose = "mcp-gateway/request-state/v1"

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
	// purpose). It comes wrapped together with legacy.ErrUnsealable.
	ErrStateInvalid = errors.New("translate: invalid requestState")
	// ErrStateExpired means the requestState opened but its expiry passed.
	ErrStateExpired = errors.New("translate: requestState expired")
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
	// Principal is PrincipalHash of the authenticated principal.
	Principal [16]byte
	// Digest is RequestDigest of the originating request.
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
	if len(b) < 2 || b[0] != stateVersion {
		return s, errMalformedState
	}
	n := int(b[1])
	b = b[2:]
	if len(b) < n+1 {
		return s, errMalformedState
	}
	s.Instance = string(b[:n])
	b = b[n:]
	n = int(b[0])
	b = b[1:]
	if len(b) < n+16 {
		return s, errMalformedState
	}
	s.Address = string(b[:n])
	b = b[n:]
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
func SealState(kr *legacy.Keyring, s State) string {
	if len(s.Instance) > MaxInstanceLen || len(s.Address) > MaxAddressLen {
		panic("translate: State.Instance or State.Address longer than " + strconv.Itoa(MaxInstanceLen) + " bytes")
	}
	var buf [3 + MaxInstanceLen + MaxAddressLen + 16 + binary.MaxVarintLen32 + 32 + binary.MaxVarintLen64]byte
	return kr.Seal(statePurpose, s.encode(buf[:0]))
}

// OpenState opens a requestState sealed by SealState with a key of kr and
// checks its expiry against now. Every token that does not open or does not
// parse gives an error wrapping both ErrStateInvalid and
// legacy.ErrUnsealable. A state whose Expires is not after now gives an
// error wrapping ErrStateExpired, returned together with the decoded State
// so that the caller can release the parked call it names.
func OpenState(kr *legacy.Keyring, token string, now time.Time) (State, error) {
	if len(token) > maxStateToken {
		return State{}, fmt.Errorf("%w: %w: too long", ErrStateInvalid, legacy.ErrUnsealable)
	}
	b, err := kr.Open(statePurpose, token)
	if err != nil {
		return State{}, fmt.Errorf("%w: %w", ErrStateInvalid, err)
	}
	s, err := decodeState(b)
	if err != nil {
		return State{}, fmt.Errorf("%w: %w: %w", ErrStateInvalid, legacy.ErrUnsealable, err)
	}
	if !now.Before(s.Expires) {
		return s, fmt.Errorf("%w at %s", ErrStateExpired, s.Expires.UTC().Format(time.RFC3339))
	}
	return s, nil
}

// PrincipalHash returns the first 16 bytes of the SHA-256 of principal,
// the form in which a State binds its principal.
func PrincipalHash(principal string) [16]byte {
	sum := sha256.Sum256([]byte(principal))
	var h [16]byte
	copy(h[:], sum[:])
	return h
}

// RequestDigest digests a modern request's method and salient params, so
// that the state minted for one request does not resume another (SEP-2322
// server requirement 5). The salient params are:
//
//   - tools/call and prompts/get: name and arguments (absent or null
//     arguments count as {});
//   - resources/read: uri;
//   - any other method: all params except _meta, inputResponses and
//     requestState.
//
// Values are canonicalized first, so that a client re-serializing its retry
// keeps the digest: object keys sorted (by their unescaped UTF-8 bytes,
// recursively), no whitespace, strings compared by their unescaped text,
// numbers kept as written (1 and 1.0 differ). A missing value, null and
// every other value digest differently. params that is not valid JSON
// digests like absent params. The result is the first 16 bytes of a
// domain-separated SHA-256.
func RequestDigest(method string, params []byte) [16]byte {
	h := sha256.New()
	h.Write([]byte("mcp-gateway/request-digest/v1\x00"))
	writeField(h, []byte(method))
	var p gjson.Result
	if legacy.ValidJSON(params) == nil {
		p = gjson.ParseBytes(params)
	}
	var c canonicalizer
	switch method {
	case "tools/call", "prompts/get":
		c.field(h, p.Get("name"))
		args := p.Get("arguments")
		if !args.Exists() || args.Type == gjson.Null {
			args = gjson.Parse("{}") // no arguments mean empty arguments
		}
		c.field(h, args)
	case "resources/read":
		c.field(h, p.Get("uri"))
	default:
		if p.IsObject() {
			c.buf = c.object(c.buf[:0], p, 0, "_meta", "inputResponses", "requestState")
			writeField(h, c.buf)
		} else {
			c.field(h, p)
		}
	}
	var d [16]byte
	copy(d[:], h.Sum(nil))
	return d
}

// writeField writes b length-prefixed, so that fields cannot run together.
func writeField(h hash.Hash, b []byte) {
	var n [binary.MaxVarintLen64]byte
	h.Write(n[:binary.PutUvarint(n[:], uint64(len(b)))])
	h.Write(b)
}

// maxCanonicalDepth bounds recursion; deeper values are written as their
// raw text.
const maxCanonicalDepth = 256

// canonicalizer writes gjson values in canonical form.
type canonicalizer struct {
	buf []byte
}

// field writes v canonicalized, or an empty field when v does not exist
// (no JSON value has an empty canonical form).
func (c *canonicalizer) field(h hash.Hash, v gjson.Result) {
	c.buf = c.buf[:0]
	if v.Exists() {
		c.buf = c.value(c.buf, v, 0)
	}
	writeField(h, c.buf)
}

func (c *canonicalizer) value(b []byte, v gjson.Result, depth int) []byte {
	if depth > maxCanonicalDepth {
		return append(b, v.Raw...)
	}
	switch {
	case v.IsObject():
		return c.object(b, v, depth)
	case v.IsArray():
		b = append(b, '[')
		i := 0
		v.ForEach(func(_, e gjson.Result) bool {
			if i > 0 {
				b = append(b, ',')
			}
			i++
			b = c.value(b, e, depth+1)
			return true
		})
		return append(b, ']')
	case v.Type == gjson.String:
		return strconv.AppendQuote(b, v.Str)
	default: // numbers as written, true, false, null
		return append(b, v.Raw...)
	}
}

func (c *canonicalizer) object(b []byte, v gjson.Result, depth int, skip ...string) []byte {
	type kv struct {
		k string
		v gjson.Result
	}
	var ms []kv
	v.ForEach(func(k, val gjson.Result) bool {
		if !slices.Contains(skip, k.Str) {
			ms = append(ms, kv{k.Str, val})
		}
		return true
	})
	slices.SortStableFunc(ms, func(a, b kv) int {
		switch {
		case a.k < b.k:
			return -1
		case a.k > b.k:
			return 1
		}
		return 0
	})
	b = append(b, '{')
	for i, m := range ms {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendQuote(b, m.k)
		b = append(b, ':')
		b = c.value(b, m.v, depth+1)
	}
	return append(b, '}')
}
