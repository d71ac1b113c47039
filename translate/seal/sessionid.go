package seal

import "fmt"

// SessionKind is what a gateway session id names, as the purpose it was
// sealed for tells: both kinds travel in the same Mcp-Session-Id header.
type SessionKind uint8

const (
	// SessionUnknown: the id does not open (forged, tampered, malformed,
	// sealed under a retired key or for no session purpose).
	SessionUnknown SessionKind = iota
	// SessionPinned: a Pin, a legacy client's session pinned to a legacy
	// upstream's own session.
	SessionPinned
	// SessionHeld: a ClientSession the gateway holds itself in front of a
	// modern upstream (the reverse bridge).
	SessionHeld
)

// OpenedSessionID is a gateway session id, opened.
type OpenedSessionID struct {
	Kind SessionKind
	// Pin is set when Kind is SessionPinned.
	Pin Pin
	// Held is set when Kind is SessionHeld.
	Held ClientSession
}

// maxSessionToken bounds the length of a gateway session id
// OpenSessionID will try to open: the longer of the two kinds' bounds.
const maxSessionToken = max(maxPinToken, maxClientSessionToken)

// OpenSessionID opens a gateway session id of either kind and says which
// it is, by the purpose the id authenticates for (Keyring.OpenAny): one
// AEAD check decides, never a guess from what the plaintext looks like.
// A principal, an expiry or a deletion are for the caller to check. Every
// failure wraps ErrUnsealable, with Kind SessionUnknown.
func OpenSessionID(kr *Keyring, id GatewaySessionID) (OpenedSessionID, error) {
	if len(id) > maxSessionToken {
		return OpenedSessionID{}, fmt.Errorf("%w: too long", ErrUnsealable)
	}
	purpose, b, err := kr.OpenAny(string(id), purposePin, purposeClientSession)
	if err != nil {
		return OpenedSessionID{}, err
	}
	var o OpenedSessionID
	bound := maxClientSessionToken
	if purpose == purposePin {
		o.Kind, bound = SessionPinned, maxPinToken
		o.Pin, err = decodePin(b)
	} else {
		o.Kind = SessionHeld
		o.Held, err = decodeClientSession(b)
	}
	switch {
	case len(id) > bound:
		return OpenedSessionID{}, fmt.Errorf("%w: too long", ErrUnsealable)
	case err != nil:
		return OpenedSessionID{}, err
	}
	return o, nil
}
