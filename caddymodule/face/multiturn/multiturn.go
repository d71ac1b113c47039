// Package multiturn is the multi-turn SSE face (SEP-1858) for legacy
// (2025-era) clients that opt in: a tool call's input requests reach
// the client as a turn on its SSE answer (buffer_input, the requests as
// message events, input_required), the stream ending there, and the
// client POSTs its buffered answers with the input_required event's id
// as Last-Event-ID, to any instance sharing state_key.
//
// Opting in, and remembering it. The SEP gates the events on a protocol
// version after 2025-11-25, but the next version became 2026-07-28, a
// protocol without sessions, so an explicit capability is the opt-in: a
// client declares capabilities.experimental[capability] (any object) in
// its initialize. The face remembers it in the session id the client
// gets: the id the client would have got (a pin, or a gateway-held
// session) sealed, with the client's capabilities and clientInfo, inside
// a seal.TurnSession. Every request carries it, to any instance holding
// state_key: nothing is stored, and a session that did not opt in keeps
// the very id it always had.
//
// The hooks. OpenSession (session.go) opens a TurnSession id before the
// request is routed, so that the gateway serves it with the inner id,
// exactly as it serves a session that did not opt in, except for:
//
//   - a tools/call whose client accepts text/event-stream, routed to its
//     session's upstream (ServeRouted, call.go): made as a modern
//     tools/call on that upstream (face.Client), its answer the legacy
//     client's result, or a turn;
//   - a POST with Last-Event-ID: the answers of a turn (ServeMessage,
//     answers.go), which become the retry's inputResponses.
//
// The session id the client gets back in any answer stays the sealed
// one. Sessions open whether the face is on or not, so that turning it
// off ends no session: New makes an Opener then.
package multiturn

import (
	"net/http"

	"github.com/caddyserver/caddy/v2"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/caddymodule/face"
)

// Config turns the multi-turn SSE face on: its presence is the switch
// (JSON `"multi_turn_sse": {}`; Caddyfile `multi_turn_sse on`).
type Config struct{}

// Options are the face's Caddyfile options.
var Options = face.Options[Config]{"multi_turn_sse": face.OnOff[Config]}

// New makes the face: the whole face when cfg is set, else an Opener,
// which only opens the sessions that opted in while the face was on.
func New(_ caddy.Context, cfg *Config, gw face.Gateway) (face.Face, error) {
	o := Opener{gw: gw}
	if cfg == nil {
		return &o, nil
	}
	return &Face{Opener: o, client: face.Client{GW: gw}}, nil
}

// capability is the experimental capability a client opts in with.
const capability = "io.modelcontextprotocol/multi-turn-sse"

// capabilityPath finds it in initialize params (gjson: dots escaped).
const capabilityPath = `capabilities.experimental.io\.modelcontextprotocol/multi-turn-sse`

// The SEP's events.
const (
	eventBufferInput   = "buffer_input"
	eventInputRequired = "input_required"
)

// usePurpose names turn tokens to face.Gateway.UseOnce, which makes a
// turn's Last-Event-ID single use across every instance sharing state_key
// and Caddy's storage.
const usePurpose = "turn"

// Opener is the face while it is off: it opens the session ids that
// opted in, so that those sessions go on, without turns.
type Opener struct {
	gw face.Gateway
}

// Name implements face.Face.
func (*Opener) Name() string { return "multi_turn_sse" }

// Face is the multi-turn SSE face of one handler.
type Face struct {
	Opener
	client face.Client
}

// ServeMessage implements face.MessageFace: the POST of a turn's answers
// (an opened session's, with Last-Event-ID) is answered; an initialize
// without a session id is served with the writer that seals the session
// id of a client that opts in.
func (f *Face) ServeMessage(w http.ResponseWriter, r *http.Request, m face.Message) (bool, http.ResponseWriter, error) {
	if s := sessionOf(r); s != nil && r.Header.Get("Last-Event-ID") != "" {
		return true, w, f.serveAnswers(w, r, m.Body, s)
	}
	if m.Method == "initialize" && r.Header.Get("Mcp-Session-Id") == "" {
		return false, f.optInWriter(w, m.Body), nil
	}
	return false, w, nil
}

// Interface guards
var (
	_ face.SessionFace = (*Opener)(nil)
	_ face.SessionFace = (*Face)(nil)
	_ face.MessageFace = (*Face)(nil)
	_ face.RouteFace   = (*Face)(nil)
)
