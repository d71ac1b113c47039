package federate

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/seal"
)

// CursorLifetime is how long a merged list's nextCursor opens.
const CursorLifetime = time.Hour

// NextCursor seals the servers' nextCursors of a merged page (Merged.Next)
// into the nextCursor handed to the client: "" when no server has more.
// It is bound to kind and principal and opens for CursorLifetime. An
// error (wrapping seal.ErrCursorTooLarge) means a server's cursor is over
// seal.MaxUpstreamCursor bytes or a server index is over 255: the caller
// ends the listing there.
func NextCursor(kr *seal.Keyring, kind ListKind, principal [16]byte, next map[int]string, now time.Time) (string, error) {
	if len(next) == 0 {
		return "", nil
	}
	c := seal.FederatedCursor{Kind: uint8(kind), Principal: principal, Expires: now.Add(CursorLifetime)}
	for _, i := range slices.Sorted(maps.Keys(next)) {
		if i < 0 || i > 255 {
			return "", fmt.Errorf("%w: server %d", seal.ErrCursorTooLarge, i)
		}
		c.Next = append(c.Next, seal.ServerCursor{Server: uint8(i), Cursor: next[i]})
	}
	return seal.SealFederatedCursor(kr, c)
}

// OpenCursor opens a nextCursor made by NextCursor for the same kind and
// principal: each server's own cursor, by server index, for the servers
// to ask for their next page (the others are done). Errors wrap
// seal.ErrCursorInvalid (answer -32602), also for a server index set
// does not have (a cursor handed out before a reload that removed
// servers). A cursor holds indices, not names: after a reload that
// reorders servers, a cursor handed out before it reaches the server now
// at that index, which refuses a cursor it did not make or pages from it.
func OpenCursor(kr *seal.Keyring, set *Set, token string, kind ListKind, principal [16]byte, now time.Time) (map[int]string, error) {
	c, err := seal.OpenFederatedCursor(kr, token, uint8(kind), principal, now)
	if err != nil {
		return nil, err
	}
	next := make(map[int]string, len(c.Next))
	for _, n := range c.Next {
		if int(n.Server) >= set.Len() {
			return nil, fmt.Errorf("%w: server %d of %d", seal.ErrCursorInvalid, n.Server, set.Len())
		}
		next[int(n.Server)] = n.Cursor
	}
	return next, nil
}
