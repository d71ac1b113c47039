package seal

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
)

// KeySize is the size in bytes of every sealing key (AES-256).
const KeySize = 32

// tokenVersion is the first byte of every sealed token, so that the format can
// change without old tokens being misread.
const tokenVersion = 1

// Purpose separates the kinds of sealed token: a token sealed for one purpose
// never opens for another, because the purpose is bound as additional data.
type Purpose string

// ErrUnsealable is returned (wrapped) for every token that does not open:
// malformed, truncated, tampered, sealed under an unknown key or for another
// purpose. Callers must not tell these apart to clients.
var ErrUnsealable = errors.New("token does not open")

// ErrUnknownKey (which wraps ErrUnsealable) is returned, wrapped, for a
// token that is well formed but sealed under a key the keyring lacks: most
// often another instance's, configured with another state_key. Clients
// must not be told; operators may (a fleet that shares no key).
var ErrUnknownKey = fmt.Errorf("%w: unknown key", ErrUnsealable)

// Keyring seals and opens tokens with AES-256-GCM. The first key seals; every
// key opens, so keys can be rotated by prepending a new one. A Keyring is
// immutable and safe for concurrent use; the AEADs are built once, so sealing
// costs no key derivation.
type Keyring struct {
	keys  []ringKey
	names []MACKey // MACKeys(storageNamePurpose), for PrincipalNames
}

type ringKey struct {
	id     uint32
	aead   cipher.AEAD
	secret []byte // for MACKeys
}

// NewKeyring returns a keyring over the given 32-byte keys (the first seals).
func NewKeyring(keys ...[]byte) (*Keyring, error) {
	if len(keys) == 0 {
		return nil, errors.New("no keys")
	}
	kr := &Keyring{}
	seen := map[uint32]bool{}
	for i, k := range keys {
		if len(k) != KeySize {
			return nil, fmt.Errorf("key %d: %d bytes, want %d", i, len(k), KeySize)
		}
		block, err := aes.NewCipher(k)
		if err != nil {
			return nil, fmt.Errorf("key %d: %w", i, err)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("key %d: %w", i, err)
		}
		id := KeyID(k)
		if seen[id] {
			return nil, fmt.Errorf("key %d: duplicate key", i)
		}
		seen[id] = true
		kr.keys = append(kr.keys, ringKey{id: id, aead: aead, secret: append([]byte(nil), k...)})
	}
	kr.names = kr.MACKeys(storageNamePurpose)
	return kr, nil
}

// KeyID is the public identifier of a key: the first four bytes of its
// SHA-256. It is stable across key orderings and reveals nothing useful.
func KeyID(key []byte) uint32 {
	sum := sha256.Sum256(key)
	return binary.BigEndian.Uint32(sum[:4])
}

// ParseKey decodes a base64 (standard or URL alphabet, padded or not) key and
// checks its size.
func ParseKey(s string) ([]byte, error) {
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if k, err := enc.DecodeString(s); err == nil {
			if len(k) != KeySize {
				return nil, fmt.Errorf("key decodes to %d bytes, want %d", len(k), KeySize)
			}
			return k, nil
		}
	}
	return nil, errors.New("key is not valid base64")
}

// NewRandomKey returns a fresh random 32-byte key.
func NewRandomKey() []byte {
	k := make([]byte, KeySize)
	if _, err := rand.Read(k); err != nil {
		panic(fmt.Sprintf("crypto/rand failed: %v", err)) // never happens on supported platforms
	}
	return k
}

// MACKey is a key for authenticating messages (HMAC), derived from one key
// of a Keyring for one purpose.
type MACKey struct {
	// ID is the KeyID of the keyring key it was derived from.
	ID uint32
	// Key is 32 bytes, HKDF-SHA256 of the keyring key with the purpose as
	// info: it reveals nothing of the keyring key nor of the keys of other
	// purposes.
	Key []byte
}

// MACKeys derives one MACKey per keyring key for purpose, in keyring order
// (the first is for signing). Derive once and keep the result: this is the
// only key derivation the keyring does.
func (kr *Keyring) MACKeys(purpose Purpose) []MACKey {
	out := make([]MACKey, len(kr.keys))
	for i, k := range kr.keys {
		key, err := hkdf.Key(sha256.New, k.secret, nil, string(purpose), KeySize)
		if err != nil {
			panic(fmt.Sprintf("hkdf: %v", err)) // only for lengths over 255*32 bytes
		}
		out[i] = MACKey{ID: k.id, Key: key}
	}
	return out
}

// header layout: version(1) | key id(4) | nonce(12)
const headerSize = 1 + 4 + 12

// Seal encrypts and authenticates plaintext for purpose and returns a
// URL-safe token of visible ASCII characters.
func (kr *Keyring) Seal(purpose Purpose, plaintext []byte) string {
	return base64.RawURLEncoding.EncodeToString(kr.SealBytes(purpose, plaintext))
}

// SealBytes is Seal without the base64: for what is kept in storage
// rather than sent as text (a quarter smaller).
func (kr *Keyring) SealBytes(purpose Purpose, plaintext []byte) []byte {
	k := kr.keys[0]
	buf := make([]byte, headerSize, headerSize+len(plaintext)+k.aead.Overhead())
	buf[0] = tokenVersion
	binary.BigEndian.PutUint32(buf[1:5], k.id)
	if _, err := rand.Read(buf[5:headerSize]); err != nil {
		panic(fmt.Sprintf("crypto/rand failed: %v", err))
	}
	return k.aead.Seal(buf, buf[5:headerSize], plaintext, aad(purpose, buf[:5]))
}

// Open authenticates and decrypts a token sealed for purpose. Every failure
// wraps ErrUnsealable.
func (kr *Keyring) Open(purpose Purpose, token string) ([]byte, error) {
	_, pt, err := kr.OpenAny(token, purpose)
	return pt, err
}

// OpenAny authenticates and decrypts a token sealed for one of purposes,
// and says which. It is how a caller tells apart tokens that travel in the
// same place (a session id may be a pin or a gateway-held session) without
// a clear-text tag a client could forge: the purpose is bound as
// additional data, so a token authenticates for the purpose it was sealed
// for and for no other, and is rejected as a whole otherwise. Every
// failure wraps ErrUnsealable.
func (kr *Keyring) OpenAny(token string, purposes ...Purpose) (Purpose, []byte, error) {
	raw, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		return "", nil, fmt.Errorf("%w: not base64url", ErrUnsealable)
	}
	return kr.openBytes(raw, purposes...)
}

// OpenBytes opens what SealBytes sealed for purpose. Every failure wraps
// ErrUnsealable.
func (kr *Keyring) OpenBytes(purpose Purpose, sealed []byte) ([]byte, error) {
	_, pt, err := kr.openBytes(sealed, purpose)
	return pt, err
}

func (kr *Keyring) openBytes(raw []byte, purposes ...Purpose) (Purpose, []byte, error) {
	if len(raw) < headerSize || raw[0] != tokenVersion {
		return "", nil, fmt.Errorf("%w: bad header", ErrUnsealable)
	}
	id := binary.BigEndian.Uint32(raw[1:5])
	for _, k := range kr.keys {
		if k.id != id {
			continue
		}
		for _, purpose := range purposes {
			pt, err := k.aead.Open(nil, raw[5:headerSize], raw[headerSize:], aad(purpose, raw[:5]))
			if err == nil {
				return purpose, pt, nil
			}
		}
		return "", nil, fmt.Errorf("%w: authentication failed", ErrUnsealable)
	}
	return "", nil, ErrUnknownKey
}

func aad(purpose Purpose, header []byte) []byte {
	b := make([]byte, 0, len(purpose)+1+len(header))
	b = append(b, purpose...)
	b = append(b, 0)
	return append(b, header...)
}
