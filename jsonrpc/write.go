package jsonrpc

import (
	"encoding/json"
	"net/http"
)

// WriteError answers an HTTP request with the JSON-RPC error e, under id
// (nil for none), and e's HTTP status. It returns nil: the answer is
// written, and there is nothing for the caller's error handling to do.
func WriteError(w http.ResponseWriter, id json.RawMessage, e *RPCError) error {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.HTTPStatus)
	_, _ = w.Write(ErrorResponse(id, e))
	return nil
}
