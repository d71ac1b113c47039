package seal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// This file is the codec of a federated cursor: the nextCursor the gateway
// hands a client paging through a list merged from several servers
// (tools/list, prompts/list, resources/list, resources/templates/list of a
// federation). It carries each server's own nextCursor, so that the next
// page asks every server that has more for its next page, on any instance
// holding the key. It is bound to the list (Kind) and to the principal it
// was handed to, and expires; it is sealed, so a client can neither read
// nor forge the servers' cursors in it.

// cursorPurpose separates federated cursors from every other token.
const cursorPurpose Purpose = "mcp-gateway/federated-cursor/v1"

const cursorVersion = 1

// Bounds of a FederatedCursor. SealFederatedCursor refuses a cursor beyond
// them (ErrCursorTooLarge); OpenFederatedCursor refuses a token longer
// than the largest cursor seals to.
const (
	MaxCursorEntries  = 64   // Next (one entry per server)
	MaxUpstreamCursor = 4096 // a ServerCursor's Cursor, in bytes
	maxCursorPlain    = 1 + 1 + 16 + 10 + 1 + MaxCursorEntries*(1+2+MaxUpstreamCursor)
)

// maxCursorToken bounds the length of a token OpenFederatedCursor opens.
const maxCursorToken = (headerSize+maxCursorPlain+16)*4/3 + 4

// Errors of the federated cursor's codec.
var (
	// ErrCursorTooLarge is returned by SealFederatedCursor for a cursor
	// beyond the bounds.
	ErrCursorTooLarge = errors.New("seal: federated cursor too large")
	// ErrCursorInvalid wraps every failure of OpenFederatedCursor: a token
	// that does not open (with ErrUnsealable), or one of another list or
	// principal, or expired (with ErrCursorExpired).
	ErrCursorInvalid = errors.New("invalid cursor")
	// ErrCursorExpired is wrapped, with ErrCursorInvalid, for a cursor past
	// its expiry.
	ErrCursorExpired = errors.New("cursor expired")
)

// ServerCursor is one server's own nextCursor.
type ServerCursor struct {
	// Server is the server's index in its federation.
	Server uint8
	// Cursor is the server's nextCursor (1 to MaxUpstreamCursor bytes).
	Cursor string
}

// FederatedCursor is what a federated cursor carries.
type FederatedCursor struct {
	// Kind is the list it pages through (the caller's number for it).
	Kind uint8
	// Principal is the hash of the principal it was handed to.
	Principal [16]byte
	// Expires is when it stops opening (second precision).
	Expires time.Time
	// Next is each server's nextCursor, in strictly increasing Server
	// order.
	Next []ServerCursor
}

// Plaintext layout (varints minimal, strings as uvarint(len) | bytes):
//
//	version(1) | kind(1) | principal(16) | varint(expires, Unix s) |
//	uvarint(n) | n × (server(1) | cursor)

func (c *FederatedCursor) check() error {
	if len(c.Next) > MaxCursorEntries {
		return ErrCursorTooLarge
	}
	for i, n := range c.Next {
		if n.Cursor == "" || len(n.Cursor) > MaxUpstreamCursor || (i > 0 && n.Server <= c.Next[i-1].Server) {
			return fmt.Errorf("%w: entry %d: empty, over %d bytes or out of order", ErrCursorTooLarge, i, MaxUpstreamCursor)
		}
	}
	return nil
}

func (c *FederatedCursor) encode(b []byte) []byte {
	b = append(b, cursorVersion, c.Kind)
	b = append(b, c.Principal[:]...)
	b = binary.AppendVarint(b, c.Expires.Unix())
	b = binary.AppendUvarint(b, uint64(len(c.Next)))
	for _, n := range c.Next {
		b = append(b, n.Server)
		b = appendField(b, n.Cursor)
	}
	return b
}

// decodeCursor parses a plaintext made by encode; it accepts exactly the
// byte strings encode produces for cursors that pass check.
func decodeCursor(b []byte) (FederatedCursor, error) {
	var c FederatedCursor
	if len(b) < 2 || len(b) > maxCursorPlain || b[0] != cursorVersion {
		return c, errMalformedState
	}
	c.Kind = b[1]
	d := &resumeDecoder{b: b[2:]}
	d.fixed(c.Principal[:])
	c.Expires = time.Unix(d.varint(), 0)
	n := int(d.uvarint(MaxCursorEntries))
	for i := 0; i < n && d.err == nil; i++ {
		var server [1]byte
		d.fixed(server[:])
		c.Next = append(c.Next, ServerCursor{Server: server[0], Cursor: d.field(MaxUpstreamCursor)})
	}
	if d.err != nil || len(d.b) != 0 || c.check() != nil {
		return FederatedCursor{}, errMalformedState
	}
	return c, nil
}

// SealFederatedCursor seals c, or returns an error wrapping
// ErrCursorTooLarge when it is beyond the bounds (or its entries are
// empty or out of order).
func SealFederatedCursor(kr *Keyring, c FederatedCursor) (string, error) {
	if err := c.check(); err != nil {
		return "", err
	}
	size := 40
	for _, n := range c.Next {
		size += 4 + len(n.Cursor)
	}
	return kr.Seal(cursorPurpose, c.encode(make([]byte, 0, size))), nil
}

// OpenFederatedCursor opens a federated cursor handed out for the list
// kind to principal. Every failure wraps ErrCursorInvalid: a token that
// does not open (too long, tampered, sealed under another key or for
// another purpose, malformed: with ErrUnsealable), one of another list or
// another principal, or expired (with ErrCursorExpired). Callers answer
// them alike (-32602).
func OpenFederatedCursor(kr *Keyring, token string, kind uint8, principal [16]byte, now time.Time) (FederatedCursor, error) {
	if len(token) > maxCursorToken {
		return FederatedCursor{}, fmt.Errorf("%w: %w: too long", ErrCursorInvalid, ErrUnsealable)
	}
	b, err := kr.Open(cursorPurpose, token)
	if err != nil {
		return FederatedCursor{}, fmt.Errorf("%w: %w", ErrCursorInvalid, err)
	}
	c, err := decodeCursor(b)
	switch {
	case err != nil:
		return FederatedCursor{}, fmt.Errorf("%w: %w: %w", ErrCursorInvalid, ErrUnsealable, err)
	case c.Kind != kind:
		return FederatedCursor{}, fmt.Errorf("%w: of another list", ErrCursorInvalid)
	case c.Principal != principal:
		return FederatedCursor{}, fmt.Errorf("%w: of another principal", ErrCursorInvalid)
	case !now.Before(c.Expires):
		return FederatedCursor{}, fmt.Errorf("%w: %w at %s", ErrCursorInvalid, ErrCursorExpired, c.Expires.UTC().Format(time.RFC3339))
	}
	return c, nil
}
