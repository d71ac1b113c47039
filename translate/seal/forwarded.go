package seal

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"strconv"
	"strings"
	"time"
)

// This file authenticates requests one gateway instance forwards to another:
// a retry for a call parked on another instance, or a legacy client's
// answer to an in-line request another instance sent. The forwarding
// instance signs the request with an HMAC-SHA256 under a key derived from
// the shared state_key; the owner verifies it before anything reaches an
// upstream. The signature binds the target instance, an expiry, a single-use
// nonce, the principal the forwarding instance established (its hash), and
// what the owner acts on: the HTTP method and request target, a digest of
// the body, and the Authorization and Mcp-Session-Id headers.

// ForwardedHeader carries the authentication of a forwarded request.
const ForwardedHeader = "Mcp-Gateway-Forwarded"

// forwardPurpose derives the forwarding MAC keys from the keyring. v2 added
// the principal and millisecond expiries: an instance of another version
// refuses the header (403) rather than misread it.
const forwardPurpose Purpose = "mcp-gateway/forwarded/v2"

// Validity of a forwarding header: it expires forwardTTL after signing, and
// an expiry further ahead than forwardTTL+maxClockSkew is refused (it would
// keep a nonce in the replay cache too long).
const (
	forwardTTL   = 30 * time.Second
	maxClockSkew = 30 * time.Second
)

// Errors of ForwardAuth.Verify. A client must not tell the first apart from
// a bad key; the others say what to fix.
var (
	// ErrForwardInvalid: malformed, signed under an unknown key, or the
	// signature does not match the request.
	ErrForwardInvalid = errors.New("invalid forwarding header")
	// ErrForwardExpired: the header's expiry passed (or lies too far ahead).
	ErrForwardExpired = errors.New("forwarding header expired")
	// ErrForwardTarget: the header was signed for another instance.
	ErrForwardTarget = errors.New("forwarding header is for another gateway instance")
	// ErrForwardReplayed: the header's nonce was seen before.
	ErrForwardReplayed = errors.New("forwarding header replayed")
	// ErrForwardBusy: the header is older than what the replay cache
	// still remembers after a flood; a fresh one passes.
	ErrForwardBusy = errors.New("too many forwarded requests")
)

// ForwardedRequest is what a forwarding header's signature covers.
type ForwardedRequest struct {
	Method        string // HTTP method
	URI           string // request target: path and query
	Body          []byte
	Authorization string // the Authorization header
	SessionID     string // the Mcp-Session-Id header
	// Principal is the hash (translate.PrincipalHash) of the principal the
	// forwarding instance established for the request (its own
	// authentication ran there); the owner serves the request as this
	// principal.
	Principal [16]byte
}

// ForwardAuth signs and verifies forwarding headers for one instance. It is
// safe for concurrent use.
type ForwardAuth struct {
	self string
	keys []MACKey
	seen *ReplayFilter
}

// NewForwardAuth returns the forwarding authenticator of instance self,
// with MAC keys derived once from kr; seen remembers the nonces of verified
// headers (share it across config reloads).
func NewForwardAuth(kr *Keyring, self string, seen *ReplayFilter) *ForwardAuth {
	return &ForwardAuth{self: self, keys: kr.MACKeys(forwardPurpose), seen: seen}
}

// Header layout: v2;k=<key id, 8 hex>;t=<target instance>;e=<expiry, Unix
// milliseconds>;n=<nonce, 16 bytes base64url>;p=<principal hash, 16 bytes
// base64url>;s=<HMAC-SHA256, base64url>

// Sign returns the header value authenticating r, sent to instance target.
func (a *ForwardAuth) Sign(target string, r ForwardedRequest, now time.Time) string {
	var nonce [16]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		panic(fmt.Sprintf("crypto/rand failed: %v", err))
	}
	k := a.keys[0]
	exp := now.Add(forwardTTL).UnixMilli()
	return forwardedHeader{keyID: k.ID, target: target, expires: exp, nonce: nonce, principal: r.Principal,
		mac: forwardMAC(k.Key, target, exp, nonce, r)}.String()
}

// Verify checks a header value for r, received by this instance at now, and
// consumes its nonce. It returns the principal hash the header carries
// (r.Principal is not read: the header says it, and the signature covers
// it). Every failure wraps one of the ErrForward* errors.
func (a *ForwardAuth) Verify(value string, r ForwardedRequest, now time.Time) ([16]byte, error) {
	h, err := parseForwarded(value)
	if err != nil {
		return [16]byte{}, fmt.Errorf("%w: %w", ErrForwardInvalid, err)
	}
	r.Principal = h.principal
	if err := a.verify(h, r, now); err != nil {
		return [16]byte{}, err
	}
	return h.principal, nil
}

func (a *ForwardAuth) verify(h forwardedHeader, r ForwardedRequest, now time.Time) error {
	var key []byte
	for _, k := range a.keys {
		if k.ID == h.keyID {
			key = k.Key
			break
		}
	}
	if key == nil {
		return fmt.Errorf("%w: unknown key (every instance of a fleet must share state_key)", ErrForwardInvalid)
	}
	if !hmac.Equal(h.mac, forwardMAC(key, h.target, h.expires, h.nonce, r)) {
		return fmt.Errorf("%w: signature mismatch", ErrForwardInvalid)
	}
	if h.target != a.self {
		return fmt.Errorf("%w: signed for %q, this is %q", ErrForwardTarget, h.target, a.self)
	}
	exp := time.UnixMilli(h.expires)
	if !now.Before(exp) || exp.After(now.Add(forwardTTL+maxClockSkew)) {
		return fmt.Errorf("%w (expiry %s, now %s)", ErrForwardExpired, exp.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	}
	switch err := a.seen.Use(h.nonce, exp, now); {
	case errors.Is(err, ErrReplayed):
		return ErrForwardReplayed
	case err != nil:
		return fmt.Errorf("%w: the header is older than the nonces still remembered; a fresh one passes", ErrForwardBusy)
	}
	return nil
}

type forwardedHeader struct {
	keyID     uint32
	target    string
	expires   int64
	nonce     [16]byte
	principal [16]byte
	mac       []byte
}

// maxForwardedHeader bounds the header value: 255-byte target, 20-digit
// expiry and fixed-size fields.
const maxForwardedHeader = 440

// String is the header's one canonical text.
func (h forwardedHeader) String() string {
	var id [4]byte
	binary.BigEndian.PutUint32(id[:], h.keyID)
	return "v2;k=" + hex.EncodeToString(id[:]) + ";t=" + h.target + ";e=" + strconv.FormatInt(h.expires, 10) +
		";n=" + base64.RawURLEncoding.EncodeToString(h.nonce[:]) +
		";p=" + base64.RawURLEncoding.EncodeToString(h.principal[:]) +
		";s=" + base64.RawURLEncoding.EncodeToString(h.mac)
}

// parseForwarded accepts only the canonical text of a header (String):
// hex case, a signed or zero-padded expiry and the unused bits of a
// base64 character would otherwise give one signed header many texts.
func parseForwarded(v string) (forwardedHeader, error) {
	var h forwardedHeader
	if len(v) > maxForwardedHeader {
		return h, errors.New("too long")
	}
	parts := strings.Split(v, ";")
	if len(parts) != 7 || parts[0] != "v2" {
		return h, errors.New("not v2;k=;t=;e=;n=;p=;s=")
	}
	var field [6]string
	for i, name := range []string{"k=", "t=", "e=", "n=", "p=", "s="} {
		f, ok := strings.CutPrefix(parts[i+1], name)
		if !ok {
			return h, fmt.Errorf("field %d is not %s", i+1, name)
		}
		field[i] = f
	}
	id, err := hex.DecodeString(field[0])
	if err != nil || len(id) != 4 {
		return h, errors.New("bad key id")
	}
	h.keyID = binary.BigEndian.Uint32(id)
	if h.target = field[1]; h.target == "" {
		return h, errors.New("no target")
	}
	if h.expires, err = strconv.ParseInt(field[2], 10, 64); err != nil {
		return h, errors.New("bad expiry")
	}
	if n, err := base64.RawURLEncoding.DecodeString(field[3]); err != nil || len(n) != len(h.nonce) {
		return h, errors.New("bad nonce")
	} else {
		copy(h.nonce[:], n)
	}
	if p, err := base64.RawURLEncoding.DecodeString(field[4]); err != nil || len(p) != len(h.principal) {
		return h, errors.New("bad principal")
	} else {
		copy(h.principal[:], p)
	}
	if h.mac, err = base64.RawURLEncoding.DecodeString(field[5]); err != nil || len(h.mac) != sha256.Size {
		return h, errors.New("bad signature encoding")
	}
	if h.String() != v {
		return h, errors.New("not in canonical form")
	}
	return h, nil
}

// forwardMAC is the HMAC-SHA256 of the signed fields, each length-prefixed.
func forwardMAC(key []byte, target string, expires int64, nonce [16]byte, r ForwardedRequest) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(forwardPurpose))
	m.Write([]byte{0})
	writeField(m, []byte(target))
	writeField(m, strconv.AppendInt(nil, expires, 10))
	writeField(m, nonce[:])
	writeField(m, []byte(r.Method))
	writeField(m, []byte(r.URI))
	body := sha256.Sum256(r.Body)
	writeField(m, body[:])
	writeField(m, []byte(r.Authorization))
	writeField(m, []byte(r.SessionID))
	writeField(m, r.Principal[:])
	return m.Sum(nil)
}

// writeField writes b length-prefixed, so that fields cannot run together.
func writeField(h hash.Hash, b []byte) {
	var n [binary.MaxVarintLen64]byte
	h.Write(n[:binary.PutUvarint(n[:], uint64(len(b)))])
	h.Write(b)
}
