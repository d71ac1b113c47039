package forward

import (
	"errors"
	"net/http"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
)

// One refusal for every requestState a retry cannot use: whether it did
// not open, expired, was already used, its call ended, or it is another
// principal's or another request's, the client gets the same status, code
// and message, so that nobody learns from a refusal whether a token is
// genuine, nor whose it is not. Why it was refused goes to the debug log
// only (Served.Refused), as taskIds do (task_serve.go).

// StateRefusedMessage is the message of every refused requestState.
const StateRefusedMessage = "Invalid params: requestState is not valid for this request (invalid, expired, already used, or not yours): send the request again without it"

// RefusedUnknownKey is why (Served.Refused) a requestState, or the taskId
// of tasks/*, that is well formed but sealed under a key this instance's
// keyring lacks was refused:
// another instance's, when the instances of a fleet do not share their
// keys. The caller may tell operators; the client is told nothing more.
const RefusedUnknownKey = "sealed under a key this instance lacks"

// refuseState is the refusal of a requestState, why kept for the logs.
func refuseState(why string) *jsonrpc.RPCError {
	return &jsonrpc.RPCError{HTTPStatus: http.StatusBadRequest, Code: jsonrpc.InvalidParams, Message: StateRefusedMessage, Cause: errStateRefused{why}}
}

// errStateRefused is why a requestState was refused (RPCError.Cause of a
// refuseState).
type errStateRefused struct{ why string }

func (e errStateRefused) Error() string { return "requestState refused: " + e.why }

// refusedWhy returns why rerr refused a requestState, or "".
func refusedWhy(rerr *jsonrpc.RPCError) string {
	var e errStateRefused
	if rerr != nil && errors.As(rerr.Cause, &e) {
		return e.why
	}
	return ""
}
