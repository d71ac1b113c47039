package translate

import (
	"net/http"
	"time"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
)

// What both bridges share: where an answer goes, the methods that may need
// input, the defaults of their common limits, and the error a bridge
// answers when the upstream let it down.

// Sink is where the bridge writes its answer to the client's request.
type Sink interface {
	// Notify sends a notification related to the request before its final
	// answer (the answer then becomes an SSE stream).
	Notify(msg []byte) error
	// Respond ends the answer with the final JSON-RPC message (nil for
	// none, e.g. 202 to a notification) and its HTTP status (ignored once
	// the answer is a stream).
	Respond(status int, msg []byte) error
}

// InputCapable methods may return input_required (MRTR): only these park.
var InputCapable = map[string]bool{"tools/call": true, "prompts/get": true, "resources/read": true}

// Defaults of the limits both bridges share.
const (
	DefaultMaxRounds         = 8
	DefaultMaxInputsPerRound = 16
	DefaultRoundTimeout      = 5 * time.Minute // park_ttl: a parked call, a reverse round
)

// BadGateway is the 502 answer to a failure the client cannot fix.
func BadGateway(msg string) *jsonrpc.RPCError {
	return &jsonrpc.RPCError{HTTPStatus: http.StatusBadGateway, Code: jsonrpc.InternalError, Message: msg}
}
