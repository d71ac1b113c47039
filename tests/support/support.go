// Package support holds the fixtures that more than one test package uses:
// the end-to-end tests (tests), the unit tests of translate, the load tool
// (tests/bench) and the demo server (tests/demoserver). Its servers are
// go-sdk servers with tools written for the purpose, where no published
// server exposes the behaviour a test needs; each says so, and an OTLP/HTTP
// traces receiver (otlp.go). It imports the go-sdk, the OTLP messages and
// the standard library only, never the gateway's packages.
package support

import (
	"maps"
	"net"
	"net/http"
	"slices"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Text is a tool result of one text content.
func Text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

// Form is the requestedSchema of an elicitation whose fields (a property
// schema each) are all required.
func Form(fields map[string]any) map[string]any {
	return map[string]any{"type": "object", "properties": fields, "required": slices.Sorted(maps.Keys(fields))}
}

// Serve serves h on a fresh port of 127.0.0.1 until the test ends and
// returns http://127.0.0.1:PORT/mcp.
func Serve(t testing.TB, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String() + "/mcp"
}

// ServeMCP serves server with the go-sdk's Streamable HTTP handler (opts
// may be nil: sessions, the legacy protocol) as Serve does.
func ServeMCP(t testing.TB, server *mcp.Server, opts *mcp.StreamableHTTPOptions) string {
	t.Helper()
	return Serve(t, mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, opts))
}
