package seal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/legacy"
)

// GatewaySessionID is the Mcp-Session-Id the gateway hands to a legacy client.
// It is a sealed Pin: any gateway instance holding the same keys can route it,
// and no client can forge or alter one.
type GatewaySessionID string

// Pin binds a legacy client's session to one upstream, to that upstream's
// own session, and to the principal that opened it.
type Pin struct {
	// Upstream is the URL of the upstream, exactly as configured.
	Upstream string
	// Session is the upstream's session id; empty for an upstream that does
	// not use sessions (the pin then only keeps the client on that upstream).
	Session legacy.UpstreamSessionID
	// Principal is a hash of who opened the session; the gateway serves the
	// session only to the same principal.
	Principal [16]byte
	// Issued is when the gateway pinned the session (second precision).
	Issued time.Time
}

// purposePin separates session tokens from every other sealed token.
// (v1 pins carried no principal: they no longer open, and their clients
// initialize again.)
const purposePin Purpose = "mcp-gateway/legacy-pin/v2"

// maxPinToken bounds the length of a gateway session id the gateway will
// try to open.
const maxPinToken = 16 << 10

// Plaintext layout: issued(8, Unix s, big endian) | principal(16) |
// uvarint(len) upstream | upstream session.

// SealPin seals p into a gateway session id.
func SealPin(kr *Keyring, p Pin) GatewaySessionID {
	b := make([]byte, 0, 8+16+binary.MaxVarintLen64+len(p.Upstream)+len(p.Session))
	b = binary.BigEndian.AppendUint64(b, uint64(p.Issued.Unix()))
	b = append(b, p.Principal[:]...)
	b = binary.AppendUvarint(b, uint64(len(p.Upstream)))
	b = append(b, p.Upstream...)
	b = append(b, p.Session...)
	return GatewaySessionID(kr.Seal(purposePin, b))
}

// OpenPin opens a gateway session id sealed as a pin (OpenSessionID opens
// an id of either kind and says which). Every failure wraps ErrUnsealable.
func OpenPin(kr *Keyring, id GatewaySessionID) (Pin, error) {
	if len(id) > maxPinToken {
		return Pin{}, fmt.Errorf("%w: too long", ErrUnsealable)
	}
	b, err := kr.Open(purposePin, string(id))
	if err != nil {
		return Pin{}, err
	}
	return decodePin(b)
}

// decodePin parses the plaintext of a pin (see SealPin).
func decodePin(b []byte) (Pin, error) {
	const fixed = 8 + 16
	if len(b) < fixed {
		return Pin{}, fmt.Errorf("%w: %w", ErrUnsealable, errShortPin)
	}
	p := Pin{Issued: time.Unix(int64(binary.BigEndian.Uint64(b[:8])), 0)}
	copy(p.Principal[:], b[8:fixed])
	n, w := binary.Uvarint(b[fixed:])
	if w <= 0 || n > uint64(len(b)-fixed-w) {
		return Pin{}, fmt.Errorf("%w: %w", ErrUnsealable, errShortPin)
	}
	rest := b[fixed+w:]
	p.Upstream = string(rest[:n])
	p.Session = legacy.UpstreamSessionID(rest[n:])
	return p, nil
}

var errShortPin = errors.New("truncated pin")
