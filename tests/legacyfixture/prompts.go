package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// This file holds the prompts that never ask the client anything, and the
// argument completion. The prompt that elicits in-line is in inputs.go.

func registerPrompts(server *mcp.Server) {
	server.AddPrompt(&mcp.Prompt{Name: "test_simple_prompt", Title: "Simple prompt", Description: "One user message, no arguments."},
		func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return promptResult("A simple prompt", userText("A simple prompt from the legacy fixture.")), nil
		})
	server.AddPrompt(&mcp.Prompt{
		Name: "test_prompt_with_arguments", Title: "Prompt with arguments", Description: "Echoes arg1 and arg2.",
		Arguments: []*mcp.PromptArgument{
			{Name: "arg1", Description: "first argument", Required: true},
			{Name: "arg2", Description: "second argument", Required: true},
		},
	}, func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		a := req.Params.Arguments
		return promptResult("A prompt with arguments",
			userText(fmt.Sprintf("Prompt with arguments: arg1=%q, arg2=%q", a["arg1"], a["arg2"]))), nil
	})
	server.AddPrompt(&mcp.Prompt{
		Name: "test_prompt_with_embedded_resource", Title: "Prompt with an embedded resource", Description: "Embeds a text resource at resourceUri.",
		Arguments: []*mcp.PromptArgument{{Name: "resourceUri", Description: "URI of the embedded resource", Required: true}},
	}, func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		uri := req.Params.Arguments["resourceUri"]
		return promptResult("A prompt with an embedded resource",
			&mcp.PromptMessage{Role: "user", Content: embeddedText(uri, "Embedded resource text for the prompt.")},
			userText("Please read the resource above.")), nil
	})
	server.AddPrompt(&mcp.Prompt{Name: "test_prompt_with_image", Title: "Prompt with an image", Description: "Carries a PNG image."},
		func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return promptResult("A prompt with an image",
				&mcp.PromptMessage{Role: "user", Content: pngImage()},
				userText("Please describe the image above.")), nil
		})
}

// completionValues are offered for test_prompt_with_arguments' arg1.
var completionValues = []string{"paris", "park", "party", "test", "test-value", "testing"}

// complete answers completion/complete: values for arg1 of
// test_prompt_with_arguments that start with what was typed, nothing for
// anything else.
func complete(_ context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
	values := []string{}
	p := req.Params
	if p.Ref != nil && p.Ref.Type == "ref/prompt" && p.Ref.Name == "test_prompt_with_arguments" && p.Argument.Name == "arg1" {
		for _, v := range completionValues {
			if strings.HasPrefix(v, p.Argument.Value) {
				values = append(values, v)
			}
		}
	}
	return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: values, Total: len(values)}}, nil
}

func promptResult(description string, msgs ...*mcp.PromptMessage) *mcp.GetPromptResult {
	return &mcp.GetPromptResult{Description: description, Messages: msgs}
}

func userText(s string) *mcp.PromptMessage {
	return &mcp.PromptMessage{Role: "user", Content: &mcp.TextContent{Text: s}}
}
