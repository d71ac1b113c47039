package translate

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/legacy"
)

// maxModernAnswer bounds one JSON answer, or one SSE event, from a modern
// upstream.
const maxModernAnswer = 16 << 20

// errNoResponse means the upstream's answer ended without the JSON-RPC
// response to the request.
var errNoResponse = errors.New("the upstream answer ended without a response")

// modernAnswer is the answer of a modern upstream to one POST: a single JSON
// message, or an SSE stream of messages ending with the response.
type modernAnswer struct {
	status int
	body   io.ReadCloser
	*legacy.MessageReader
}

// postModern sends one modern JSON-RPC request upstream. An HTTP error
// status is not an error here: its body may still be a JSON-RPC error.
func postModern(ctx context.Context, client *http.Client, url string, header http.Header, body []byte) (*modernAnswer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header = header
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	return &modernAnswer{status: resp.StatusCode, body: resp.Body, MessageReader: legacy.NewMessageReader(resp, maxModernAnswer)}, nil
}

// close ends the answer. It does not drain the body: an event stream may
// never end by itself (a subscription, or an upstream that keeps its
// stream open after the response).
func (a *modernAnswer) close() {
	a.body.Close()
}
