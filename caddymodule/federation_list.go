package caddymodule

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/tidwall/gjson"
	"go.uber.org/zap"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/caddymodule/face"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/federate"
)

// The merged answers of a federated block: a listing or server/discover
// asked of every server at once, each given list_timeout; a server that
// fails or is late is left out (logged and counted) and the others are
// answered.

// errLate is why a server that did not answer within list_timeout was
// left out.
var errLate = errors.New("no answer within list_timeout")

// serverAnswer is one server's answer to a request asked of several.
type serverAnswer struct {
	server int
	result []byte // the JSON-RPC result object; nil when left out
}

// askServers asks each server in which (every server when nil) the
// request method with params (the client's, with the cursor each is
// given by cursorOf, when set), and returns the results of those that
// answered within list_timeout, in configuration order.
func (h *Handler) askServers(r *http.Request, method string, params gjson.Result, which []int, cursorOf func(int) string) []federate.Part {
	f := h.fed
	if which == nil {
		which = make([]int, len(f.servers))
		for i := range which {
			which[i] = i
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), f.listTimeout)
	defer cancel()
	answers := make(chan serverAnswer, len(which))
	for _, i := range which {
		p := params.Raw
		if p == "" {
			p = "{}"
		}
		if cursorOf != nil {
			if c := cursorOf(i); c != "" {
				p = jsonrpc.SetMember(p, "cursor", jsonrpc.Quote(c))
			} else {
				p = jsonrpc.RemoveMembers(p, "cursor")
			}
		}
		body, err := jsonrpc.Marshal(jsonrpc.NewRequest(face.RequestID, method, json.RawMessage(p)))
		if err != nil {
			answers <- serverAnswer{server: i}
			continue
		}
		go func() {
			answers <- serverAnswer{server: i, result: h.askOne(ctx, r, i, method, body)}
		}()
	}
	got := make([][]byte, len(f.servers))
	for range which {
		select {
		case a := <-answers:
			got[a.server] = a.result
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
	}
	parts := make([]federate.Part, 0, len(which))
	for _, i := range which {
		if got[i] == nil {
			if ctx.Err() != nil && r.Context().Err() == nil {
				h.logLeftOut(method, i, "late", errLate)
			}
			continue
		}
		parts = append(parts, federate.Part{Server: i, Result: got[i]})
	}
	return parts
}

// askOne serves the internal request body on server i, and returns its
// result, or nil (logged) when it got none.
func (h *Handler) askOne(ctx context.Context, r *http.Request, i int, method string, body []byte) []byte {
	inner := r.Clone(ctx)
	inner.Header.Del(translate.HeaderName)
	inner.Header.Set(translate.HeaderMethod, method)
	rec := &face.Recorder{}
	if err := h.fed.servers[i].route(rec, inner, body); err != nil && ctx.Err() == nil {
		h.logLeftOut(method, i, "failed", err)
		return nil
	}
	resp, ok := rec.Response()
	switch {
	case !ok:
		if ctx.Err() == nil {
			h.logLeftOut(method, i, "no answer", errors.New("the server's answer held no response"))
		}
		return nil
	case resp.Get("error").Exists():
		h.logLeftOut(method, i, "error", errors.New(jsonrpc.Clip(resp.Get("error.message").String())))
		return nil
	}
	return []byte(resp.Get("result").Raw)
}

// askServer sends the notification body to server i, and forgets it.
func (h *Handler) askServer(r *http.Request, i int, body []byte) {
	ctx, cancel := context.WithTimeout(r.Context(), h.fed.listTimeout)
	defer cancel()
	_ = h.fed.servers[i].route(&face.Recorder{}, r.Clone(ctx), body)
}

// serveMergedList answers a listing with every server's entries, names
// prefixed, one page of each per page; the cursor (sealed, the
// principal's) says where each server's list goes on.
func (h *Handler) serveMergedList(w http.ResponseWriter, r *http.Request, req *translate.ModernRequest, body []byte, kind federate.ListKind) error {
	params := gjson.GetBytes(body, "params")
	princ := h.principal(r)
	var which []int
	var cursors map[int]string
	if c := params.Get("cursor"); c.Exists() && c.Type != gjson.Null {
		var err error
		if c.Type == gjson.String {
			cursors, err = federate.OpenCursor(h.keyring, h.fed.set, c.Str, kind, princ, time.Now())
		}
		if c.Type != gjson.String || err != nil {
			return writeUnknown(w, req.ID, "Invalid params: invalid cursor")
		}
		which = make([]int, 0, len(cursors))
		for i := range h.fed.servers {
			if _, ok := cursors[i]; ok {
				which = append(which, i)
			}
		}
	}
	now := time.Now()
	page, ok := h.fed.lists.get(byte(kind), params, cursors, princ, now)
	if !ok {
		parts := h.askServers(r, req.Method, params, which, func(i int) string { return cursors[i] })
		merged := federate.Merge(h.fed.set, kind, parts)
		for _, hd := range merged.Hidden {
			h.logger.Warn("an entry of a server was hidden from the merged catalog",
				zap.String("server", h.fed.servers[hd.Server].serverName), zap.String("method", req.Method),
				zap.String("name", jsonrpc.Clip(hd.Name)), zap.String("why", hd.Why))
		}
		asked := len(which)
		if which == nil {
			asked = len(h.fed.servers)
		}
		if len(parts) == asked {
			h.fed.lists.put(byte(kind), params, cursors, princ, merged.Result, merged.Next, now)
		} else {
			merged.Result = partial(merged.Result)
		}
		page = listEntry{result: merged.Result, next: merged.Next}
	}
	result := page.result
	next, err := federate.NextCursor(h.keyring, kind, princ, page.next, now)
	if err != nil {
		// A server's cursor too large to carry: its list ends here.
		h.logger.Warn("a merged list ends early: a server's cursor could not be carried", zap.String("method", req.Method), zap.Error(err))
	}
	if next != "" {
		result = []byte(jsonrpc.SetMember(string(result), "nextCursor", jsonrpc.Quote(next)))
	}
	return writeResult(w, req.ID, result)
}

// serveMergedDiscover answers server/discover with what the servers
// offer together, and the gateway's own serverInfo.
func (h *Handler) serveMergedDiscover(w http.ResponseWriter, r *http.Request, req *translate.ModernRequest, body []byte) error {
	params, princ, now := gjson.GetBytes(body, "params"), h.principal(r), time.Now()
	if e, ok := h.fed.lists.get(discoverKind, params, nil, princ, now); ok {
		return writeResult(w, req.ID, e.result)
	}
	parts := h.askServers(r, req.Method, params, nil, nil)
	if len(parts) == 0 {
		return jsonrpc.WriteError(w, req.ID, &jsonrpc.RPCError{
			HTTPStatus: http.StatusServiceUnavailable, Code: jsonrpc.InternalError,
			Message: "no MCP server of this endpoint answered (the gateway's log says why)",
		})
	}
	result := federate.MergeDiscover(h.fed.set, parts, gatewayServerInfo)
	if len(parts) == len(h.fed.servers) {
		h.fed.lists.put(discoverKind, params, nil, princ, result, nil, now)
	} else {
		result = partial(result)
	}
	return writeResult(w, req.ID, result)
}

// partial marks a merged answer a server was left out of as stale at once
// (ttlMs 0): neither the gateway nor the client keeps it, so the server
// is back in the next one.
func partial(result []byte) []byte {
	return []byte(jsonrpc.SetMember(string(result), "ttlMs", "0"))
}

// gatewayServerInfo is the serverInfo of a federated block: the gateway's
// own, not any one server's.
var gatewayServerInfo = []byte(`{"name":"caddy-mcp-gateway","title":"MCP gateway","version":"1"}`)

// writeResult answers a JSON-RPC result object.
func writeResult(w http.ResponseWriter, id json.RawMessage, result []byte) error {
	w.Header().Set("Content-Type", "application/json")
	out := make([]byte, 0, len(result)+len(id)+40)
	out = append(out, `{"jsonrpc":"2.0","id":`...)
	out = append(out, id...)
	out = append(out, `,"result":`...)
	out = append(out, result...)
	out = append(out, '}')
	_, err := w.Write(out)
	return err
}
