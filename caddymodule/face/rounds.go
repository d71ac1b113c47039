package face

import (
	"encoding/json"
	"errors"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
)

// This file is the round driver every face makes its tool calls with:
// the call, then the retries with the answers the face gives itself,
// until the call completes, fails or asks its client.

// ToolCall is a face's tool call: the first (no responses, no state) or
// a retry.
type ToolCall struct {
	Name      string
	Args      json.RawMessage
	Responses map[string]json.RawMessage
	State     string
}

// CallParams are an internal tools/call's params, built from structs
// (the JSON rule); Meta is the face's _meta.
type CallParams struct {
	Name           string                     `json:"name"`
	Arguments      json.RawMessage            `json:"arguments,omitempty"`
	InputResponses map[string]json.RawMessage `json:"inputResponses,omitempty"`
	RequestState   string                     `json:"requestState,omitempty"`
	Meta           any                        `json:"_meta"`
}

// Params are the params of the tools/call that makes (or retries) c,
// with meta as their _meta.
func (c ToolCall) Params(meta any) CallParams {
	p := CallParams{Name: c.Name, InputResponses: c.Responses, RequestState: c.State, Meta: meta}
	if len(c.Args) > 0 {
		p.Arguments = c.Args
	}
	return p
}

// Internal is the internal tools/call of c, with meta as its _meta.
func (c ToolCall) Internal(meta any) Internal {
	return Internal{Method: "tools/call", Name: c.Name, Params: c.Params(meta)}
}

// Meta is the _meta of a face's internal requests when the face is the
// modern client itself (the saga, REST): the protocol version, and the
// face's name as clientInfo.
type Meta struct {
	ProtocolVersion    string       `json:"io.modelcontextprotocol/protocolVersion"`
	ClientCapabilities Capabilities `json:"io.modelcontextprotocol/clientCapabilities"`
	ClientInfo         Info         `json:"io.modelcontextprotocol/clientInfo"`
}

// NewMeta is the _meta of a face named name (clientInfo
// caddy-mcp-gateway-<name>).
func NewMeta(name string) Meta {
	return Meta{ProtocolVersion: translate.ModernVersion, ClientInfo: Info{Name: "caddy-mcp-gateway-" + name, Version: "1"}}
}

// Capabilities are what a face declares as its client's: elicitation and
// sampling, which its client answers, and roots, which the face answers
// itself (RootsNone, or the roots its client gave).
type Capabilities struct {
	Elicitation struct{} `json:"elicitation"`
	Sampling    struct{} `json:"sampling"`
	Roots       struct{} `json:"roots"`
}

// Info is a clientInfo.
type Info struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// Kind is the kind of an input request: the input method it stands for.
type Kind byte

// The input kinds (their values are the ones the faces' tokens carry).
const (
	Elicitation Kind = 1 // elicitation/create
	Sampling    Kind = 2 // sampling/createMessage
	Roots       Kind = 3 // roots/list
)

// KindOf is the kind of an input method (0 for none).
func KindOf(method string) Kind {
	switch method {
	case translate.MethodElicit:
		return Elicitation
	case translate.MethodSample:
		return Sampling
	case translate.MethodListRoots:
		return Roots
	}
	return 0
}

// Method is the input method of k.
func (k Kind) Method() string {
	switch k {
	case Elicitation:
		return translate.MethodElicit
	case Sampling:
		return translate.MethodSample
	}
	return translate.MethodListRoots
}

// ErrTooManyRounds is Drive's error when the call asked for input
// the face answered itself more than max_rounds times in a row.
var ErrTooManyRounds = errors.New("the tool asked for input more than max_rounds times in a row without an answer from the client")

// Drive makes call with do, and retries it while the face answers the
// call's questions itself: answer gets each input_required answer and
// returns the responses of the retry (nil for a retry with the
// requestState alone) and true, or false to end there (the questions are
// the face's client's). It returns the last answer (complete, an error,
// input_required left to the client) and the call that got it, or do's
// failure, or ErrTooManyRounds after maxRounds calls (at least one).
func Drive(maxRounds int, call ToolCall, do func(ToolCall) (Answer, error),
	answer func(Answer) (responses map[string]json.RawMessage, again bool, err error)) (Answer, ToolCall, error) {
	for range max(maxRounds, 1) {
		a, err := do(call)
		if err != nil || !a.InputRequired() {
			return a, call, err
		}
		responses, again, err := answer(a)
		if err != nil || !again {
			return a, call, err
		}
		call.Responses, call.State = responses, a.Result().Get("requestState").String()
	}
	return Answer{}, call, ErrTooManyRounds
}
