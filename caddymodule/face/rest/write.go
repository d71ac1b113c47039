package rest

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
)

// This file reads the face's request bodies and writes its answers: JSON,
// bytes, and RFC 9457 problems.

// problem is an RFC 9457 problem details object.
type problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
}

// writeProblem answers with an application/problem+json of status.
func writeProblem(w http.ResponseWriter, status int, detail string) error {
	b, _ := json.Marshal(problem{Type: "about:blank", Title: http.StatusText(status), Status: status, Detail: detail})
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(b)
	return nil
}

// writeJSON answers with v as JSON.
func writeJSON(w http.ResponseWriter, r *http.Request, status int, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return writeProblem(w, http.StatusInternalServerError, "the answer could not be encoded")
	}
	return writeBytes(w, r, status, "application/json", b)
}

// writeBytes answers with b of content type ct (no body for HEAD).
func writeBytes(w http.ResponseWriter, r *http.Request, status int, ct string, b []byte) error {
	w.Header().Set("Content-Type", ct)
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		_, _ = w.Write(b)
	}
	return nil
}

// readBody reads a JSON request body: 415 for another content type, 413
// beyond max_request_body, 400 for invalid JSON. An empty body is allowed
// when emptyOK (and read as nil).
func (f *Face) readBody(w http.ResponseWriter, r *http.Request, emptyOK bool) ([]byte, bool) {
	if r.ContentLength == 0 && emptyOK {
		return nil, true
	}
	if !isJSONContentType(r.Header.Get("Content-Type")) {
		_ = writeProblem(w, http.StatusUnsupportedMediaType, "the body must be application/json")
		return nil, false
	}
	body, rerr := f.gw.ReadBody(w, r)
	if rerr != nil {
		_ = writeProblem(w, rerr.HTTPStatus, rerr.Message)
		return nil, false
	}
	if len(body) == 0 && emptyOK {
		return nil, true
	}
	if jsonrpc.ValidJSON(body) != nil {
		_ = writeProblem(w, http.StatusBadRequest, "the body is not valid JSON")
		return nil, false
	}
	return body, true
}

// isJSONContentType reports whether ct is application/json or a +json
// type.
func isJSONContentType(ct string) bool {
	mt, _, _ := strings.Cut(strings.ToLower(strings.TrimSpace(ct)), ";")
	mt = strings.TrimSpace(mt)
	return mt == "application/json" || strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json")
}
