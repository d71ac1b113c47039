package multiturn

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"

	"github.com/tidwall/gjson"
	"go.uber.org/zap"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/seal"
)

// This file is how a session opts in and is opened again: the sealed
// session id given at initialize, and opened on every request of the
// session.

// session is an opted-in session, opened.
type session struct {
	seal.TurnSession
	// outer is the id the client holds (the sealed TurnSession).
	outer string
}

// sessionKey is the context key of the request's opened session.
type sessionKey struct{}

// sessionOf is the session OpenSession opened for r, or nil.
func sessionOf(r *http.Request) *session {
	s, _ := r.Context().Value(sessionKey{}).(*session)
	return s
}

// OpenSession implements face.SessionFace: when r's Mcp-Session-Id is an
// opted-in session's, it returns r carrying the inner session id (and
// the session, for the face's other hooks), and w giving the client its
// sealed id back wherever an answer names the inner one. An id with the
// TurnSession prefix that does not open is left as it is (the session is
// unknown: 404, as for any).
func (o *Opener) OpenSession(w http.ResponseWriter, r *http.Request) (http.ResponseWriter, *http.Request) {
	sid := r.Header.Get("Mcp-Session-Id")
	if seal.IsTurnSession(sid) {
		if s, err := seal.OpenTurnSession(o.gw.Keyring(), seal.GatewaySessionID(sid)); err == nil {
			return opened(w, r, &session{TurnSession: s, outer: sid})
		}
	}
	if sessionOf(r) != nil {
		// An internal request made on an opened session's behalf is not
		// that session's.
		r = r.WithContext(context.WithValue(r.Context(), sessionKey{}, (*session)(nil)))
	}
	return w, r
}

// opened returns r carrying s's inner session id and s, and w giving
// the client s's sealed id back.
func opened(w http.ResponseWriter, r *http.Request, s *session) (http.ResponseWriter, *http.Request) {
	r2 := r.WithContext(context.WithValue(r.Context(), sessionKey{}, s))
	r2.Header = r.Header.Clone()
	inner := string(s.Inner)
	r2.Header.Set("Mcp-Session-Id", inner)
	w = &sessionWriter{ResponseWriter: w, outer: func(v string) string {
		if v == inner {
			return s.outer
		}
		return v
	}}
	return w, r2
}

// optInWriter returns w for the answer to an initialize that opts in
// (body's params): the session id the answer gives is sealed into a
// TurnSession. A client whose capabilities do not fit
// (seal.MaxTurnSessionCapabilities) is served without the opt-in.
func (f *Face) optInWriter(w http.ResponseWriter, body []byte) http.ResponseWriter {
	params := gjson.GetBytes(body, "params")
	if !params.Get(capabilityPath).IsObject() {
		return w
	}
	caps := compactRaw(params.Get("capabilities").Raw)
	var info []byte
	if i := params.Get("clientInfo"); i.IsObject() {
		info = compactRaw(i.Raw)
	}
	return &sessionWriter{ResponseWriter: w, outer: func(inner string) string {
		id, err := seal.SealTurnSession(f.gw.Keyring(), seal.TurnSession{Inner: seal.GatewaySessionID(inner), Capabilities: caps, ClientInfo: info})
		if err != nil {
			f.gw.Logger().Debug("multi-turn SSE opt-in not kept", zap.Error(err))
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

// sessionWriter gives the client the session id outer maps the
// Mcp-Session-Id of the answer to, when the answer has one.
type sessionWriter struct {
	http.ResponseWriter
	outer func(string) string
	wrote bool
}

// WriteHeader implements http.ResponseWriter.
func (w *sessionWriter) WriteHeader(code int) {
	if !w.wrote && code >= http.StatusOK {
		w.wrote = true
		if v := w.Header().Get("Mcp-Session-Id"); v != "" {
			w.Header().Set("Mcp-Session-Id", w.outer(v))
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

// Write implements http.ResponseWriter.
func (w *sessionWriter) Write(b []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the flusher.
func (w *sessionWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
