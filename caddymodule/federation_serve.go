package caddymodule

import (
	"bytes"
	"encoding/json"
	"net/http"

	"github.com/tidwall/gjson"
	"go.uber.org/zap"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/federate"
)

// tasksExtension is the Tasks extension's name, in a request's client
// capabilities: only a request declaring it may be answered with a task.
const tasksExtension = "io.modelcontextprotocol/tasks"

// serveFederated serves a modern request to a federated block: checked
// once (the modern ladder), then routed by what its body names — never by
// a header alone: the ladder refused a header naming anything else — to
// one server, or asked of every server and merged.
func (h *Handler) serveFederated(w http.ResponseWriter, r *http.Request, body []byte) error {
	req, rerr := translate.ValidateModern(r.Method, r.Header, body, supportedModern)
	if rerr != nil {
		return jsonrpc.WriteError(w, requestID(body), rerr)
	}
	if translate.RemovedMethod(req.Method) {
		return jsonrpc.WriteError(w, req.ID, jsonrpc.NewMethodNotFound(req.Method))
	}
	f := h.fed
	if kind, ok := federate.ListKindOf(req.Method); ok {
		return h.serveMergedList(w, r, req, body, kind) // federation_list.go
	}
	switch req.Method {
	case "server/discover":
		return h.serveMergedDiscover(w, r, req, body)
	case "subscriptions/listen":
		return h.serveMergedListen(w, r, req, body)
	case "tools/call", "prompts/get":
		i, name, ok := f.set.Route(req.Name)
		if ok && req.Method == "tools/call" {
			ok = f.set.ToolShown(i, name)
		} else if ok {
			_, ok = f.set.Prefixed(i, name)
		}
		if !ok {
			what := "tool"
			if req.Method == "prompts/get" {
				what = "prompt"
			}
			return writeUnknown(w, req.ID, "Unknown "+what+": "+jsonrpc.Clip(req.Name))
		}
		// A task can answer only a call declaring the Tasks extension, or
		// one a face asks the gateway to host.
		tasks := req.Method == "tools/call" && (bytes.Contains(req.ClientCapabilities, []byte(tasksExtension)) || routeOf(r).hostTask)
		return h.toServer(w, r, body, i, "params.name", name, tasks)
	case "tasks/get", "tasks/update", "tasks/cancel":
		i, id, ok := f.set.UnwrapTaskID(req.Name)
		if !ok {
			return writeUnknown(w, req.ID, "Invalid params: unknown taskId")
		}
		return h.toServer(w, r, body, i, "params.taskId", id, true)
	case "resources/read":
		i, ok := h.resourceOwner(r, body, req.Name)
		if !ok {
			return jsonrpc.WriteError(w, req.ID, resourceNotFound(req.Name))
		}
		return h.toServer(w, r, body, i, "", "", false)
	case "completion/complete":
		return h.serveCompletion(w, r, req, body)
	}
	if req.ID == nil {
		// A notification: every server may care.
		for i := range f.servers {
			h.askServer(r, i, body)
		}
		w.WriteHeader(http.StatusAccepted)
		return nil
	}
	// A method the gateway does not route by name: the first server
	// answers it (an unknown method, its -32601).
	return h.toServer(w, r, body, 0, "", "", false)
}

// serveCompletion routes completion/complete by its ref: a prompt's
// (prefixed) name, or a resource template's URI.
func (h *Handler) serveCompletion(w http.ResponseWriter, r *http.Request, req *translate.ModernRequest, body []byte) error {
	ref := gjson.GetBytes(body, "params.ref")
	switch ref.Get("type").String() {
	case "ref/prompt":
		i, name, ok := h.fed.set.Route(ref.Get("name").String())
		if ok {
			_, ok = h.fed.set.Prefixed(i, name)
		}
		if !ok {
			return writeUnknown(w, req.ID, "Unknown prompt: "+jsonrpc.Clip(ref.Get("name").String()))
		}
		return h.toServer(w, r, body, i, "params.ref.name", name, false)
	case "ref/resource":
		uri := ref.Get("uri").String()
		i, ok := h.resourceOwner(r, body, uri)
		if !ok {
			return jsonrpc.WriteError(w, req.ID, resourceNotFound(uri))
		}
		return h.toServer(w, r, body, i, "", "", false)
	}
	return writeUnknown(w, req.ID, "Invalid params: params.ref must be a ref/prompt or a ref/resource")
}

// writeUnknown answers -32602 in-band (HTTP 200), as a server does for a
// tool, prompt or task it does not have.
func writeUnknown(w http.ResponseWriter, id []byte, msg string) error {
	return jsonrpc.WriteError(w, id, &jsonrpc.RPCError{HTTPStatus: http.StatusOK, Code: jsonrpc.InvalidParams, Message: msg})
}

// resourceNotFound is the 2026-07-28 answer for a resource no server has:
// -32602 with the URI in data.
func resourceNotFound(uri string) *jsonrpc.RPCError {
	return &jsonrpc.RPCError{
		HTTPStatus: http.StatusOK, Code: jsonrpc.InvalidParams, Message: "Resource not found",
		Data: json.RawMessage(`{"uri":` + jsonrpc.Quote(jsonrpc.Clip(uri)) + `}`),
	}
}

// toServer serves r, the block's request, on server i: its body with the
// string at path (a name or taskId with the block's namespace) set to
// value, the Mcp-Name header to match. With tasks, the taskIds of the
// answer are put in the block's namespace (unless relayed: the owner
// instance did).
func (h *Handler) toServer(w http.ResponseWriter, r *http.Request, body []byte, i int, path, value string, tasks bool) error {
	in := h.fed.servers[i]
	routeOf(r).server = in.serverName
	var tw *taskIDWriter
	if tasks {
		tw = &taskIDWriter{ResponseWriter: w, server: federate.ServerName(in.serverName)}
		defer tw.finish()
		w = tw
	}
	inner := r.WithContext(withBlockRequest(r.Context(), r, body, tw))
	nb := body
	if path != "" {
		var err error
		if nb, err = federate.SetString(body, path, value); err != nil {
			return jsonrpc.WriteError(w, requestID(body), &jsonrpc.RPCError{HTTPStatus: http.StatusBadRequest, Code: jsonrpc.InvalidParams, Message: "Invalid params: " + err.Error()})
		}
		if path != "params.ref.name" {
			inner.Header = r.Header.Clone()
			inner.Header.Set(translate.HeaderName, headerValue(value))
		}
	}
	return in.route(w, inner, nb)
}

// logLeftOut logs a server a merged answer left out, and counts it.
func (h *Handler) logLeftOut(method string, i int, why string, err error) {
	h.metrics.LeftOut(h.fed.servers[i].serverName, method)
	h.logger.Warn("a server was left out of a merged answer",
		zap.String("server", h.fed.servers[i].serverName), zap.String("method", method), zap.String("why", why), zap.Error(err))
}
