package rest

import "encoding/json"

// The pieces of the OpenAPI 3.1 document of openapi.go, as the JSON
// rule of package jsonrpc has it: structs whose fields are in the order
// the members are written, maps only for objects whose member names are
// data (paths, status codes, media types, header, component and property
// names), and the tool's inputSchema, foreign, a json.RawMessage (its
// local references rebased: openapi_schemas.go).

// openAPIDoc is the document.
type openAPIDoc struct {
	OpenAPI string     `json:"openapi"`
	Info    oaInfo     `json:"info"`
	Servers []oaServer `json:"servers"`
	// Security is empty: the gateway authenticates no one itself
	// (Caddy in front may; the principal is whatever it sets).
	Security   []map[string][]string  `json:"security"`
	Paths      map[string]*oaPathItem `json:"paths"` // path → item
	Components oaComponents           `json:"components"`
}

// oaInfo is the document's info.
type oaInfo struct {
	Title       string `json:"title"`
	Version     string `json:"version"`
	Description string `json:"description,omitempty"`
}

// oaServer is a server the document's paths are under.
type oaServer struct {
	URL         string `json:"url"`
	Description string `json:"description,omitempty"`
}

// oaComponents are the document's shared pieces, each by name.
type oaComponents struct {
	Schemas    map[string]*oaSchema    `json:"schemas,omitempty"`
	Responses  map[string]*oaResponse  `json:"responses,omitempty"`
	Parameters map[string]*oaParameter `json:"parameters,omitempty"`
}

// oaPathItem is the operations of a path, and the parameters they share.
type oaPathItem struct {
	Parameters []*oaParameter `json:"parameters,omitempty"`
	Get        *oaOperation   `json:"get,omitempty"`
	Put        *oaOperation   `json:"put,omitempty"`
	Post       *oaOperation   `json:"post,omitempty"`
	Delete     *oaOperation   `json:"delete,omitempty"`
}

// oaOperation is one method of a path.
type oaOperation struct {
	OperationID string                 `json:"operationId"`
	Summary     string                 `json:"summary,omitempty"`
	Description string                 `json:"description,omitempty"`
	Tags        []string               `json:"tags,omitempty"`
	Parameters  []*oaParameter         `json:"parameters,omitempty"`
	RequestBody *oaRequestBody         `json:"requestBody,omitempty"`
	Responses   map[string]*oaResponse `json:"responses"` // status → response
}

// oaParameter is a reference to a component's parameter (Ref alone), or a
// parameter.
type oaParameter struct {
	Ref         string    `json:"$ref,omitempty"`
	Name        string    `json:"name,omitempty"`
	In          string    `json:"in,omitempty"`
	Required    bool      `json:"required,omitempty"`
	Description string    `json:"description,omitempty"`
	Schema      *oaSchema `json:"schema,omitempty"`
}

// oaRequestBody is an operation's body.
type oaRequestBody struct {
	Required bool                    `json:"required"`
	Content  map[string]*oaMediaType `json:"content"` // media type → media
}

// oaMediaType is the schema of one media type of a body.
type oaMediaType struct {
	Schema *oaSchema `json:"schema,omitempty"`
}

// oaResponse is a reference to a component's response (Ref alone), or a
// response.
type oaResponse struct {
	Ref         string                  `json:"$ref,omitempty"`
	Description string                  `json:"description,omitempty"`
	Headers     map[string]*oaHeader    `json:"headers,omitempty"` // header name → header
	Content     map[string]*oaMediaType `json:"content,omitempty"` // media type → media
}

// oaHeader is a header of a response.
type oaHeader struct {
	Description string    `json:"description,omitempty"`
	Schema      *oaSchema `json:"schema,omitempty"`
}

// oaSchema is a JSON Schema: a reference (Ref alone), the few keywords
// the document uses, or Raw, a foreign schema (a tool's inputSchema,
// its local references rebased: rebased) written instead of the other
// fields.
type oaSchema struct {
	Ref         string               `json:"$ref,omitempty"`
	Description string               `json:"description,omitempty"`
	Type        string               `json:"type,omitempty"`
	Format      string               `json:"format,omitempty"`
	Pattern     string               `json:"pattern,omitempty"`
	Enum        []string             `json:"enum,omitempty"`
	Minimum     *int                 `json:"minimum,omitempty"`
	Maximum     *int                 `json:"maximum,omitempty"`
	MinLength   *int                 `json:"minLength,omitempty"`
	MaxLength   *int                 `json:"maxLength,omitempty"`
	Required    []string             `json:"required,omitempty"`
	Properties  map[string]*oaSchema `json:"properties,omitempty"` // property name → schema
	Items       *oaSchema            `json:"items,omitempty"`
	// AdditionalProperties is the schema of the members Properties
	// does not name.
	AdditionalProperties *oaSchema       `json:"additionalProperties,omitempty"`
	OneOf                []*oaSchema     `json:"oneOf,omitempty"`
	AnyOf                []*oaSchema     `json:"anyOf,omitempty"`
	If                   *oaSchema       `json:"if,omitempty"`
	Then                 *oaSchema       `json:"then,omitempty"`
	Else                 *oaSchema       `json:"else,omitempty"`
	Raw                  json.RawMessage `json:"-"`
}

// MarshalJSON writes Raw when it is set, else the keywords.
func (s *oaSchema) MarshalJSON() ([]byte, error) {
	if s.Raw != nil {
		return s.Raw, nil
	}
	type keywords oaSchema // without the method
	return json.Marshal((*keywords)(s))
}

// oaSchemaRef is a reference to a schema of the document's components.
func oaSchemaRef(ref string) *oaSchema { return &oaSchema{Ref: ref} }

// oaType is a schema of only a type.
func oaType(t string) *oaSchema { return &oaSchema{Type: t} }

// oaInt is a bound of a schema.
func oaInt(n int) *int { return &n }
