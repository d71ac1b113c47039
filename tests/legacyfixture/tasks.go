package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/tests/support"
)

// This file holds the tools of the conformance suite's tasks-* scenarios
// (the Tasks extension, io.modelcontextprotocol/tasks), written as PLAIN
// legacy tools: they know nothing of tasks, run as long as they run and ask
// their questions in-line. A fixture, because no real server exposes these
// tools; the gateway in front, with a per-tool `task` policy, turns their
// calls into tasks (the policy that passes is in tests/tasks_test.go):
//
//	greet                forbidden
//	slow_compute         optional 200ms
//	failing_job          required
//	protocol_error_job   required
//	confirm_delete       optional 0
//	multi_input          optional 0
//	test_tool_with_task  required 300ms

func registerTaskTools(server *mcp.Server) {
	mcp.AddTool(server, &mcp.Tool{Name: "greet", Description: "Answers Hello, {name}! at once."}, greet)
	mcp.AddTool(server, &mcp.Tool{Name: "slow_compute", Description: "Works for the given seconds (stops when cancelled), then answers."}, slowCompute)
	mcp.AddTool(server, &mcp.Tool{Name: "failing_job", Description: "After about a second, an isError result."}, failingJob)
	mcp.AddTool(server, &mcp.Tool{Name: "protocol_error_job", Description: "After about half a second, a JSON-RPC error (-32603)."}, protocolErrorJob)
	mcp.AddTool(server, &mcp.Tool{Name: "confirm_delete", Description: "Asks Delete {filename}? (key confirm_delete), then answers."}, confirmDelete)
	mcp.AddTool(server, &mcp.Tool{Name: "multi_input", Description: "Asks two names at once (keys first_name, second_name), then answers Got X and Y."}, multiInput)
	mcp.AddTool(server, &mcp.Tool{Name: "test_tool_with_task", Description: "Asks What is your name? (key user_name) at once, works 1.5s, answers Hello, {name}!"}, toolWithTask)
}

type greetArgs struct {
	Name string `json:"name"`
}

func greet(_ context.Context, _ *mcp.CallToolRequest, in greetArgs) (*mcp.CallToolResult, any, error) {
	return support.Text("Hello, " + in.Name + "!"), nil, nil
}

type slowArgs struct {
	Seconds float64 `json:"seconds,omitempty"`
	Label   string  `json:"label,omitempty"`
}

// slowCompute sleeps; go-sdk cancels ctx on notifications/cancelled.
func slowCompute(ctx context.Context, _ *mcp.CallToolRequest, in slowArgs) (*mcp.CallToolResult, any, error) {
	select {
	case <-time.After(time.Duration(in.Seconds * float64(time.Second))):
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
	return support.Text(fmt.Sprintf("computed %s in %gs", in.Label, in.Seconds)), nil, nil
}

func failingJob(ctx context.Context, _ *mcp.CallToolRequest, _ noArgs) (*mcp.CallToolResult, any, error) {
	if err := pause(ctx, time.Second); err != nil {
		return nil, nil, err
	}
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "failing_job failed on purpose"}}}, nil, nil
}

// protocolErrorJob ends with a JSON-RPC error: go-sdk passes a
// *jsonrpc.Error returned by a handler through as the response's error.
func protocolErrorJob(ctx context.Context, _ *mcp.CallToolRequest, _ noArgs) (*mcp.CallToolResult, any, error) {
	if err := pause(ctx, 500*time.Millisecond); err != nil {
		return nil, nil, err
	}
	return nil, nil, &jsonrpc.Error{Code: -32603, Message: "protocol_error_job failed on purpose"}
}

type confirmArgs struct {
	Filename string `json:"filename"`
}

func confirmDelete(ctx context.Context, req *mcp.CallToolRequest, in confirmArgs) (*mcp.CallToolResult, any, error) {
	res, err := elicit(ctx, req.Session, "confirm_delete", "Delete "+in.Filename+"?",
		map[string]any{"type": "object", "properties": map[string]any{"confirm": map[string]any{"type": "boolean"}}})
	if err != nil {
		return nil, nil, err
	}
	if accepted(res) && res.Content["confirm"] == true {
		return support.Text("Deleted " + in.Filename), nil, nil
	}
	return support.Text("Kept " + in.Filename), nil, nil
}

func multiInput(ctx context.Context, req *mcp.CallToolRequest, _ noArgs) (*mcp.CallToolResult, any, error) {
	var wg sync.WaitGroup
	names := make([]string, 2)
	errs := make([]error, 2)
	for i, key := range []string{"first_name", "second_name"} {
		wg.Go(func() {
			res, err := elicit(ctx, req.Session, key, fmt.Sprintf("Name %d?", i+1), stringForm("name"))
			if err == nil && accepted(res) {
				names[i], _ = res.Content["name"].(string)
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, nil, err
		}
	}
	return support.Text("Got " + names[0] + " and " + names[1]), nil, nil
}

func toolWithTask(ctx context.Context, req *mcp.CallToolRequest, _ noArgs) (*mcp.CallToolResult, any, error) {
	res, err := elicit(ctx, req.Session, "user_name", "What is your name?", stringForm("name"))
	if err != nil {
		return nil, nil, err
	}
	name, _ := res.Content["name"].(string)
	if err := pause(ctx, 1500*time.Millisecond); err != nil {
		return nil, nil, err
	}
	return support.Text("Hello, " + name + "!"), nil, nil
}

// pause waits d, or until the call is cancelled.
func pause(ctx context.Context, d time.Duration) error {
	select {
	case <-time.After(d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
