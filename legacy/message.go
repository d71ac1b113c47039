package legacy

import (
	"encoding/json"

	"github.com/tidwall/gjson"
)

// MessageKind tells JSON-RPC requests, notifications and responses apart.
type MessageKind int

// The kinds of JSON-RPC message.
const (
	KindInvalid MessageKind = iota
	KindRequest
	KindNotification
	KindResponse
)

// Message is one JSON-RPC message received from an upstream.
type Message struct {
	Raw    []byte
	Kind   MessageKind
	ID     json.RawMessage // requests and responses
	Method string          // requests and notifications
}

// ParseMessage classifies raw without unmarshalling it. Text that is not
// valid JSON, or nests deeper than MaxJSONDepth, is KindInvalid (use
// ValidJSON first to tell the two apart).
func ParseMessage(raw []byte) Message {
	if ValidJSON(raw) != nil {
		return Message{Raw: raw}
	}
	return classify(raw)
}

// classify is ParseMessage for raw that passed ValidJSON.
func classify(raw []byte) Message {
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
