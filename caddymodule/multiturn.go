package caddymodule

import (
	"bytes"
	"encoding/json"
	"mime"
	"net/http"
	"strings"

	"github.com/tidwall/gjson"
	"go.uber.org/zap"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/seal"
)

// This file is the multi-turn SSE face (SEP-1858, option
// `multi_turn_sse on`) for legacy (2025-era) clients that opt in: how a
// session opts in, and where dispatch hands its requests to the face.
// multiturn_call.go makes a tools/call and answers it with the result or a
// turn (buffer_input, the input requests, input_required);
// multiturn_answers.go takes the client's buffered answers back.
//
// Opting in, and remembering it. The SEP gates the events on a protocol
// version after 2025-11-25, but the next version became 2026-07-28, a
// protocol without sessions, so an explicit capability is the opt-in: a
// client declares capabilities.experimental[turnCapability] (any object)
// in its initialize. The gateway remembers it in the session id it gives
// the client: the id the client would have got (a pin, or a gateway-held
// session) sealed, with the client's capabilities and clientInfo, inside a
// seal.TurnSession. Every request carries it, to any instance holding
// state_key: nothing is stored, and a session that did not opt in keeps
// the very id it always had. dispatch opens a TurnSession id first
// (openTurnSession) and serves the request with the inner id, exactly as
// it would serve a session that did not opt in, except for:
//
//   - a tools/call whose client accepts text/event-stream (callTurns);
//   - a POST with Last-Event-ID: the answers of a turn (serveTurnAnswers).
//
// The session id the client gets back in any answer stays the sealed one.

// turnCapability is the experimental capability a client opts in with.
const turnCapability = "io.modelcontextprotocol/multi-turn-sse"

// turnCapabilityPath finds it in initialize params (gjson: dots escaped).
const turnCapabilityPath = `capabilities.experimental.io\.modelcontextprotocol/multi-turn-sse`

// The SEP's events.
const (
	eventBufferInput   = "buffer_input"
	eventInputRequired = "input_required"
)

// turnUsedSize bounds the turn tokens an instance remembers as used (see
// seal.ReplayFilter).
const turnUsedSize = 1 << 16

// turnUsed makes a turn's Last-Event-ID single use on this instance. It is
// process-wide, so that a config reload does not forget what was used.
var turnUsed = seal.NewReplayFilter(turnUsedSize)

// turnSession is an opted-in session, opened.
type turnSession struct {
	seal.TurnSession
	// outer is the id the client holds (the sealed TurnSession).
	outer string
}

// multiTurnOn reports whether the face is on.
func (h *Handler) multiTurnOn() bool { return h.Parking.MultiTurnSSE == "on" }

// openTurnSession opens r's Mcp-Session-Id when it is an opted-in
// session's: it returns r carrying the inner session id, and w giving the
// client its sealed id back wherever an answer names the inner one. An id
// with the TurnSession prefix that does not open is left as it is (the
// session is unknown: 404, as for any). It opens whether the face is on or
// not, so that turning it off ends no session.
func (h *Handler) openTurnSession(w http.ResponseWriter, r *http.Request) (http.ResponseWriter, *http.Request, *turnSession) {
	sid := r.Header.Get("Mcp-Session-Id")
	if !seal.IsTurnSession(sid) {
		return w, r, nil
	}
	s, err := seal.OpenTurnSession(h.keyring, seal.GatewaySessionID(sid))
	if err != nil {
		return w, r, nil
	}
	r2 := new(http.Request)
	*r2 = *r
	r2.Header = r.Header.Clone()
	r2.Header.Set("Mcp-Session-Id", string(s.Inner))
	inner := string(s.Inner)
	w = &turnSessionWriter{ResponseWriter: w, outer: func(v string) string {
		if v == inner {
			return sid
		}
		return v
	}}
	return w, r2, &turnSession{TurnSession: s, outer: sid}
}

// optInWriter returns w for the answer to an initialize that opts in
// (body's params), when the face is on: the session id the answer gives
// is sealed into a TurnSession. A client whose capabilities do not fit
// (seal.MaxTurnSessionCapabilities) is served without the opt-in.
func (h *Handler) optInWriter(w http.ResponseWriter, body []byte) http.ResponseWriter {
	params := gjson.GetBytes(body, "params")
	if !params.Get(turnCapabilityPath).IsObject() {
		return w
	}
	caps := compactRaw(params.Get("capabilities").Raw)
	var info []byte
	if i := params.Get("clientInfo"); i.IsObject() {
		info = compactRaw(i.Raw)
	}
	return &turnSessionWriter{ResponseWriter: w, outer: func(inner string) string {
		id, err := seal.SealTurnSession(h.keyring, seal.TurnSession{Inner: seal.GatewaySessionID(inner), Capabilities: caps, ClientInfo: info})
		if err != nil {
			h.logger.Debug("multi-turn SSE opt-in not kept", zap.Error(err))
			return inner
		}
		return string(id)
	}}
}

// compactRaw is raw JSON without insignificant space (raw as it is when
// it does not compact).
func compactRaw(raw string) []byte {
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(raw)); err != nil {
		return []byte(raw)
	}
	return b.Bytes()
}

// turnSessionWriter gives the client the session id outer maps the
// Mcp-Session-Id of the answer to, when the answer has one.
type turnSessionWriter struct {
	http.ResponseWriter
	outer func(string) string
	wrote bool
}

func (w *turnSessionWriter) WriteHeader(code int) {
	if !w.wrote && code >= http.StatusOK {
		w.wrote = true
		if v := w.Header().Get("Mcp-Session-Id"); v != "" {
			w.Header().Set("Mcp-Session-Id", w.outer(v))
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *turnSessionWriter) Write(b []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the flusher.
func (w *turnSessionWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// takesTurns reports whether the request of an opted-in session, routed
// as d says, is a tools/call the face serves: a legacy request (one
// message, POST) whose client takes an event stream, going to its
// session's upstream.
func takesTurns(r *http.Request, l *learned, d decision) bool {
	return l.in.era == eraLegacy && r.Method == http.MethodPost && !l.in.batch &&
		l.msg.Kind == jsonrpc.KindRequest && l.msg.Method == "tools/call" &&
		d.refuse == refuseNone && d.relayTo == nil && (d.cell == cellPinned || d.cell == cellReverse) && d.up != nil &&
		acceptsEventStream(r)
}

// acceptsEventStream reports whether r's Accept lists text/event-stream.
func acceptsEventStream(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept") {
		for part := range strings.SplitSeq(v, ",") {
			if mt, _, err := mime.ParseMediaType(strings.TrimSpace(part)); err == nil && mt == "text/event-stream" {
				return true
			}
		}
	}
	return false
}
