package reverse

import (
	"net/http"
	"sync"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
)

// This file bounds the GET streams of gateway-held sessions: each holds an
// upstream subscriptions/listen (one connection, more while its filter
// changes), and a gateway-held session costs nothing to open, so their
// number is bounded per principal (max_get_streams_per_principal, 429) and
// in all (max_get_streams, 503), per process.

// streamCount counts the open GET streams, per principal and in all.
type streamCount struct{ c *translate.PrincipalCount }

func newStreamCount() *streamCount { return &streamCount{translate.NewPrincipalCount()} }

// enter counts a new stream of principal, or refuses it when max streams
// are open in all or maxPer of the principal's; leave uncounts it, once.
func (s *streamCount) enter(principal [16]byte, max, maxPer int) (leave func(), rerr *jsonrpc.RPCError) {
	switch s.c.Take(principal, 1, int64(max), int64(maxPer)) {
	case translate.RefusedInAll:
		return nil, &jsonrpc.RPCError{HTTPStatus: http.StatusServiceUnavailable, Code: jsonrpc.InternalError,
			Message: "the gateway has too many GET streams open (max_get_streams); retry later"}
	case translate.RefusedForPrincipal:
		return nil, &jsonrpc.RPCError{HTTPStatus: http.StatusTooManyRequests, Code: jsonrpc.InternalError,
			Message: "too many GET streams open for this principal (max_get_streams_per_principal); close one"}
	}
	var once sync.Once
	return func() { once.Do(func() { s.c.Give(principal, 1) }) }, nil
}

// open returns the number of open streams, in all and of principal.
func (s *streamCount) open(principal [16]byte) (total, of int) {
	t, o := s.c.Held(principal)
	return int(t), int(o)
}
