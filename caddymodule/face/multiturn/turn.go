package multiturn

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/caddymodule/face"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/sse"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/seal"
)

// This file writes what the client gets: a turn (the input requests of
// an input_required answer between buffer_input and input_required), or
// the answer to its tools/call.

// readInputs reads the input requests of an input_required result: what
// the turn token keeps of them, and the JSON-RPC requests the client is
// sent, each with its key as id. It fails (a reason for the client) on a
// request the client did not declare the capability for, or one a turn
// cannot carry.
func readInputs(reqs gjson.Result, caps []byte) (inputs []seal.TurnInput, msgs [][]byte, fail string) {
	if reqs.Exists() && !reqs.IsObject() {
		return nil, nil, "the server's inputRequests is not an object"
	}
	reqs.ForEach(func(k, v gjson.Result) bool {
		method, params := v.Get("method"), v.Get("params")
		kind := byte(face.KindOf(method.String()))
		switch {
		case !v.IsObject() || method.Type != gjson.String || kind == 0:
			fail = fmt.Sprintf("the server asked for input %q of an unknown kind", jsonrpc.Clip(k.Str))
		case method.Str != translate.MethodListRoots && !params.IsObject():
			fail = fmt.Sprintf("the server's input request %q (%s) has no params", jsonrpc.Clip(k.Str), method.Str)
		case k.Str == "" || len(k.Str) > seal.MaxTurnKey:
			fail = fmt.Sprintf("the server's input request key is empty or longer than %d bytes", seal.MaxTurnKey)
		case len(inputs) == seal.MaxTurnInputs:
			fail = fmt.Sprintf("the server asked for more than %d inputs at once", seal.MaxTurnInputs)
		case !translate.ClientSupports(caps, method.Str, []byte(params.Raw)):
			fail = fmt.Sprintf("cannot ask for input %q (%s): this client did not declare the capability %s at initialize",
				jsonrpc.Clip(k.Str), method.Str, translate.RequiredCapability(method.Str, []byte(params.Raw)))
		}
		if fail != "" {
			return false
		}
		inputs = append(inputs, seal.TurnInput{Key: k.Str, Kind: kind})
		msgs = append(msgs, inlineRequest(k.Str, method.Str, params))
		return true
	})
	if fail != "" {
		return nil, nil, fail
	}
	return inputs, msgs, ""
}

// inlineRequest is the JSON-RPC request an input request is sent to the
// client as: id key. A URL-mode elicitation gets the elicitationId
// 2025-11-25 requires (2026-07-28 has none).
func inlineRequest(key, method string, params gjson.Result) []byte {
	p := ""
	if params.IsObject() {
		p = params.Raw
		if method == translate.MethodElicit && translate.ElicitMode([]byte(p)) == "url" && !params.Get("elicitationId").Exists() {
			var rnd [16]byte
			_, _ = rand.Read(rnd[:])
			if at, text, ok := jsonrpc.InsertMember(p, "elicitationId", `"elicitationId":"`+hex.EncodeToString(rnd[:])+`"`); ok {
				p = p[:at] + text + p[at:]
			}
		}
	}
	msg := `{"jsonrpc":"2.0","id":` + jsonrpc.Quote(key) + `,"method":` + jsonrpc.Quote(method)
	if p != "" {
		msg += `,"params":` + p
	}
	return []byte(msg + "}")
}

// writeTurn ends the answer with a turn: buffer_input, the requests, and
// input_required carrying token, on an event stream that then ends.
func (f *Face) writeTurn(w http.ResponseWriter, bufferID, token string, msgs [][]byte) error {
	sse.SetHeaders(w.Header())
	w.Header().Del("Content-Length")
	w.WriteHeader(http.StatusOK)
	sw := sse.NewWriter(w)
	sw.WriteTimeout(f.gw.Limits().WriteTimeout)
	defer sw.Close()
	if err := sw.WriteEvent(sse.Event{Type: eventBufferInput, ID: bufferID, HasID: true}); err != nil {
		return nil // client gone: the token it did not get is never used
	}
	for _, m := range msgs {
		if err := sw.WriteEvent(sse.Event{Type: "message", Data: m, HasData: true}); err != nil {
			return nil
		}
	}
	_ = sw.WriteEvent(sse.Event{Type: eventInputRequired, ID: token, HasID: true})
	return nil
}

// writeAnswer answers with msg, the JSON-RPC response to the client's
// tools/call: one message event when the client takes an event stream,
// else JSON with status.
func (f *Face) writeAnswer(w http.ResponseWriter, r *http.Request, status int, msg []byte) error {
	if !acceptsEventStream(r) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(msg)))
		w.WriteHeader(status)
		_, _ = w.Write(msg)
		return nil
	}
	sse.SetHeaders(w.Header())
	w.WriteHeader(http.StatusOK)
	sw := sse.NewWriter(w)
	sw.WriteTimeout(f.gw.Limits().WriteTimeout)
	defer sw.Close()
	_ = sw.WriteEvent(sse.Event{Type: "message", Data: msg, HasData: true})
	return nil
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
