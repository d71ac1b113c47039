package translate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"

	"github.com/tidwall/gjson"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/legacy"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/sse"
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
	events *sse.Reader // nil for a JSON answer
	read   bool        // the JSON answer was returned
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
	a := &modernAnswer{status: resp.StatusCode, body: resp.Body}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt == "text/event-stream" {
		a.events = sse.NewReader(resp.Body, maxModernAnswer)
	}
	return a, nil
}

// next returns the next JSON-RPC message of the answer, or io.EOF after the
// last. A JSON body that is not valid JSON is an error that names the HTTP
// status.
func (a *modernAnswer) next() (legacy.Message, error) {
	if a.events == nil {
		if a.read {
			return legacy.Message{}, io.EOF
		}
		a.read = true
		b, err := io.ReadAll(io.LimitReader(a.body, maxModernAnswer+1))
		if err != nil {
			return legacy.Message{}, fmt.Errorf("reading the upstream answer: %w", err)
		}
		b = bytes.TrimSpace(b)
		if len(b) > maxModernAnswer || !gjson.ValidBytes(b) || len(b) == 0 || b[0] != '{' {
			return legacy.Message{}, fmt.Errorf("the upstream answered HTTP %d without a JSON-RPC message", a.status)
		}
		return legacy.ParseMessage(b), nil
	}
	for {
		ev, err := a.events.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return legacy.Message{}, io.EOF
			}
			return legacy.Message{}, fmt.Errorf("reading the upstream event stream: %w", err)
		}
		data := bytes.TrimSpace(ev.Data)
		if len(data) == 0 {
			continue // a priming event, or a comment-only block
		}
		if !gjson.ValidBytes(data) {
			continue // not JSON-RPC: nothing a client could use
		}
		return legacy.ParseMessage(data), nil
	}
}

// close ends the answer. It does not drain the body: an event stream may
// never end by itself (a subscription, or an upstream that keeps its
// stream open after the response).
func (a *modernAnswer) close() {
	a.body.Close()
}
