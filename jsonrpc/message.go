package jsonrpc

import (
	"encoding/json"

	"github.com/tidwall/gjson"
)

// Kind says which kind of JSON-RPC message a body holds.
type Kind int

// Message kinds. The zero value is KindInvalid.
const (
	// KindInvalid is a body that is not a valid JSON-RPC 2.0 message (or,
	// for ParseMessage, one it could not classify).
	KindInvalid Kind = iota
	// KindRequest has a method and an id.
	KindRequest
	// KindNotification has a method and no id.
	KindNotification
	// KindResponse has an id and a result or an error.
	KindResponse
)

// String returns the lowercase name of the kind.
func (k Kind) String() string {
	switch k {
	case KindRequest:
		return "request"
	case KindNotification:
		return "notification"
	case KindResponse:
		return "response"
	default:
		return "invalid"
	}
}

// Message is the envelope of one JSON-RPC message: the gateway's only model
// of one. ParseMessage classifies what an upstream sends, leniently;
// Peek checks what a client sends against JSON-RPC 2.0's rules and
// returns the same envelope.
type Message struct {
	// Raw is the message's bytes, as received.
	Raw []byte
	// Kind is the kind of message; KindInvalid when it was refused.
	Kind Kind
	// ID is the raw JSON of the id member (e.g. `7` or `"abc"`), copied
	// verbatim so that responses and errors can echo it. It is nil for
	// notifications and whenever the message has no usable id.
	ID json.RawMessage
	// Method is the method of a request or notification.
	Method string
	// After is, for a message read from an SSE stream whose events carry
	// ids, the id of the last event before the one carrying it: a GET with
	// it as Last-Event-ID replays the stream from this message on ("" for
	// a JSON answer, or when no earlier event had an id).
	After string
}

// ParseMessage classifies raw without unmarshalling it. Text that is not
// valid JSON, or nests deeper than MaxJSONDepth, is KindInvalid (use
// ValidJSON first to tell the two apart).
func ParseMessage(raw []byte) Message {
	if ValidJSON(raw) != nil {
		return Message{Raw: raw}
	}
	return Classify(raw)
}

// Classify is ParseMessage for raw that already passed ValidJSON (a
// reader that must tell a nesting bomb from other invalid text checks
// first, then classifies without validating twice).
func Classify(raw []byte) Message {
	m := Message{Raw: raw}
	res := gjson.GetManyBytes(raw, "id", "method", "result", "error")
	id, method := res[0], res[1]
	if id.Exists() {
		m.ID = json.RawMessage(id.Raw)
	}
	switch {
	case method.Type == gjson.String && id.Exists():
		m.Kind, m.Method = KindRequest, method.String()
	case method.Type == gjson.String:
		m.Kind, m.Method = KindNotification, method.String()
	case id.Exists() && (res[2].Exists() || res[3].Exists()):
		m.Kind = KindResponse
	}
	return m
}

// Params returns the raw params of a request or notification (nil if none).
func (m Message) Params() []byte {
	p := gjson.GetBytes(m.Raw, "params")
	if !p.Exists() {
		return nil
	}
	return []byte(p.Raw)
}
