package seal

import (
	"errors"
	"fmt"
	"strings"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
)

// TurnSession is the session id a legacy client that opted in to
// multi-turn SSE (SEP-1858) holds: the gateway session id it would have
// got otherwise (a pin, or a gateway-held session), with what the
// gateway needs to make its tools/calls as modern calls, sealed around
// it. The opt-in thus travels with every request of the session, to any
// instance holding the key, and a client that did not opt in keeps the
// very session id it always had.
type TurnSession struct {
	// Inner is the session id the client would hold without the opt-in.
	Inner GatewaySessionID
	// Capabilities is the client's initialize capabilities, a compact JSON
	// object.
	Capabilities []byte
	// ClientInfo is the client's initialize clientInfo, a compact JSON
	// object (nil if it sent none).
	ClientInfo []byte
}

// TurnSessionPrefix starts every TurnSession id, in clear: it tells it
// apart from the other session ids (base64url, without a dot) at the
// cost of a comparison, so that a request of a session that did not opt
// in costs no extra authentication. It decides nothing: the rest must
// still open.
const TurnSessionPrefix = "mt1."

// Bounds of a TurnSession's fields, in bytes: the id travels in a header
// on every request.
const (
	MaxTurnSessionInner        = 8192
	MaxTurnSessionCapabilities = MaxClientSessionCapabilities
	MaxTurnSessionInfo         = MaxClientSessionInfo
	maxTurnSessionPlain        = 1 + 3*3 + MaxTurnSessionInner + MaxTurnSessionCapabilities + MaxTurnSessionInfo
)

// maxTurnSessionToken bounds the length of an id OpenTurnSession tries to
// open.
var maxTurnSessionToken = len(TurnSessionPrefix) + (headerSize+maxTurnSessionPlain+16)*4/3 + 4

// ErrTurnSessionTooLarge is returned by SealTurnSession for a session
// beyond the bounds.
var ErrTurnSessionTooLarge = errors.New("seal: multi-turn session too large")

const turnSessionPurpose Purpose = "mcp-gateway/multi-turn-session/v1"

const turnSessionVersion = 1

// Plaintext layout: version(1) | inner | capabilities | clientInfo, each
// as uvarint(len) | bytes.

// IsTurnSession reports whether id has the TurnSession prefix (it may
// still not open).
func IsTurnSession(id string) bool { return strings.HasPrefix(id, TurnSessionPrefix) }

// SealTurnSession seals s into a session id.
func SealTurnSession(kr *Keyring, s TurnSession) (GatewaySessionID, error) {
	if len(s.Inner) > MaxTurnSessionInner || len(s.Capabilities) > MaxTurnSessionCapabilities || len(s.ClientInfo) > MaxTurnSessionInfo {
		return "", ErrTurnSessionTooLarge
	}
	b := make([]byte, 0, 16+len(s.Inner)+len(s.Capabilities)+len(s.ClientInfo))
	b = append(b, turnSessionVersion)
	b = appendField(b, string(s.Inner))
	b = appendField(b, string(s.Capabilities))
	b = appendField(b, string(s.ClientInfo))
	return GatewaySessionID(TurnSessionPrefix + kr.Seal(turnSessionPurpose, b)), nil
}

// OpenTurnSession opens a session id sealed by SealTurnSession. Every
// failure wraps ErrUnsealable. What the inner id names is for the caller
// to check, as for any session id.
func OpenTurnSession(kr *Keyring, id GatewaySessionID) (TurnSession, error) {
	if !IsTurnSession(string(id)) || len(id) > maxTurnSessionToken {
		return TurnSession{}, fmt.Errorf("%w: not a multi-turn session id", ErrUnsealable)
	}
	b, err := kr.Open(turnSessionPurpose, string(id[len(TurnSessionPrefix):]))
	if err != nil {
		return TurnSession{}, err
	}
	return decodeTurnSession(b)
}

// decodeTurnSession parses a plaintext made by SealTurnSession; it accepts
// exactly what SealTurnSession makes, with valid shallow JSON.
func decodeTurnSession(b []byte) (TurnSession, error) {
	if len(b) < 1 || len(b) > maxTurnSessionPlain || b[0] != turnSessionVersion {
		return TurnSession{}, fmt.Errorf("%w: %w", ErrUnsealable, errMalformedState)
	}
	d := &resumeDecoder{b: b[1:]}
	s := TurnSession{Inner: GatewaySessionID(d.field(MaxTurnSessionInner))}
	s.Capabilities = d.bytes(MaxTurnSessionCapabilities)
	s.ClientInfo = d.bytes(MaxTurnSessionInfo)
	if d.err != nil || len(d.b) != 0 {
		return TurnSession{}, fmt.Errorf("%w: %w", ErrUnsealable, errMalformedState)
	}
	for _, f := range [][]byte{s.Capabilities, s.ClientInfo} {
		if len(f) > 0 {
			if err := jsonrpc.ValidJSON(f); err != nil {
				return TurnSession{}, fmt.Errorf("%w: %w: %w", ErrUnsealable, errMalformedState, err)
			}
		}
	}
	return s, nil
}
