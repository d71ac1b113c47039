package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/tests/support"
)

// This file holds the tools that never ask the client anything: content
// shapes, progress, logging, errors, schemas, reconnection and the
// list-changed triggers. The tools that send in-line requests are in
// inputs.go.

// noArgs is the input of the tools that take no arguments.
type noArgs struct{}

func registerTools(server *mcp.Server) {
	mcp.AddTool(server, &mcp.Tool{Name: "test_simple_text", Description: "Returns one text block."}, simpleText)
	mcp.AddTool(server, &mcp.Tool{Name: "test_image_content", Description: "Returns one PNG image block."}, imageContent)
	mcp.AddTool(server, &mcp.Tool{Name: "test_audio_content", Description: "Returns one WAV audio block."}, audioContent)
	mcp.AddTool(server, &mcp.Tool{Name: "test_embedded_resource", Description: "Returns one embedded text resource."}, embeddedResource)
	mcp.AddTool(server, &mcp.Tool{Name: "test_multiple_content_types", Description: "Returns text, an image and an embedded resource."}, multipleContent)
	mcp.AddTool(server, &mcp.Tool{Name: "test_error_handling", Description: "Always fails with an isError result."}, failing)
	mcp.AddTool(server, &mcp.Tool{Name: "test_tool_with_progress", Description: "Reports progress 0, 50, 100 of 100 on the call's stream, echoing the request's progressToken."}, withProgress)
	mcp.AddTool(server, &mcp.Tool{Name: "test_tool_with_logging", Description: "Logs three info lines on the call's stream (after logging/setLevel)."}, withLogging)
	mcp.AddTool(server, &mcp.Tool{Name: "test_logging_tool", Description: "Logs a debug, an info and a warning line on the call's stream (after logging/setLevel), then returns."}, loggingTool)
	mcp.AddTool(server, &mcp.Tool{Name: "test_reconnection", Description: "Closes its SSE stream mid-call; the result arrives after the client reconnects with Last-Event-ID."}, reconnection)
	mcp.AddTool(server, &mcp.Tool{Name: "json_schema_2020_12_tool", Description: "Has an input schema using JSON Schema 2020-12 keywords.", InputSchema: schema202012}, schemaTool)
	mcp.AddTool(server, &mcp.Tool{Name: "test_x_mcp_header", Description: "Has a string argument mirrored into the Mcp-Param-Region header.", InputSchema: xMCPHeaderSchema}, xMCPHeader)

	triggers := &transients{}
	mcp.AddTool(server, &mcp.Tool{Name: "test_trigger_tool_change", Description: "Adds or removes a transient tool, so the server sends notifications/tools/list_changed."},
		func(context.Context, *mcp.CallToolRequest, noArgs) (*mcp.CallToolResult, any, error) {
			return support.Text(triggers.toggleTool(server)), nil, nil
		})
	mcp.AddTool(server, &mcp.Tool{Name: "test_trigger_prompt_change", Description: "Adds or removes a transient prompt, so the server sends notifications/prompts/list_changed."},
		func(context.Context, *mcp.CallToolRequest, noArgs) (*mcp.CallToolResult, any, error) {
			return support.Text(triggers.togglePrompt(server)), nil, nil
		})
}

func simpleText(context.Context, *mcp.CallToolRequest, noArgs) (*mcp.CallToolResult, any, error) {
	return support.Text("Simple text from the legacy fixture."), nil, nil
}

func imageContent(context.Context, *mcp.CallToolRequest, noArgs) (*mcp.CallToolResult, any, error) {
	return &mcp.CallToolResult{Content: []mcp.Content{pngImage()}}, nil, nil
}

func audioContent(context.Context, *mcp.CallToolRequest, noArgs) (*mcp.CallToolResult, any, error) {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.AudioContent{Data: silentWAV, MIMEType: "audio/wav"}}}, nil, nil
}

func embeddedResource(context.Context, *mcp.CallToolRequest, noArgs) (*mcp.CallToolResult, any, error) {
	return &mcp.CallToolResult{Content: []mcp.Content{
		embeddedText("test://embedded-resource", "Embedded resource text from the legacy fixture."),
	}}, nil, nil
}

func multipleContent(context.Context, *mcp.CallToolRequest, noArgs) (*mcp.CallToolResult, any, error) {
	return &mcp.CallToolResult{Content: []mcp.Content{
		&mcp.TextContent{Text: "Text, image and resource follow."},
		pngImage(),
		embeddedText("test://embedded-in-multiple", "Embedded resource text next to an image."),
	}}, nil, nil
}

// failing returns a plain Go error, which go-sdk turns into a tool result
// with isError set (a tool failure, not a protocol error).
func failing(context.Context, *mcp.CallToolRequest, noArgs) (*mcp.CallToolResult, any, error) {
	return nil, nil, errors.New("test_error_handling failed on purpose")
}

// withProgress sends its notifications with the call's ctx, so they travel on
// the call's own response stream.
func withProgress(ctx context.Context, req *mcp.CallToolRequest, _ noArgs) (*mcp.CallToolResult, any, error) {
	token := req.Params.GetProgressToken()
	for _, done := range []float64{0, 50, 100} {
		if token != nil {
			err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
				ProgressToken: token,
				Progress:      done,
				Total:         100,
				Message:       fmt.Sprintf("%.0f%% done", done),
			})
			if err != nil {
				return nil, nil, err
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return support.Text(fmt.Sprintf("Progress reported for token %v.", token)), nil, nil
}

func withLogging(ctx context.Context, req *mcp.CallToolRequest, _ noArgs) (*mcp.CallToolResult, any, error) {
	for i, line := range []string{"starting", "working", "done"} {
		if i > 0 {
			time.Sleep(50 * time.Millisecond)
		}
		req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Logger: "legacyfixture", Data: "test_tool_with_logging: " + line})
	}
	return support.Text("Logged three lines."), nil, nil
}

func loggingTool(ctx context.Context, req *mcp.CallToolRequest, _ noArgs) (*mcp.CallToolResult, any, error) {
	for _, level := range []mcp.LoggingLevel{"debug", "info", "warning"} {
		req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: level, Logger: "legacyfixture", Data: "test_logging_tool: a " + string(level) + " line"})
	}
	return support.Text("Logged a debug, an info and a warning line."), nil, nil
}

// reconnection closes the call's SSE stream (with a retry hint) and answers
// later, so the client must reconnect with Last-Event-ID to get the result.
func reconnection(_ context.Context, req *mcp.CallToolRequest, _ noArgs) (*mcp.CallToolResult, any, error) {
	if req.Extra != nil && req.Extra.CloseSSEStream != nil {
		req.Extra.CloseSSEStream(mcp.CloseSSEStreamArgs{RetryAfter: 10 * time.Millisecond})
	}
	time.Sleep(200 * time.Millisecond)
	return support.Text("Answered after the stream was closed; the client reconnected."), nil, nil
}

func schemaTool(_ context.Context, _ *mcp.CallToolRequest, in json.RawMessage) (*mcp.CallToolResult, any, error) {
	return support.Text("json_schema_2020_12_tool got " + string(in)), nil, nil
}

type xMCPHeaderArgs struct {
	Region string `json:"region,omitempty"`
	Level  int    `json:"level,omitempty"`
}

func xMCPHeader(_ context.Context, _ *mcp.CallToolRequest, in xMCPHeaderArgs) (*mcp.CallToolResult, any, error) {
	return support.Text("region=" + in.Region), nil, nil
}

// transients adds and removes one tool and one prompt, each toggle making the
// server send a list_changed notification.
type transients struct {
	mu           sync.Mutex
	tool, prompt bool
}

const (
	transientTool   = "test_transient_tool"
	transientPrompt = "test_transient_prompt"
)

func (t *transients) toggleTool(server *mcp.Server) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.tool = !t.tool
	if !t.tool {
		server.RemoveTools(transientTool)
		return "removed tool " + transientTool
	}
	mcp.AddTool(server, &mcp.Tool{Name: transientTool, Description: "Appears and disappears with test_trigger_tool_change."},
		func(context.Context, *mcp.CallToolRequest, noArgs) (*mcp.CallToolResult, any, error) {
			return support.Text("transient"), nil, nil
		})
	return "added tool " + transientTool
}

func (t *transients) togglePrompt(server *mcp.Server) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.prompt = !t.prompt
	if !t.prompt {
		server.RemovePrompts(transientPrompt)
		return "removed prompt " + transientPrompt
	}
	server.AddPrompt(&mcp.Prompt{Name: transientPrompt, Description: "Appears and disappears with test_trigger_prompt_change."},
		func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "transient"}}}}, nil
		})
	return "added prompt " + transientPrompt
}

// schema202012 uses the JSON Schema 2020-12 keywords the json-schema-2020-12
// scenario expects to survive tools/list verbatim: $schema, $defs with an
// $anchor, $ref, allOf/anyOf, if/then/else and additionalProperties.
var schema202012 = json.RawMessage(`{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "$defs": {
    "address": {
      "$anchor": "addressDef",
      "type": "object",
      "properties": {"street": {"type": "string"}, "city": {"type": "string"}}
    }
  },
  "properties": {
    "name": {"type": "string"},
    "address": {"$ref": "#/$defs/address"},
    "contactMethod": {"type": "string", "enum": ["phone", "email"]},
    "phone": {"type": "string"},
    "email": {"type": "string"}
  },
  "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
  "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
  "then": {"required": ["phone"]},
  "else": {"required": ["email"]},
  "additionalProperties": false
}`)

// xMCPHeaderSchema marks "region" for mirroring into an Mcp-Param-Region
// header (SEP-2243), which the gateway validates for 2026 clients.
var xMCPHeaderSchema = json.RawMessage(`{
  "type": "object",
  "properties": {
    "region": {"type": "string", "x-mcp-header": "Region", "description": "mirrored into Mcp-Param-Region"},
    "level": {"type": "integer", "description": "not mirrored"}
  }
}`)
