package face

import (
	"encoding/json"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
)

// Answers a face gives on its client's behalf.
var (
	// RootsNone answers a roots/list for a client that has no roots to
	// offer (a face with no way to ask its client for them).
	RootsNone = json.RawMessage(`{"roots":[]}`)
	// ElicitDeclined answers an elicitation the client answered with an
	// error.
	ElicitDeclined = json.RawMessage(`{"action":"decline"}`)
)

// Refusal is the CallToolResult of a call ended by the client's error on
// a sampling question.
type Refusal struct {
	Content []Text `json:"content"`
	IsError bool   `json:"isError"`
}

// Text is a text content block.
type Text struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// SamplingRefused is the result of a call ended by the client's error on
// the sampling question id (message: the error's): the tool cannot be
// told (the 2026-07-28 inputResponses have no error form), so the face
// ends the call itself.
func SamplingRefused(id, message string) Refusal {
	text := "The client refused the sampling step " + jsonrpc.Quote(jsonrpc.Clip(id))
	if message != "" {
		text += ": " + jsonrpc.Clip(message)
	}
	return Refusal{Content: []Text{{Type: "text", Text: text}}, IsError: true}
}
