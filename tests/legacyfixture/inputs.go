package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/tests/support"
)

// This file holds everything that asks the client something in-line, the
// legacy way: the handler calls Elicit, CreateMessage or ListRoots with the
// call's ctx, so go-sdk sends the request on that call's SSE response stream
// and the handler blocks until the client POSTs the JSON-RPC response.
//
// Every such request carries the key it wants its answer under in
// params._meta[InputKeyMeta]; a forward bridge uses it as the inputRequests
// key of the input_required result it makes out of the request.

// InputKeyMeta is the params._meta key of the key hint.
const InputKeyMeta = "io.github.caddy-mcp-gateway/inputKey"

func registerInputTools(server *mcp.Server) {
	// 2025-11-25 scenarios.
	mcp.AddTool(server, &mcp.Tool{Name: "test_sampling", Description: "Asks the client's model the given prompt (key llm_reply)."}, sampling)
	mcp.AddTool(server, &mcp.Tool{Name: "test_elicitation", Description: "Asks the user for a username and an email (key user_info)."}, elicitation)
	mcp.AddTool(server, &mcp.Tool{Name: "test_elicitation_sep1034_defaults", Description: "Elicits a form whose fields all have defaults (key defaults_form)."}, elicitDefaults)
	mcp.AddTool(server, &mcp.Tool{Name: "test_elicitation_sep1330_enums", Description: "Elicits a form with every enum style (key enum_form)."}, elicitEnums)

	// 2026-07-28 server-stateless diagnostics.
	mcp.AddTool(server, &mcp.Tool{Name: "test_missing_capability", Description: "Needs the sampling capability: -32021 without it, else samples (key capability_sample)."}, missingCapability)
	mcp.AddTool(server, &mcp.Tool{Name: "test_streaming_elicitation", Description: "Elicits an answer in-line if the client can elicit (key stream_answer) and returns it."}, streamingElicitation)

	// 2026-07-28 input-required scenarios, asked in-line.
	mcp.AddTool(server, &mcp.Tool{Name: "test_input_required_result_elicitation", Description: "Elicits the user's name (key user_name)."}, irElicitation)
	mcp.AddTool(server, &mcp.Tool{Name: "test_input_required_result_sampling", Description: "Asks the client's model a question (key sample_request)."}, irSampling)
	mcp.AddTool(server, &mcp.Tool{Name: "test_input_required_result_list_roots", Description: "Lists the client's roots (key roots_request)."}, irListRoots)
	mcp.AddTool(server, &mcp.Tool{Name: "test_input_required_result_request_state", Description: "Asks for one confirmation (key confirm); answers state-ok."}, irRequestState)
	mcp.AddTool(server, &mcp.Tool{Name: "test_input_required_result_multiple_inputs", Description: "Asks for a name, a greeting and the roots at once (keys user_name, greeting, client_roots)."}, irMultipleInputs)
	mcp.AddTool(server, &mcp.Tool{Name: "test_input_required_result_multi_round", Description: "Elicits a name, then a color (keys step1, step2)."}, irMultiRound)
	mcp.AddTool(server, &mcp.Tool{Name: "test_input_required_result_tampered_state", Description: "Asks for one confirmation (key confirm)."}, irTamperedState)
	mcp.AddTool(server, &mcp.Tool{Name: "test_input_required_result_capabilities", Description: "Asks only what the client declared: elicitation (key elicit_input), sampling (key sample_input)."}, irCapabilities)

	server.AddPrompt(&mcp.Prompt{Name: "test_input_required_result_prompt", Description: "Elicits a context (key user_context) and returns a message containing it."}, irPrompt)
}

// --- 2025-11-25 scenarios -------------------------------------------------

type samplingArgs struct {
	Prompt string `json:"prompt" jsonschema:"the prompt for the client's model"`
}

func sampling(ctx context.Context, req *mcp.CallToolRequest, in samplingArgs) (*mcp.CallToolResult, any, error) {
	reply, err := sample(ctx, req.Session, "llm_reply", in.Prompt)
	if err != nil {
		return nil, nil, err
	}
	return support.Text("LLM response: " + reply), nil, nil
}

type elicitationArgs struct {
	Message string `json:"message" jsonschema:"what to tell the user"`
}

func elicitation(ctx context.Context, req *mcp.CallToolRequest, in elicitationArgs) (*mcp.CallToolResult, any, error) {
	res, err := elicit(ctx, req.Session, "user_info", in.Message, objectSchema(map[string]any{
		"username": map[string]any{"type": "string", "description": "your user name"},
		"email":    map[string]any{"type": "string", "description": "your email address"},
	}, "username", "email"))
	return elicitedText(res, err)
}

func elicitDefaults(ctx context.Context, req *mcp.CallToolRequest, _ noArgs) (*mcp.CallToolResult, any, error) {
	res, err := elicit(ctx, req.Session, "defaults_form", "Check the defaults", objectSchema(map[string]any{
		"name":     map[string]any{"type": "string", "description": "name", "default": "John Doe"},
		"age":      map[string]any{"type": "integer", "description": "age", "default": 30},
		"score":    map[string]any{"type": "number", "description": "score", "default": 95.5},
		"status":   map[string]any{"type": "string", "description": "status", "enum": []string{"active", "inactive", "pending"}, "default": "active"},
		"verified": map[string]any{"type": "boolean", "description": "verified", "default": true},
	}))
	return elicitedText(res, err)
}

func elicitEnums(ctx context.Context, req *mcp.CallToolRequest, _ noArgs) (*mcp.CallToolResult, any, error) {
	titled := func(values ...string) []map[string]any {
		var out []map[string]any
		for i, v := range values {
			out = append(out, map[string]any{"const": v, "title": fmt.Sprintf("Choice %d", i+1)})
		}
		return out
	}
	res, err := elicit(ctx, req.Session, "enum_form", "Pick some options", objectSchema(map[string]any{
		"untitledSingle": map[string]any{"type": "string", "enum": []string{"option1", "option2", "option3"}},
		"titledSingle":   map[string]any{"type": "string", "oneOf": titled("value1", "value2", "value3")},
		"legacyEnum": map[string]any{"type": "string", "enum": []string{"opt1", "opt2", "opt3"},
			"enumNames": []string{"Option 1", "Option 2", "Option 3"}},
		"untitledMulti": map[string]any{"type": "array", "minItems": 1, "maxItems": 3,
			"items": map[string]any{"type": "string", "enum": []string{"option1", "option2", "option3"}}},
		"titledMulti": map[string]any{"type": "array", "minItems": 1, "maxItems": 3,
			"items": map[string]any{"type": "string", "anyOf": titled("value1", "value2", "value3")}},
	}))
	return elicitedText(res, err)
}

// --- 2026-07-28 server-stateless diagnostics ------------------------------

// missingCapability fails with -32021 (a JSON-RPC error: go-sdk passes a
// *jsonrpc.Error returned by a tool handler through as the response's error,
// while any other error becomes an isError tool result) when the session's
// client did not declare sampling.
func missingCapability(ctx context.Context, req *mcp.CallToolRequest, _ noArgs) (*mcp.CallToolResult, any, error) {
	if clientCaps(req.Session).Sampling == nil {
		return nil, nil, &jsonrpc.Error{
			Code:    mcp.CodeMissingRequiredClientCapabilities,
			Message: "test_missing_capability needs the sampling capability",
			Data:    json.RawMessage(`{"requiredCapabilities":{"sampling":{}}}`),
		}
	}
	reply, err := sample(ctx, req.Session, "capability_sample", "Say anything: the sampling capability works.")
	if err != nil {
		return nil, nil, err
	}
	return support.Text("Sampled: " + reply), nil, nil
}

func streamingElicitation(ctx context.Context, req *mcp.CallToolRequest, _ noArgs) (*mcp.CallToolResult, any, error) {
	if clientCaps(req.Session).Elicitation == nil {
		return support.Text("The client cannot elicit; nothing was asked."), nil, nil
	}
	res, err := elicit(ctx, req.Session, "stream_answer", "Type anything", stringForm("answer"))
	return elicitedText(res, err)
}

// --- 2026-07-28 input-required scenarios ------------------------------------

func irElicitation(ctx context.Context, req *mcp.CallToolRequest, _ noArgs) (*mcp.CallToolResult, any, error) {
	res, err := elicit(ctx, req.Session, "user_name", "What is your name?", stringForm("name"))
	if err != nil {
		return nil, nil, err
	}
	if !accepted(res) {
		return support.Text("No name given (" + string(res.Action) + ")."), nil, nil
	}
	return support.Text(fmt.Sprintf("Hello, %v!", res.Content["name"])), nil, nil
}

func irSampling(ctx context.Context, req *mcp.CallToolRequest, _ noArgs) (*mcp.CallToolResult, any, error) {
	reply, err := sample(ctx, req.Session, "sample_request", "What is the capital of France?")
	if err != nil {
		return nil, nil, err
	}
	return support.Text("Sampling response: " + reply), nil, nil
}

func irListRoots(ctx context.Context, req *mcp.CallToolRequest, _ noArgs) (*mcp.CallToolResult, any, error) {
	roots, err := listRoots(ctx, req.Session, "roots_request")
	if err != nil {
		return nil, nil, err
	}
	return support.Text(describeRoots(roots)), nil, nil
}

func irRequestState(ctx context.Context, req *mcp.CallToolRequest, _ noArgs) (*mcp.CallToolResult, any, error) {
	return confirm(ctx, req, "state-ok: the confirmation came back to the parked call")
}

func irTamperedState(ctx context.Context, req *mcp.CallToolRequest, _ noArgs) (*mcp.CallToolResult, any, error) {
	return confirm(ctx, req, "state-ok: confirmed")
}

// confirm elicits {ok: boolean} under the key "confirm".
func confirm(ctx context.Context, req *mcp.CallToolRequest, done string) (*mcp.CallToolResult, any, error) {
	res, err := elicit(ctx, req.Session, "confirm", "Please confirm", objectSchema(map[string]any{
		"ok": map[string]any{"type": "boolean", "description": "confirm"},
	}, "ok"))
	if err != nil {
		return nil, nil, err
	}
	if !accepted(res) {
		return support.Text("Not confirmed (" + string(res.Action) + ")."), nil, nil
	}
	return support.Text(fmt.Sprintf("%s (ok=%v)", done, res.Content["ok"])), nil, nil
}

// irMultipleInputs sends its three requests concurrently, so they are all on
// the stream before the first answer comes back.
func irMultipleInputs(ctx context.Context, req *mcp.CallToolRequest, _ noArgs) (*mcp.CallToolResult, any, error) {
	var (
		wg       sync.WaitGroup
		name     *mcp.ElicitResult
		greeting string
		roots    []*mcp.Root
		errs     [3]error
	)
	wg.Go(func() {
		name, errs[0] = elicit(ctx, req.Session, "user_name", "What is your name?", stringForm("name"))
	})
	wg.Go(func() { greeting, errs[1] = sample(ctx, req.Session, "greeting", "Write a short greeting.") })
	wg.Go(func() { roots, errs[2] = listRoots(ctx, req.Session, "client_roots") })
	wg.Wait()
	if err := errors.Join(errs[:]...); err != nil {
		return nil, nil, err
	}
	who := "stranger"
	if accepted(name) {
		who = fmt.Sprint(name.Content["name"])
	}
	return support.Text(fmt.Sprintf("%s %s; %s", greeting, who, describeRoots(roots))), nil, nil
}

func irMultiRound(ctx context.Context, req *mcp.CallToolRequest, _ noArgs) (*mcp.CallToolResult, any, error) {
	first, err := elicit(ctx, req.Session, "step1", "Step 1: what is your name?", stringForm("name"))
	if err != nil {
		return nil, nil, err
	}
	if !accepted(first) {
		return support.Text("Stopped at step 1 (" + string(first.Action) + ")."), nil, nil
	}
	second, err := elicit(ctx, req.Session, "step2", fmt.Sprintf("Step 2: what is your favorite color, %v?", first.Content["name"]), stringForm("color"))
	if err != nil {
		return nil, nil, err
	}
	if !accepted(second) {
		return support.Text("Stopped at step 2 (" + string(second.Action) + ")."), nil, nil
	}
	return support.Text(fmt.Sprintf("Multi-round complete: %v likes %v.", first.Content["name"], second.Content["color"])), nil, nil
}

// irCapabilities asks only for what the session's client declared, all at
// once.
func irCapabilities(ctx context.Context, req *mcp.CallToolRequest, _ noArgs) (*mcp.CallToolResult, any, error) {
	caps := clientCaps(req.Session)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		got   []string
		errs  []error
		asked bool
	)
	record := func(s string, err error) {
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			errs = append(errs, err)
			return
		}
		got = append(got, s)
	}
	if caps.Elicitation != nil {
		asked = true
		wg.Go(func() {
			res, err := elicit(ctx, req.Session, "elicit_input", "What is your name?", stringForm("name"))
			if err != nil {
				record("", err)
				return
			}
			record("elicitation: "+string(res.Action), nil)
		})
	}
	if caps.Sampling != nil {
		asked = true
		wg.Go(func() {
			reply, err := sample(ctx, req.Session, "sample_input", "Write a short greeting.")
			record("sampling: "+reply, err)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, nil, err
	}
	if !asked {
		return support.Text("The client declared neither elicitation nor sampling; nothing was asked."), nil, nil
	}
	return support.Text("Asked only what the client declared: " + strings.Join(got, "; ")), nil, nil
}

func irPrompt(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
	res, err := elicit(ctx, req.Session, "user_context", "What context should the prompt use?", stringForm("context"))
	if err != nil {
		return nil, err
	}
	if !accepted(res) {
		return promptResult("No context given", userText("No context was given ("+string(res.Action)+").")), nil
	}
	return promptResult("A prompt with elicited context", userText(fmt.Sprintf("Context: %v", res.Content["context"]))), nil
}

// --- in-line requests -------------------------------------------------------

func keyHint(key string) mcp.Meta { return mcp.Meta{InputKeyMeta: key} }

// elicit sends elicitation/create with the call's ctx.
func elicit(ctx context.Context, ss *mcp.ServerSession, key, message string, schema map[string]any) (*mcp.ElicitResult, error) {
	res, err := ss.Elicit(ctx, &mcp.ElicitParams{Meta: keyHint(key), Message: message, RequestedSchema: schema})
	if err != nil {
		return nil, fmt.Errorf("elicitation %s: %w", key, err)
	}
	return res, nil
}

// sample sends sampling/createMessage with the call's ctx and returns the
// reply's text.
func sample(ctx context.Context, ss *mcp.ServerSession, key, prompt string) (string, error) {
	res, err := ss.CreateMessage(ctx, &mcp.CreateMessageParams{
		Meta:      keyHint(key),
		Messages:  []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: prompt}}},
		MaxTokens: 100,
	})
	if err != nil {
		return "", fmt.Errorf("sampling %s: %w", key, err)
	}
	if t, ok := res.Content.(*mcp.TextContent); ok {
		return t.Text, nil
	}
	return fmt.Sprintf("(a %T from %s)", res.Content, res.Model), nil
}

// listRoots sends roots/list with the call's ctx.
func listRoots(ctx context.Context, ss *mcp.ServerSession, key string) ([]*mcp.Root, error) {
	res, err := ss.ListRoots(ctx, &mcp.ListRootsParams{Meta: keyHint(key)})
	if err != nil {
		return nil, fmt.Errorf("roots %s: %w", key, err)
	}
	return res.Roots, nil
}

// clientCaps are the capabilities the session's client declared in
// initialize (never nil).
func clientCaps(ss *mcp.ServerSession) *mcp.ClientCapabilities {
	if p := ss.InitializeParams(); p != nil && p.Capabilities != nil {
		return p.Capabilities
	}
	return &mcp.ClientCapabilities{}
}

func objectSchema(props map[string]any, required ...string) map[string]any {
	s := map[string]any{"type": "object", "properties": props}
	if len(required) > 0 {
		s["required"] = required
	}
	return s
}

// stringForm is a form of one required string field.
func stringForm(field string) map[string]any {
	return objectSchema(map[string]any{field: map[string]any{"type": "string"}}, field)
}

func accepted(res *mcp.ElicitResult) bool { return res != nil && res.Action == "accept" }

func elicitedText(res *mcp.ElicitResult, err error) (*mcp.CallToolResult, any, error) {
	if err != nil {
		return nil, nil, err
	}
	content, _ := json.Marshal(res.Content)
	return support.Text(fmt.Sprintf("Elicitation result: action=%s, content=%s", res.Action, content)), nil, nil
}

func describeRoots(roots []*mcp.Root) string {
	uris := make([]string, 0, len(roots))
	for _, r := range roots {
		uris = append(uris, r.URI)
	}
	return fmt.Sprintf("%d root(s): %s", len(roots), strings.Join(uris, ", "))
}
