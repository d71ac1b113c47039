package rest

import (
	"encoding/json"
	"net/http"

	"github.com/tidwall/gjson"
)

// This file makes GET <base>/openapi.json: an OpenAPI 3.1 document of the
// REST face made from tools/list, so that OpenAPI tool runners call MCP
// tools — long-running and interactive ones too, through the call
// resource's status, advance and cancel. Each tool whose name is a
// pathName has its own paths: PUT (start, the tool's inputSchema as the
// body's `arguments`) and GET of a call, advance, cancel, and the list of
// its calls. A tool whose name is not a pathName cannot be called through
// the face and is left out. The face's other operations (the lists, a
// resource's bytes, a prompt, a completion, the roots) are in it too.

// openAPI answers the document.
func (f *Face) openAPI(w http.ResponseWriter, r *http.Request) error {
	tools, _, ok := f.gather(w, r, "tools")
	if !ok {
		return nil
	}
	w.Header().Set("Cache-Control", "private, no-cache")
	return writeJSON(w, r, http.StatusOK, openAPIDocOf(f.cfg.BasePath, tools))
}

// openAPIDocOf makes the document of the face under base from the
// tools of tools/list.
//
// Its server is base, a URL relative to the document's own (OpenAPI
// 3.1 resolves it so): the gateway does not know the address its clients
// reach it by, and a Host header is not a thing to echo to them.
func openAPIDocOf(base string, tools []json.RawMessage) *openAPIDoc {
	paths := map[string]*oaPathItem{}
	schemas := sharedSchemas()
	for _, raw := range tools {
		t := gjson.ParseBytes(raw)
		name, ok := parsePathName(t.Get("name").String())
		if !ok {
			continue
		}
		// The tool's arguments are a component of their own, so that
		// the schema's local references ("#/$defs/…") have a place in
		// the document to point to.
		component := string(name) + ".arguments"
		schema := oaType("object")
		if s := t.Get("inputSchema"); s.IsObject() {
			schema = &oaSchema{Raw: rebased(s, "#/components/schemas/"+component)}
		}
		schemas[component] = schema
		summary := t.Get("title").String()
		if summary == "" {
			summary = string(name)
		}
		desc := t.Get("description").String()
		addToolPaths(paths, string(name), summary, desc, oaSchemaRef("#/components/schemas/"+component))
	}
	addFacePaths(paths)
	return &openAPIDoc{
		OpenAPI: "3.1.0",
		Info: oaInfo{Title: "MCP tools over HTTP REST (SEP-1597)", Version: "1",
			Description: "Tool calls are resources: PUT starts one (Idempotency-Key), GET polls it, advance answers its questions (If-Match), cancel ends it."},
		Servers: []oaServer{{URL: base,
			Description: "Relative to this document's URL: the REST face's base on the host that served it"}},
		Security:   []map[string][]string{},
		Paths:      paths,
		Components: components(schemas),
	}
}

// jsonContent is a content of one media type, application/json, of schema s.
func jsonContent(s *oaSchema) map[string]*oaMediaType {
	return map[string]*oaMediaType{"application/json": {Schema: s}}
}

// addToolPaths adds the operations of one tool; schema is its arguments'.
func addToolPaths(paths map[string]*oaPathItem, name, summary, desc string, schema *oaSchema) {
	callPath := "/tools/" + name + "/calls/{toolCallID}"
	idParam := &oaParameter{Ref: "#/components/parameters/toolCallID"}
	callResponses := func(status string, extra *oaResponse) map[string]*oaResponse {
		out := map[string]*oaResponse{
			"200":     {Ref: "#/components/responses/Call"},
			"default": {Ref: "#/components/responses/Problem"},
		}
		if extra != nil {
			out[status] = extra
		}
		return out
	}
	paths[callPath] = &oaPathItem{
		Parameters: []*oaParameter{idParam},
		Put: &oaOperation{
			OperationID: "call_" + name, Summary: summary, Description: desc,
			Tags:       []string{name},
			Parameters: []*oaParameter{{Ref: "#/components/parameters/IdempotencyKey"}},
			RequestBody: &oaRequestBody{Required: true, Content: jsonContent(&oaSchema{
				Type: "object", Properties: map[string]*oaSchema{"arguments": schema}, Required: []string{"arguments"},
			})},
			Responses: callResponses("201", &oaResponse{Ref: "#/components/responses/Call"}),
		},
		Get: &oaOperation{
			OperationID: "get_" + name + "_call", Summary: "The state of a call of " + name, Tags: []string{name},
			Responses: callResponses("304", &oaResponse{Description: "Not modified (If-None-Match)"}),
		},
		Delete: &oaOperation{
			OperationID: "delete_" + name + "_call", Summary: "Delete the record of a call of " + name + " that has ended", Tags: []string{name},
			Responses: map[string]*oaResponse{"204": {Description: "Deleted"}, "default": {Ref: "#/components/responses/Problem"}},
		},
	}
	paths[callPath+"/advance"] = &oaPathItem{
		Parameters: []*oaParameter{idParam},
		Post: &oaOperation{
			OperationID: "advance_" + name + "_call", Summary: "Answer the question a call of " + name + " waits on",
			Tags:        []string{name},
			Parameters:  []*oaParameter{{Ref: "#/components/parameters/IfMatch"}},
			RequestBody: &oaRequestBody{Required: true, Content: jsonContent(oaSchemaRef("#/components/schemas/Answer"))},
			Responses:   callResponses("", nil),
		},
	}
	paths[callPath+"/cancel"] = &oaPathItem{
		Parameters: []*oaParameter{idParam},
		Post: &oaOperation{
			OperationID: "cancel_" + name + "_call", Summary: "Cancel a call of " + name, Tags: []string{name},
			Responses: callResponses("", nil),
		},
	}
	paths["/tools/"+name+"/calls"] = &oaPathItem{
		Get: &oaOperation{
			OperationID: "list_" + name + "_calls", Summary: "Your calls of " + name + ", newest first", Tags: []string{name},
			Parameters: []*oaParameter{
				{Name: "status", In: "query", Schema: oaSchemaRef("#/components/schemas/Status")},
				{Name: "limit", In: "query", Schema: &oaSchema{Type: "integer", Minimum: oaInt(1), Maximum: oaInt(listMax)}},
				{Name: "createdAfter", In: "query", Schema: oaType("string")},
			},
			Responses: map[string]*oaResponse{
				"200": {Description: "The calls", Content: jsonContent(&oaSchema{
					Type: "object", Required: []string{"calls"},
					Properties: map[string]*oaSchema{"calls": {Type: "array", Items: oaSchemaRef("#/components/schemas/CallSummary")}},
				})},
				"default": {Ref: "#/components/responses/Problem"},
			},
		},
	}
}

// addFacePaths adds the operations that are not a tool's: the lists, a
// resource's bytes, a prompt, a completion, the roots.
func addFacePaths(paths map[string]*oaPathItem) {
	jsonBody := func(desc string) *oaResponse {
		return &oaResponse{Description: desc, Content: jsonContent(oaType("object"))}
	}
	problem := &oaResponse{Ref: "#/components/responses/Problem"}
	notModified := &oaResponse{Description: "Not modified (If-None-Match)"}
	for _, l := range []struct{ path, id, desc string }{
		{"/tools", "listTools", "tools/list, every page"},
		{"/prompts", "listPrompts", "prompts/list, every page"},
		{"/resources", "listResources", "resources/list, every page"},
		{"/resources-templates", "listResourceTemplates", "resources/templates/list, every page"},
	} {
		paths[l.path] = &oaPathItem{Get: &oaOperation{OperationID: l.id, Summary: l.desc, Tags: []string{"mcp"},
			Responses: map[string]*oaResponse{"200": jsonBody("The list result"), "304": notModified, "default": problem}}}
	}
	nameParam := &oaParameter{Name: "name", In: "path", Required: true, Schema: oaType("string")}
	paths["/resources/{name}"] = &oaPathItem{Get: &oaOperation{OperationID: "readResource", Summary: "A resource's bytes", Tags: []string{"mcp"},
		Parameters: []*oaParameter{nameParam},
		Responses: map[string]*oaResponse{
			"200": {Description: "The resource's first content, its mimeType as Content-Type",
				Content: map[string]*oaMediaType{"*/*": {Schema: &oaSchema{Type: "string", Format: "binary"}}}},
			"304":     notModified,
			"default": problem,
		}}}
	argsBody := &oaRequestBody{Required: false, Content: jsonContent(&oaSchema{
		Type: "object", Properties: map[string]*oaSchema{"arguments": {Type: "object",
			Description: "The prompt's arguments, by name", AdditionalProperties: oaType("string")}}})}
	paths["/prompts/{name}"] = &oaPathItem{Post: &oaOperation{OperationID: "getPrompt", Summary: "prompts/get", Tags: []string{"mcp"},
		Parameters: []*oaParameter{nameParam}, RequestBody: argsBody,
		Responses: map[string]*oaResponse{"200": jsonBody("The prompt"), "default": problem}}}
	paths["/complete"] = &oaPathItem{Post: &oaOperation{OperationID: "complete", Summary: "completion/complete", Tags: []string{"mcp"},
		RequestBody: &oaRequestBody{Required: true, Content: jsonContent(oaSchemaRef("#/components/schemas/CompleteRequest"))},
		Responses:   map[string]*oaResponse{"200": jsonBody("The completion"), "default": problem}}}
	paths["/roots"] = &oaPathItem{Put: &oaOperation{OperationID: "putRoots", Summary: "Your roots, answered to a tool's roots/list", Tags: []string{"mcp"},
		RequestBody: &oaRequestBody{Required: true, Content: jsonContent(oaSchemaRef("#/components/schemas/ListRootsResult"))},
		Responses:   map[string]*oaResponse{"204": {Description: "Set"}, "default": problem}}}
}
