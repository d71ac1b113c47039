package seal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
)

// ClientSession is a legacy session the gateway itself holds for a legacy
// client in front of a modern (stateless) upstream: the reverse bridge. The
// whole session travels in its id, sealed, so that any gateway instance
// with the same keys can serve it without a shared store.
type ClientSession struct {
	// ID names the session in per-instance tables (its log level, whether
	// it was deleted). It is random.
	ID [16]byte
	// Upstream is the URL of the modern upstream, exactly as configured.
	Upstream string
	// Principal is a hash of who opened the session; the session only
	// opens for the same principal.
	Principal [16]byte
	// ProtocolVersion is the negotiated legacy protocol version.
	ProtocolVersion string
	// Capabilities is the client's initialize capabilities, a compact JSON
	// object.
	Capabilities []byte
	// ClientInfo is the client's initialize clientInfo, a compact JSON
	// object (nil if it sent none).
	ClientInfo []byte
	// Issued is when the session was opened (second precision).
	Issued time.Time
}

// Limits of the fields of a ClientSession, in bytes: a session id travels
// in a header on every request, so it must stay small.
const (
	MaxClientSessionUpstream     = 2048
	MaxClientSessionVersion      = 32
	MaxClientSessionCapabilities = 2048
	MaxClientSessionInfo         = 1024
)

// ErrClientSessionTooLarge is returned by SealClientSession when a field is
// over its limit.
var ErrClientSessionTooLarge = errors.New("client session field too large")

// purposeClientSession separates gateway-held session ids from every other
// sealed token (in particular from pins, which are also session ids).
const purposeClientSession Purpose = "mcp-gateway/legacy-client-session/v1"

// clientSessionVersion is the first byte of the sealed plaintext.
const clientSessionVersion = 1

// maxClientSessionToken bounds the length of a token OpenClientSession will
// try to open: the largest plaintext sealed and base64url-encoded.
const maxClientSessionToken = (1+16+16+binary.MaxVarintLen64+4*binary.MaxVarintLen64+
	MaxClientSessionUpstream+MaxClientSessionVersion+MaxClientSessionCapabilities+MaxClientSessionInfo+
	headerSize+16)*4/3 + 4

// Plaintext layout (varints minimal):
//
//	version(1) | id(16) | principal(16) | varint(issued, Unix s) |
//	uvarint(len) upstream | uvarint(len) protocolVersion |
//	uvarint(len) capabilities | uvarint(len) clientInfo

// SealClientSession seals s into a gateway session id. It fails with
// ErrClientSessionTooLarge when a field exceeds its limit.
func SealClientSession(kr *Keyring, s ClientSession) (GatewaySessionID, error) {
	switch {
	case len(s.Upstream) > MaxClientSessionUpstream:
		return "", fmt.Errorf("%w: upstream URL", ErrClientSessionTooLarge)
	case len(s.ProtocolVersion) > MaxClientSessionVersion:
		return "", fmt.Errorf("%w: protocol version", ErrClientSessionTooLarge)
	case len(s.Capabilities) > MaxClientSessionCapabilities:
		return "", fmt.Errorf("%w: capabilities", ErrClientSessionTooLarge)
	case len(s.ClientInfo) > MaxClientSessionInfo:
		return "", fmt.Errorf("%w: clientInfo", ErrClientSessionTooLarge)
	}
	b := make([]byte, 0, 64+len(s.Upstream)+len(s.ProtocolVersion)+len(s.Capabilities)+len(s.ClientInfo))
	b = append(b, clientSessionVersion)
	b = append(b, s.ID[:]...)
	b = append(b, s.Principal[:]...)
	b = binary.AppendVarint(b, s.Issued.Unix())
	for _, f := range [][]byte{[]byte(s.Upstream), []byte(s.ProtocolVersion), s.Capabilities, s.ClientInfo} {
		b = binary.AppendUvarint(b, uint64(len(f)))
		b = append(b, f...)
	}
	return GatewaySessionID(kr.Seal(purposeClientSession, b)), nil
}

var errMalformedClientSession = errors.New("malformed client session")

// OpenClientSession opens a gateway session id sealed by SealClientSession
// (OpenSessionID opens an id of either kind and says which).
// Every failure wraps ErrUnsealable. Expiry and principal are for the
// caller to check.
func OpenClientSession(kr *Keyring, id GatewaySessionID) (ClientSession, error) {
	var s ClientSession
	if len(id) > maxClientSessionToken {
		return s, fmt.Errorf("%w: too long", ErrUnsealable)
	}
	b, err := kr.Open(purposeClientSession, string(id))
	if err != nil {
		return s, err
	}
	return decodeClientSession(b)
}

// decodeClientSession parses the plaintext of a client session (see
// SealClientSession).
func decodeClientSession(b []byte) (ClientSession, error) {
	var s ClientSession
	if len(b) < 1+32 || b[0] != clientSessionVersion {
		return s, fmt.Errorf("%w: %w", ErrUnsealable, errMalformedClientSession)
	}
	copy(s.ID[:], b[1:17])
	copy(s.Principal[:], b[17:33])
	b = b[33:]
	issued, w := binary.Varint(b)
	if w <= 0 {
		return s, fmt.Errorf("%w: %w", ErrUnsealable, errMalformedClientSession)
	}
	s.Issued = time.Unix(issued, 0)
	b = b[w:]
	var fields [4][]byte
	for i := range fields {
		n, w := binary.Uvarint(b)
		if w <= 0 || n > uint64(len(b)-w) {
			return s, fmt.Errorf("%w: %w", ErrUnsealable, errMalformedClientSession)
		}
		fields[i] = b[w : w+int(n)]
		b = b[w+int(n):]
	}
	if len(b) != 0 {
		return s, fmt.Errorf("%w: %w", ErrUnsealable, errMalformedClientSession)
	}
	s.Upstream = string(fields[0])
	s.ProtocolVersion = string(fields[1])
	// The JSON fields are walked later: like any JSON the gateway reads,
	// they must be valid and shallow, sealed or not.
	for i, f := range []*[]byte{&s.Capabilities, &s.ClientInfo} {
		if v := fields[2+i]; len(v) > 0 {
			if err := jsonrpc.ValidJSON(v); err != nil {
				return ClientSession{}, fmt.Errorf("%w: %w: %w", ErrUnsealable, errMalformedClientSession, err)
			}
			*f = v
		}
	}
	return s, nil
}
