package rest

import (
	"encoding/json"
	"sort"
	"strings"

	"github.com/tidwall/gjson"
)

// This file holds the shared pieces of the OpenAPI document of
// openapi.go: the schemas of every body the face reads or writes, its
// responses and parameters, and the rebasing of a tool's inputSchema into
// the document.

// sharedSchemas are the schemas of the bodies, by component name; the
// document adds each tool's arguments (<tool>.arguments).
func sharedSchemas() map[string]*oaSchema {
	enum := make([]string, 0, len(statuses))
	for s := range statuses {
		enum = append(enum, s)
	}
	sort.Strings(enum)
	anyObject := oaType("object")
	date := &oaSchema{Type: "string", Format: "date-time"}
	str := oaType("string")
	formValues := &oaSchema{Type: "object", Description: "With accept: the form's values, by field name",
		AdditionalProperties: &oaSchema{OneOf: []*oaSchema{str, oaType("number"), oaType("boolean"), {Type: "array", Items: str}}}}
	contentBlock := oaSchemaRef("#/components/schemas/ContentBlock")
	contentBlocks := &oaSchema{Type: "array", Items: contentBlock}
	action := &oaSchema{Type: "string", Enum: []string{"accept", "decline", "cancel"},
		Description: "An elicitation's answer: accept (with content), decline or cancel"}
	role := &oaSchema{Type: "string", Enum: []string{"assistant", "user"}, Description: "A sampled message's role"}
	model := &oaSchema{Type: "string", Description: "The model that sampled the message"}
	return map[string]*oaSchema{
		"Status": {Type: "string", Enum: enum},
		"Call": {
			Type: "object", Required: []string{"toolname", "id", "etag", "status", "request", "created", "updated"},
			Properties: map[string]*oaSchema{
				"toolname": str, "id": str, "etag": str,
				"status": oaSchemaRef("#/components/schemas/Status"),
				"request": {Type: "object", Description: "The PUT body that started the call",
					Properties: map[string]*oaSchema{"arguments": anyObject}},
				"elicitationRequest": {Type: "object", Description: "While awaitingElicitationResult: the elicitation/create params to answer"},
				"samplingRequest":    {Type: "object", Description: "While awaitingSamplingResult: the sampling/createMessage params to answer"},
				"inputKey":           {Type: "string", Description: "The question's key in its round"},
				"inputsPending":      {Type: "integer", Description: "The round's questions not answered yet, this one included"},
				"progress":           {Type: "object", Description: "While running: the last notifications/progress params"},
				"result":             {Ref: "#/components/schemas/CallToolResult"},
				"error":              {Ref: "#/components/schemas/Error"},
				"created":            date,
				"updated":            date,
			},
		},
		"CallSummary": {
			Type: "object", Required: []string{"toolname", "id", "etag", "status"},
			Properties: map[string]*oaSchema{
				"toolname": str, "id": str, "etag": str,
				"status":  oaSchemaRef("#/components/schemas/Status"),
				"created": date,
				"updated": date,
			},
		},
		"CallToolResult": {Type: "object", Required: []string{"content"},
			Description: "With status success: the tool's result; isError true when the tool ran and reported its own failure, its reason in content",
			Properties: map[string]*oaSchema{
				"content":           contentBlocks,
				"structuredContent": anyObject,
				"isError":           oaType("boolean"),
			}},
		"Error": {Type: "object", Required: []string{"code", "message"},
			Description: "With status failed: the JSON-RPC error that ended the call (the tool never answered)",
			Properties: map[string]*oaSchema{
				"code": oaType("integer"), "message": str, "data": {Description: "More about the error"},
			}},
		"ContentBlock": {Type: "object", Required: []string{"type"},
			Description: "An MCP content block: text (text), image or audio (data, mimeType), resource_link or resource",
			Properties: map[string]*oaSchema{
				"type": str, "text": str, "data": str, "mimeType": str,
			}},
		// The answer is one object of the two kinds' properties (an
		// OpenAPI→MCP bridge makes them its tool's arguments, where a
		// oneOf at the top would give it no object), told apart by
		// action: then an ElicitResult, else a CreateMessageResult.
		"Answer": {Type: "object",
			Description: "The answer to the question the call waits on: an ElicitResult (action, content) while awaitingElicitationResult, a CreateMessageResult (role, content, model, stopReason) while awaitingSamplingResult",
			Properties: map[string]*oaSchema{
				"action": action,
				"content": {Description: "With accept: the form's values, by field name; of a sampled message: a content block or an array of them",
					AnyOf: []*oaSchema{formValues, contentBlock, contentBlocks}},
				"role":       role,
				"model":      model,
				"stopReason": str,
			},
			If:   &oaSchema{Required: []string{"action"}, Properties: map[string]*oaSchema{"action": str}},
			Then: oaSchemaRef("#/components/schemas/ElicitResult"),
			Else: oaSchemaRef("#/components/schemas/CreateMessageResult"),
		},
		"ElicitResult": {Type: "object", Required: []string{"action"},
			Description: "The user's answer to an elicitation: accept with the form's content, or decline, or cancel",
			Properties: map[string]*oaSchema{
				"action":  action,
				"content": formValues,
			}},
		"CreateMessageResult": {Type: "object", Required: []string{"role", "content", "model"},
			Description: "The sampled message (a question of the sampling kind has no refusal: cancel the call)",
			Properties: map[string]*oaSchema{
				"role":       role,
				"content":    {OneOf: []*oaSchema{contentBlock, contentBlocks}},
				"model":      model,
				"stopReason": str,
			}},
		"ListRootsResult": {Type: "object", Required: []string{"roots"},
			Description: "Your roots: the answer the gateway gives a tool's roots/list",
			Properties: map[string]*oaSchema{"roots": {Type: "array", Items: &oaSchema{
				Type: "object", Required: []string{"uri"},
				Properties: map[string]*oaSchema{"uri": {Type: "string", Pattern: "^file://"}, "name": str},
			}}}},
		"CompleteRequest": {Type: "object", Required: []string{"ref", "argument"},
			Description: "completion/complete's params",
			Properties: map[string]*oaSchema{
				"ref": {Type: "object", Required: []string{"type"},
					Description: "A prompt (ref/prompt, its name) or a resource template (ref/resource, its uri)",
					Properties: map[string]*oaSchema{
						"type": {Type: "string", Enum: []string{"ref/prompt", "ref/resource"}}, "name": str, "uri": str,
					}},
				"argument": {Type: "object", Required: []string{"name", "value"},
					Properties: map[string]*oaSchema{"name": str, "value": str}},
				"context": {Type: "object", Properties: map[string]*oaSchema{
					"arguments": {Type: "object", AdditionalProperties: str},
				}},
			}},
		"Problem": {Type: "object", Properties: map[string]*oaSchema{
			"type": str, "title": str,
			"status": oaType("integer"), "detail": str,
		}},
	}
}

// components are the document's shared pieces, with its schemas.
func components(schemas map[string]*oaSchema) oaComponents {
	return oaComponents{
		Schemas: schemas,
		Responses: map[string]*oaResponse{
			"Call": {Description: "The call resource",
				Headers: map[string]*oaHeader{"ETag": {Schema: oaType("string")},
					"Retry-After": {Description: "While running: seconds before polling again", Schema: oaType("integer")}},
				Content: jsonContent(oaSchemaRef("#/components/schemas/Call"))},
			"Problem": {Description: "An RFC 9457 problem",
				Content: map[string]*oaMediaType{"application/problem+json": {Schema: oaSchemaRef("#/components/schemas/Problem")}}},
		},
		Parameters: map[string]*oaParameter{
			"toolCallID": {Name: "toolCallID", In: "path", Required: true, Description: "The call's id, chosen by the client",
				Schema: &oaSchema{Type: "string", Pattern: "^[A-Za-z0-9_-][A-Za-z0-9_.-]{0,127}$"}},
			"IdempotencyKey": {Name: "Idempotency-Key", In: "header", Required: true,
				Schema: &oaSchema{Type: "string", MinLength: oaInt(1), MaxLength: oaInt(255)}},
			"IfMatch": {Name: "If-Match", In: "header", Required: false,
				Description: "The call's etag: a stale one gets 412", Schema: oaType("string")},
		},
	}
}

// dataKeywords are the JSON Schema keywords whose values are data, not
// schemas: rebased leaves them as they are.
var dataKeywords = map[string]bool{"const": true, "default": true, "enum": true, "examples": true, "example": true}

// nameKeywords are the JSON Schema keywords whose values are objects of
// schemas by name: their members' names are not keywords.
var nameKeywords = map[string]bool{"properties": true, "patternProperties": true, "$defs": true, "definitions": true, "dependentSchemas": true}

// rebased is a tool's inputSchema s placed at at (a URI fragment,
// "#/components/schemas/…") in the document: its local references ("#"
// and "#/…", relative to the schema's own root) are made relative to
// the document's, so that "#/$defs/Item" becomes at + "/$defs/Item".
// Other references (another document's, an anchor) are left as they are.
func rebased(s gjson.Result, at string) json.RawMessage {
	return appendRebased(nil, s, at, false)
}

// appendRebased appends v, rebased, to b; names tells that v's members
// are schemas by name.
func appendRebased(b []byte, v gjson.Result, at string, names bool) []byte {
	if !v.IsObject() && !v.IsArray() {
		return append(b, v.Raw...)
	}
	obj := v.IsObject()
	open, end := byte('['), byte(']')
	if obj {
		open, end = '{', '}'
	}
	b = append(b, open)
	first := true
	v.ForEach(func(k, m gjson.Result) bool {
		if !first {
			b = append(b, ',')
		}
		first = false
		keyword := obj && !names
		if obj {
			b = append(append(b, k.Raw...), ':')
		}
		switch {
		case keyword && k.Str == "$ref" && m.Type == gjson.String && (m.Str == "#" || strings.HasPrefix(m.Str, "#/")):
			ref, _ := json.Marshal(at + m.Str[1:])
			b = append(b, ref...)
		case keyword && dataKeywords[k.Str]:
			b = append(b, m.Raw...)
		default:
			b = appendRebased(b, m, at, keyword && nameKeywords[k.Str])
		}
		return true
	})
	return append(b, end)
}
