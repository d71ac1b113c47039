package caddymodule

import (
	"encoding/json"
	"net/http"
	"sort"

	"github.com/tidwall/gjson"
)

// This file makes GET <base>/openapi.json: an OpenAPI 3.1 document of the
// REST face made from tools/list, so that OpenAPI tool runners call MCP
// tools — long-running and interactive ones too, through the call
// resource's status, advance and cancel. Each tool whose name is a
// restName has its own paths: PUT (start, the tool's inputSchema as the
// body's `arguments`) and GET of a call, advance, cancel, and the list of
// its calls. A tool whose name is not a restName cannot be called through
// the face and is left out. The face's other operations (the lists, a
// resource's bytes, a prompt, a completion, the roots) are in it too.

// oaObject is a JSON object of the document (keys sorted when encoded).
type oaObject = map[string]any

// restOpenAPI answers the document.
func (h *Handler) restOpenAPI(w http.ResponseWriter, r *http.Request) error {
	tools, _, ok := h.restGather(w, r, "tools")
	if !ok {
		return nil
	}
	paths := oaObject{}
	for _, raw := range tools {
		t := gjson.ParseBytes(raw)
		name, ok := parseRESTName(t.Get("name").String())
		if !ok {
			continue
		}
		schema := any(oaObject{"type": "object"})
		if s := t.Get("inputSchema"); s.IsObject() {
			schema = json.RawMessage(s.Raw)
		}
		summary := t.Get("title").String()
		if summary == "" {
			summary = string(name)
		}
		desc := t.Get("description").String()
		addToolPaths(paths, string(name), summary, desc, schema)
	}
	addFacePaths(paths)
	doc := oaObject{
		"openapi": "3.1.0",
		"info": oaObject{"title": "MCP tools over HTTP REST (SEP-1597)", "version": "1",
			"description": "Tool calls are resources: PUT starts one (Idempotency-Key), GET polls it, advance answers its questions (If-Match), cancel ends it."},
		"servers":    []any{oaObject{"url": h.rest.base}},
		"paths":      paths,
		"components": restComponents(),
	}
	w.Header().Set("Cache-Control", "private, no-cache")
	return writeRESTJSON(w, r, http.StatusOK, doc)
}

// addToolPaths adds the operations of one tool.
func addToolPaths(paths oaObject, name, summary, desc string, schema any) {
	callPath := "/tools/" + name + "/calls/{toolCallID}"
	idParam := oaObject{"$ref": "#/components/parameters/toolCallID"}
	callResponses := func(extra oaObject) oaObject {
		out := oaObject{
			"200":     oaObject{"$ref": "#/components/responses/Call"},
			"default": oaObject{"$ref": "#/components/responses/Problem"},
		}
		for k, v := range extra {
			out[k] = v
		}
		return out
	}
	paths[callPath] = oaObject{
		"parameters": []any{idParam},
		"put": oaObject{
			"operationId": "call_" + name, "summary": summary, "description": desc,
			"tags":       []any{name},
			"parameters": []any{oaObject{"$ref": "#/components/parameters/IdempotencyKey"}},
			"requestBody": oaObject{"required": true, "content": oaObject{"application/json": oaObject{"schema": oaObject{
				"type": "object", "properties": oaObject{"arguments": schema}, "required": []any{"arguments"},
			}}}},
			"responses": callResponses(oaObject{"201": oaObject{"$ref": "#/components/responses/Call"}}),
		},
		"get": oaObject{
			"operationId": "get_" + name + "_call", "summary": "The state of a call of " + name, "tags": []any{name},
			"responses": callResponses(oaObject{"304": oaObject{"description": "Not modified (If-None-Match)"}}),
		},
	}
	paths[callPath+"/advance"] = oaObject{
		"parameters": []any{idParam},
		"post": oaObject{
			"operationId": "advance_" + name + "_call", "summary": "Answer the question a call of " + name + " waits on",
			"tags":        []any{name},
			"parameters":  []any{oaObject{"$ref": "#/components/parameters/IfMatch"}},
			"requestBody": oaObject{"required": true, "content": oaObject{"application/json": oaObject{"schema": oaObject{"$ref": "#/components/schemas/Answer"}}}},
			"responses":   callResponses(nil),
		},
	}
	paths[callPath+"/cancel"] = oaObject{
		"parameters": []any{idParam},
		"post": oaObject{
			"operationId": "cancel_" + name + "_call", "summary": "Cancel a call of " + name, "tags": []any{name},
			"responses": callResponses(nil),
		},
	}
	paths["/tools/"+name+"/calls"] = oaObject{
		"get": oaObject{
			"operationId": "list_" + name + "_calls", "summary": "Your calls of " + name + ", newest first", "tags": []any{name},
			"parameters": []any{
				oaObject{"name": "status", "in": "query", "schema": oaObject{"$ref": "#/components/schemas/Status"}},
				oaObject{"name": "limit", "in": "query", "schema": oaObject{"type": "integer", "minimum": 1, "maximum": restListMax}},
				oaObject{"name": "createdAfter", "in": "query", "schema": oaObject{"type": "string"}},
			},
			"responses": oaObject{
				"200": oaObject{"description": "The calls", "content": oaObject{"application/json": oaObject{"schema": oaObject{
					"type": "object", "required": []any{"calls"},
					"properties": oaObject{"calls": oaObject{"type": "array", "items": oaObject{"$ref": "#/components/schemas/CallSummary"}}},
				}}}},
				"default": oaObject{"$ref": "#/components/responses/Problem"},
			},
		},
	}
}

// addFacePaths adds the operations that are not a tool's: the lists, a
// resource's bytes, a prompt, a completion, the roots.
func addFacePaths(paths oaObject) {
	jsonBody := func(desc string) oaObject {
		return oaObject{"description": desc, "content": oaObject{"application/json": oaObject{"schema": oaObject{"type": "object"}}}}
	}
	problem := oaObject{"$ref": "#/components/responses/Problem"}
	for _, l := range []struct{ path, id, desc string }{
		{"/tools", "listTools", "tools/list, every page"},
		{"/prompts", "listPrompts", "prompts/list, every page"},
		{"/resources", "listResources", "resources/list, every page"},
		{"/resources-templates", "listResourceTemplates", "resources/templates/list, every page"},
	} {
		paths[l.path] = oaObject{"get": oaObject{"operationId": l.id, "summary": l.desc, "tags": []any{"mcp"},
			"responses": oaObject{"200": jsonBody("The list result"), "304": oaObject{"description": "Not modified (If-None-Match)"}, "default": problem}}}
	}
	nameParam := oaObject{"name": "name", "in": "path", "required": true, "schema": oaObject{"type": "string"}}
	paths["/resources/{name}"] = oaObject{"get": oaObject{"operationId": "readResource", "summary": "A resource's bytes", "tags": []any{"mcp"},
		"parameters": []any{nameParam},
		"responses": oaObject{
			"200":     oaObject{"description": "The resource's first content, its mimeType as Content-Type", "content": oaObject{"*/*": oaObject{"schema": oaObject{"type": "string", "format": "binary"}}}},
			"304":     oaObject{"description": "Not modified (If-None-Match)"},
			"default": problem,
		}}}
	argsBody := oaObject{"required": false, "content": oaObject{"application/json": oaObject{"schema": oaObject{
		"type": "object", "properties": oaObject{"arguments": oaObject{"type": "object"}}}}}}
	paths["/prompts/{name}"] = oaObject{"post": oaObject{"operationId": "getPrompt", "summary": "prompts/get", "tags": []any{"mcp"},
		"parameters": []any{nameParam}, "requestBody": argsBody,
		"responses": oaObject{"200": jsonBody("The prompt"), "default": problem}}}
	paths["/complete"] = oaObject{"post": oaObject{"operationId": "complete", "summary": "completion/complete", "tags": []any{"mcp"},
		"requestBody": oaObject{"required": true, "content": oaObject{"application/json": oaObject{"schema": oaObject{
			"type": "object", "required": []any{"ref", "argument"}}}}},
		"responses": oaObject{"200": jsonBody("The completion"), "default": problem}}}
	paths["/roots"] = oaObject{"put": oaObject{"operationId": "putRoots", "summary": "Your roots, answered to a tool's roots/list", "tags": []any{"mcp"},
		"requestBody": oaObject{"required": true, "content": oaObject{"application/json": oaObject{"schema": oaObject{
			"type": "object", "required": []any{"roots"}, "properties": oaObject{"roots": oaObject{"type": "array", "items": oaObject{"type": "object"}}}}}}},
		"responses": oaObject{"204": oaObject{"description": "Set"}, "default": problem}}}
}

// restComponents are the document's shared pieces.
func restComponents() oaObject {
	statuses := make([]any, 0, len(restStatuses))
	keys := make([]string, 0, len(restStatuses))
	for s := range restStatuses {
		keys = append(keys, s)
	}
	sort.Strings(keys)
	for _, s := range keys {
		statuses = append(statuses, s)
	}
	anyObject := oaObject{"type": "object"}
	return oaObject{
		"parameters": oaObject{
			"toolCallID": oaObject{"name": "toolCallID", "in": "path", "required": true, "description": "The call's id, chosen by the client",
				"schema": oaObject{"type": "string", "pattern": "^[A-Za-z0-9_-][A-Za-z0-9_.-]{0,127}$"}},
			"IdempotencyKey": oaObject{"name": "Idempotency-Key", "in": "header", "required": true,
				"schema": oaObject{"type": "string", "minLength": 1, "maxLength": 255}},
			"IfMatch": oaObject{"name": "If-Match", "in": "header", "required": false,
				"description": "The call's etag: a stale one gets 412", "schema": oaObject{"type": "string"}},
		},
		"schemas": oaObject{
			"Status": oaObject{"type": "string", "enum": statuses},
			"Call": oaObject{
				"type": "object", "required": []any{"toolname", "id", "etag", "status", "request", "created", "updated"},
				"properties": oaObject{
					"toolname": oaObject{"type": "string"}, "id": oaObject{"type": "string"}, "etag": oaObject{"type": "string"},
					"status":             oaObject{"$ref": "#/components/schemas/Status"},
					"request":            anyObject,
					"elicitationRequest": anyObject, "samplingRequest": anyObject,
					"inputKey": oaObject{"type": "string"}, "inputsPending": oaObject{"type": "integer"},
					"progress": anyObject,
					"result":   anyObject, "error": anyObject,
					"created": oaObject{"type": "string", "format": "date-time"},
					"updated": oaObject{"type": "string", "format": "date-time"},
				},
			},
			"CallSummary": oaObject{
				"type": "object", "required": []any{"toolname", "id", "etag", "status"},
				"properties": oaObject{
					"toolname": oaObject{"type": "string"}, "id": oaObject{"type": "string"}, "etag": oaObject{"type": "string"},
					"status":  oaObject{"$ref": "#/components/schemas/Status"},
					"created": oaObject{"type": "string", "format": "date-time"},
					"updated": oaObject{"type": "string", "format": "date-time"},
				},
			},
			"Answer": oaObject{"description": "An elicitation result ({action, content}) or a sampling result ({role, content, model, stopReason})",
				"type": "object"},
			"Problem": oaObject{"type": "object", "properties": oaObject{
				"type": oaObject{"type": "string"}, "title": oaObject{"type": "string"},
				"status": oaObject{"type": "integer"}, "detail": oaObject{"type": "string"},
			}},
		},
		"responses": oaObject{
			"Call": oaObject{"description": "The call resource",
				"headers": oaObject{"ETag": oaObject{"schema": oaObject{"type": "string"}},
					"Retry-After": oaObject{"description": "While running: seconds before polling again", "schema": oaObject{"type": "integer"}}},
				"content": oaObject{"application/json": oaObject{"schema": oaObject{"$ref": "#/components/schemas/Call"}}}},
			"Problem": oaObject{"description": "An RFC 9457 problem",
				"content": oaObject{"application/problem+json": oaObject{"schema": oaObject{"$ref": "#/components/schemas/Problem"}}}},
		},
	}
}
