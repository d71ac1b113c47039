package tests

// Real clients over a federated block (federatedBlock: the go-sdk
// everything server, modern, as go; the TypeScript server-everything,
// 2025-11-25, as ts; the demo server, legacy, with no prefix), through one
// Caddy process. Each client lists the merged catalog; calls a tool of
// every server, with elicitation rounds on the legacy servers (demo's
// book_table and plan_trip, ts's trigger-elicitation-request), input_required
// rounds on the modern one (go's test_input_required_result_*) and sampling
// on both eras; reads a resource and gets a prompt (one with an
// input_required round) of each server that has some (the demo server has
// neither); completes a prompt and a template argument on ts and on go (the
// go server's completions are always empty: they show the routing);
// subscribes to go's test://watched-resource, which that server updates
// every 3 s, until an update arrives; sees go's tools and prompts lists
// change; and is refused what no server has, with its revision's codes.
//
// Clients: the TypeScript SDK 1.x (legacy) and 2.x (version negotiation
// auto, so modern) and @ai-sdk/mcp (an independent modern client) through
// tests/node/fed-tour.mjs, and the go-sdk client in both eras. @ai-sdk/mcp
// answers elicitation only and has neither subscriptions nor list-change
// notifications: its plan leaves out sampling, subscriptions and changes
// (elicitingOnly), which the others cover. The Inspector CLI, which answers
// neither elicitation nor sampling, has a test of its own
// (federation_inspector_test.go).
//
// The ts server's resource updates are not used: they start only when
// toggle-subscriber-updates is called on the very session that subscribed,
// and through the gateway a subscription has an upstream session of its
// own (the forward bridge's listen), so no client can do that.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/tidwall/gjson"
)

// fedAnswers are the values every client of this file elicits with: the
// node scripts' (tests/node/common.mjs, valueFor), which goTour copies.
var fedAnswers = map[string]any{
	"name": "Test User", "color": "test color", "context": "test context", "destination": "Lisbon", "partySize": 2,
	"date":      time.Now().UTC().AddDate(0, 0, 30).Format(time.DateOnly),
	"startDate": time.Now().UTC().AddDate(0, 0, 30).Format(time.DateOnly),
	"endDate":   time.Now().UTC().AddDate(0, 0, 33).Format(time.DateOnly),
}

// fedSampled is what every client of this file answers sampling with
// (common.mjs's samplingResult for fed-tour, model test-model).
const fedSampled = "sampled by fed-tour"

// fedTourPlan is what every client does after listing the catalog.
var fedTourPlan = map[string]any{
	"calls": []map[string]any{
		{"name": "go__test_input_required_result_elicitation"},
		{"name": "go__test_input_required_result_multi_round"},
		{"name": "go__test_input_required_result_sampling"},
		{"name": "ts__get-sum", "arguments": map[string]any{"a": 2, "b": 40}},
		{"name": "ts__trigger-elicitation-request"},
		{"name": "book_table", "arguments": map[string]any{"restaurant": "Chez Federation"}},
		{"name": "plan_trip"},
		{"name": "summarize", "arguments": map[string]any{"text": "a long text"}},
	},
	"reads": []string{"test://static-text", "demo://resource/dynamic/text/7"},
	"prompts": []map[string]any{
		{"name": "go__test_prompt_with_arguments", "arguments": map[string]any{"arg1": "alpha", "arg2": "beta"}},
		{"name": "ts__args-prompt", "arguments": map[string]any{"city": "Lisbon"}},
		{"name": "go__test_input_required_result_prompt", "arguments": map[string]any{}},
	},
	"completes": []map[string]any{{
		"ref":      map[string]any{"type": "ref/prompt", "name": "ts__completable-prompt"},
		"argument": map[string]any{"name": "name", "value": "A"},
		"context":  map[string]any{"arguments": map[string]any{"department": "Engineering"}},
	}, {
		"ref":      map[string]any{"type": "ref/resource", "uri": "demo://resource/dynamic/text/{resourceId}"},
		"argument": map[string]any{"name": "resourceId", "value": "3"},
	}, {
		"ref":      map[string]any{"type": "ref/prompt", "name": "go__test_prompt_with_arguments"},
		"argument": map[string]any{"name": "arg1", "value": "a"},
	}, {
		"ref":      map[string]any{"type": "ref/resource", "uri": "test://template/{id}/data"},
		"argument": map[string]any{"name": "id", "value": "1"},
	}},
	"subscriptions": []string{"test://watched-resource"},
	"changes": []map[string]any{
		{"call": "go__test_trigger_tool_change", "notification": "notifications/tools/list_changed"},
		{"call": "go__test_trigger_prompt_change", "notification": "notifications/prompts/list_changed"},
	},
	"refused": []map[string]any{
		{"method": "resources/read", "params": map[string]any{"uri": "nowhere://x"}},
		{"method": "tools/call", "params": map[string]any{"name": "nobody__x", "arguments": map[string]any{}}},
		{"method": "prompts/get", "params": map[string]any{"name": "nobody__p"}},
	},
}

// tourOutcome is what a client saw; fed-tour.mjs prints it, goTour fills it.
type tourOutcome struct {
	ProtocolVersion string   `json:"protocolVersion"`
	Tools           []string `json:"tools"`
	Resources       []string `json:"resources"`
	Templates       []string `json:"templates"`
	PromptNames     []string `json:"promptNames"`
	Calls           []struct {
		Name   string     `json:"name"`
		Result toolResult `json:"result"`
	} `json:"calls"`
	Reads []struct {
		URI    string `json:"uri"`
		Result struct {
			Contents []struct {
				URI  string `json:"uri"`
				Text string `json:"text"`
			} `json:"contents"`
		} `json:"result"`
	} `json:"reads"`
	Prompts []struct {
		Name   string `json:"name"`
		Result struct {
			Messages []struct {
				Content struct {
					Text string `json:"text"`
				} `json:"content"`
			} `json:"messages"`
		} `json:"result"`
	} `json:"prompts"`
	Completions []struct {
		Values []string `json:"values"`
	} `json:"completions"`
	Updated []string `json:"updated"`
	Changed []string `json:"changed"`
	Refused []struct {
		Method string          `json:"method"`
		Code   int             `json:"code"`
		Data   json.RawMessage `json:"data"`
	} `json:"refused"`
	Elicitations int `json:"elicitations"`
	Samplings    int `json:"samplings"`
}

// TestFederationClients runs every client against one federated block.
func TestFederationClients(t *testing.T) {
	t.Parallel()
	nodeBin(t)
	g := startGateway(t, federatedBlock(t))
	node := func(flavour, version string, plan map[string]any) func(*testing.T) {
		return func(t *testing.T) {
			t.Parallel()
			b, err := json.Marshal(plan)
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			out, err := runNodeScript(t, "fed-tour.mjs", flavour, g.URL, string(b))
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("fed-tour.mjs %s (%v): %s", flavour, time.Since(start).Round(time.Millisecond), tail(string(out), 3000))
			var got tourOutcome
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatalf("decoding %q: %v", out, err)
			}
			checkTour(t, got, version, plan)
		}
	}
	t.Run("ts-sdk-1-legacy", node("legacy", "2025-11-25", fedTourPlan))
	t.Run("ts-sdk-2-auto", node("modern", modernVersion, fedTourPlan))
	t.Run("ai-sdk", node("aisdk", modernVersion, elicitingOnly(fedTourPlan)))
	t.Run("go-sdk-legacy", func(t *testing.T) {
		t.Parallel()
		checkTour(t, goTour(t, g.URL, "2025-11-25"), "2025-11-25", fedTourPlan)
	})
	t.Run("go-sdk-modern", func(t *testing.T) {
		t.Parallel()
		checkTour(t, goTour(t, g.URL, ""), modernVersion, fedTourPlan)
	})
}

// fedSamplingTools are the tools of fedTourPlan that ask for sampling.
var fedSamplingTools = []string{"go__test_input_required_result_sampling", "summarize"}

// elicitingOnly is plan for a client that answers elicitation only and
// has neither subscriptions nor list changes: without the sampling tools,
// subscriptions and changes.
func elicitingOnly(plan map[string]any) map[string]any {
	out := maps.Clone(plan)
	out["calls"] = slices.DeleteFunc(slices.Clone(plan["calls"].([]map[string]any)), func(c map[string]any) bool {
		return slices.Contains(fedSamplingTools, c["name"].(string))
	})
	delete(out, "subscriptions")
	delete(out, "changes")
	return out
}

// checkTour asserts what a client saw of the block: the negotiated
// version, every server's entries (prefixed) in the merged lists, and the
// content of every answer, elicited values included.
func checkTour(t *testing.T, got tourOutcome, version string, plan map[string]any) {
	t.Helper()
	if got.ProtocolVersion != version {
		t.Errorf("negotiated %q, want %q", got.ProtocolVersion, version)
	}
	for _, want := range []string{"go__test_input_required_result_elicitation", "ts__get-sum", "book_table", "greet"} {
		if !slices.Contains(got.Tools, want) {
			t.Errorf("tools/list has no %s: %v", want, got.Tools)
		}
	}
	for _, name := range got.Tools {
		if strings.HasPrefix(name, "test_") || name == "echo" {
			t.Errorf("tools/list shows %s without its server's prefix", name)
		}
	}
	if !slices.Contains(got.Resources, "test://static-text") || !slices.ContainsFunc(got.Resources, func(u string) bool {
		return strings.HasPrefix(u, "demo://resource/static/document/")
	}) {
		t.Errorf("resources/list lacks go's or ts's resources: %v", got.Resources)
	}
	if !slices.Contains(got.Templates, "test://template/{id}/data") || !slices.Contains(got.Templates, "demo://resource/dynamic/text/{resourceId}") {
		t.Errorf("resources/templates/list lacks go's or ts's templates: %v", got.Templates)
	}
	for _, want := range []string{"go__test_prompt_with_arguments", "ts__completable-prompt"} {
		if !slices.Contains(got.PromptNames, want) {
			t.Errorf("prompts/list has no %s: %v", want, got.PromptNames)
		}
	}

	wantCalls := map[string]string{
		"go__test_input_required_result_elicitation": "Hello, Test User!",
		"go__test_input_required_result_multi_round": "Multi-round complete: Test User likes test color",
		"ts__get-sum":                     "The sum of 2 and 40 is 42.",
		"ts__trigger-elicitation-request": "- Name: Test User",
		"book_table":                      fmt.Sprintf("Booked Chez Federation for 2 on %s.", fedAnswers["date"]),
		"plan_trip":                       fmt.Sprintf("Trip to Lisbon from %s to %s.", fedAnswers["startDate"], fedAnswers["endDate"]),
		"go__test_input_required_result_sampling": "Sampling response: " + fedSampled,
		"summarize": "Summary (test-model): " + fedSampled,
	}
	samplings := 0
	for name := range wantCalls {
		if !slices.ContainsFunc(plan["calls"].([]map[string]any), func(c map[string]any) bool { return c["name"] == name }) {
			delete(wantCalls, name)
		} else if slices.Contains(fedSamplingTools, name) {
			samplings++
		}
	}
	for _, c := range got.Calls {
		if c.Result.IsError || !strings.Contains(c.Result.text(), wantCalls[c.Name]) {
			t.Errorf("%s answered %+v, want text with %q", c.Name, c.Result, wantCalls[c.Name])
		}
		delete(wantCalls, c.Name)
	}
	if len(wantCalls) > 0 {
		t.Errorf("calls not made: %v", wantCalls)
	}
	// An elicitation per round: go's two tools 1 and 2, its prompt 1,
	// ts's tool 1, demo's two tools 1 and 2; a sampling per sampling tool.
	if got.Elicitations != 8 || got.Samplings != samplings {
		t.Errorf("%d elicitations and %d samplings answered, want 8 and %d", got.Elicitations, got.Samplings, samplings)
	}

	wantReads := map[string]string{
		"test://static-text":             "This is the content of the static text resource.",
		"demo://resource/dynamic/text/7": "7",
	}
	for _, r := range got.Reads {
		if len(r.Result.Contents) != 1 || r.Result.Contents[0].URI != r.URI || !strings.Contains(r.Result.Contents[0].Text, wantReads[r.URI]) {
			t.Errorf("resources/read %s: %+v", r.URI, r.Result)
		}
		delete(wantReads, r.URI)
	}
	if len(wantReads) > 0 {
		t.Errorf("reads not made: %v", wantReads)
	}

	wantPrompts := map[string]string{
		"go__test_prompt_with_arguments":        "alpha",
		"ts__args-prompt":                       "What's weather in Lisbon?",
		"go__test_input_required_result_prompt": "Context: test context",
	}
	for _, p := range got.Prompts {
		if len(p.Result.Messages) == 0 || !strings.Contains(p.Result.Messages[0].Content.Text, wantPrompts[p.Name]) {
			t.Errorf("prompts/get %s: %+v", p.Name, p.Result)
		}
		delete(wantPrompts, p.Name)
	}
	if len(wantPrompts) > 0 {
		t.Errorf("prompts not got: %v", wantPrompts)
	}

	// go's completions are always empty: that they came at all says the
	// prefixed prompt and the template reached it.
	if len(got.Completions) != 4 || !slices.Equal(got.Completions[0].Values, []string{"Alice"}) || !slices.Equal(got.Completions[1].Values, []string{"3"}) ||
		len(got.Completions[2].Values)+len(got.Completions[3].Values) != 0 {
		t.Errorf("completions %+v, want [Alice] (prompt ts__completable-prompt), [3] (ts's resource template), [] and [] (go's)", got.Completions)
	}
	if _, ok := plan["subscriptions"]; ok && !slices.Contains(got.Updated, "test://watched-resource") {
		t.Errorf("no notifications/resources/updated for test://watched-resource (got %v)", got.Updated)
	}
	// In any order: the other clients' changes reach every listener too.
	if _, ok := plan["changes"]; ok && (!slices.Contains(got.Changed, "notifications/tools/list_changed") || !slices.Contains(got.Changed, "notifications/prompts/list_changed")) {
		t.Errorf("list changes seen: %v, want go's tools and prompts", got.Changed)
	}

	// What no server has: -32602, and for a resource its URI in data,
	// with -32002 (their revision's code) for legacy clients.
	notFound := -32602
	if version != modernVersion {
		notFound = -32002
	}
	want := []int{notFound, -32602, -32602}
	if len(got.Refused) != len(want) {
		t.Fatalf("refused: %+v, want %d errors", got.Refused, len(want))
	}
	for i, r := range got.Refused {
		if r.Code != want[i] {
			t.Errorf("%s: code %d, want %d", r.Method, r.Code, want[i])
		}
	}
	if uri := gjson.GetBytes(got.Refused[0].Data, "uri"); uri.Str != "nowhere://x" {
		t.Errorf("resources/read of nowhere://x: data %s, want its uri", got.Refused[0].Data)
	}
}

// goTour does fedTourPlan with the go-sdk client; version "" negotiates
// (the modern era), otherwise the client asks for version.
func goTour(t *testing.T, url, version string) tourOutcome {
	t.Helper()
	var elicitations, samplings atomic.Int32
	updated, changed := make(chan string, 16), make(chan string, 16)
	opts := &mcp.ClientOptions{
		// No roots: the ts server asks every session that declares them
		// for roots/list once, without params, and when that lands during
		// a call the gateway relays it as an input request as sent, which
		// the go-sdk client (1.8) cannot decode ("unexpected end of JSON
		// input", the call fails).
		Capabilities: &mcp.ClientCapabilities{},
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			elicitations.Add(1)
			var schema struct {
				Required []string `json:"required"`
			}
			if b, err := json.Marshal(req.Params.RequestedSchema); err == nil {
				_ = json.Unmarshal(b, &schema)
			}
			content := map[string]any{}
			for _, f := range schema.Required {
				content[f] = fedAnswers[f]
			}
			return &mcp.ElicitResult{Action: "accept", Content: content}, nil
		},
		CreateMessageHandler: func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			samplings.Add(1)
			return &mcp.CreateMessageResult{Role: "assistant", Model: "test-model", Content: &mcp.TextContent{Text: fedSampled}}, nil
		},
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case changed <- "notifications/tools/list_changed":
			default:
			}
		},
		PromptListChangedHandler: func(context.Context, *mcp.PromptListChangedRequest) {
			select {
			case changed <- "notifications/prompts/list_changed":
			default:
			}
		},
		ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
			select {
			case updated <- req.Params.URI:
			default:
			}
		},
	}
	cs := connectGo(t, url, version, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	got := tourOutcome{ProtocolVersion: cs.InitializeResult().ProtocolVersion}
	got.Tools = goNames(t, "tools/list", cs.Tools(ctx, nil), func(x *mcp.Tool) string { return x.Name })
	got.Resources = goNames(t, "resources/list", cs.Resources(ctx, nil), func(x *mcp.Resource) string { return x.URI })
	got.Templates = goNames(t, "resources/templates/list", cs.ResourceTemplates(ctx, nil), func(x *mcp.ResourceTemplate) string { return x.URITemplate })
	got.PromptNames = goNames(t, "prompts/list", cs.Prompts(ctx, nil), func(x *mcp.Prompt) string { return x.Name })

	// The answers go through JSON, so that they land where the node
	// script's do.
	var calls, reads, prompts, completions []any
	for _, c := range fedTourPlan["calls"].([]map[string]any) {
		name := c["name"].(string)
		r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: c["arguments"]})
		if err != nil {
			t.Fatalf("tools/call %s: %v", name, err)
		}
		calls = append(calls, map[string]any{"name": name, "result": r})
	}
	for _, uri := range fedTourPlan["reads"].([]string) {
		r, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
		if err != nil {
			t.Fatalf("resources/read %s: %v", uri, err)
		}
		reads = append(reads, map[string]any{"uri": uri, "result": r})
	}
	for _, p := range fedTourPlan["prompts"].([]map[string]any) {
		name := p["name"].(string)
		args := map[string]string{}
		for k, v := range p["arguments"].(map[string]any) {
			args[k] = v.(string)
		}
		r, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatalf("prompts/get %s: %v", name, err)
		}
		prompts = append(prompts, map[string]any{"name": name, "result": r})
	}
	for _, c := range fedTourPlan["completes"].([]map[string]any) {
		var params mcp.CompleteParams
		if b, err := json.Marshal(c); err != nil || json.Unmarshal(b, &params) != nil {
			t.Fatalf("completion/complete %v: not CompleteParams", c)
		}
		r, err := cs.Complete(ctx, &params)
		if err != nil {
			t.Fatalf("completion/complete %v: %v", c, err)
		}
		completions = append(completions, r.Completion)
	}
	b, err := json.Marshal(map[string]any{"calls": calls, "reads": reads, "prompts": prompts, "completions": completions})
	if err == nil {
		err = json.Unmarshal(b, &got)
	}
	if err != nil {
		t.Fatal(err)
	}

	for _, uri := range fedTourPlan["subscriptions"].([]string) {
		// In the modern era Subscribe opens a subscriptions/listen stream
		// and returns; the stream lasts until Unsubscribe or Close.
		if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
			t.Fatalf("subscribing to %s: %v", uri, err)
		}
		gather(t, updated, &got.Updated, uri)
	}
	// List changes: in the modern era the go-sdk listens for them on its
	// own once a handler is set.
	for _, c := range fedTourPlan["changes"].([]map[string]any) {
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: c["call"].(string), Arguments: map[string]any{}}); err != nil {
			t.Fatalf("tools/call %s: %v", c["call"], err)
		}
		gather(t, changed, &got.Changed, c["notification"].(string))
	}
	var refused []any
	for _, r := range fedTourPlan["refused"].([]map[string]any) {
		var err error
		switch p := r["params"].(map[string]any); r["method"] {
		case "resources/read":
			_, err = cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: p["uri"].(string)})
		case "tools/call":
			_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: p["name"].(string), Arguments: p["arguments"]})
		case "prompts/get":
			_, err = cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: p["name"].(string)})
		}
		var werr *jsonrpc.Error
		if !errors.As(err, &werr) {
			t.Fatalf("%s %v: %v, want a JSON-RPC error", r["method"], r["params"], err)
		}
		refused = append(refused, map[string]any{"method": r["method"], "code": werr.Code, "data": werr.Data})
	}
	if b, err := json.Marshal(map[string]any{"refused": refused}); err != nil || json.Unmarshal(b, &got) != nil {
		t.Fatalf("refused: %v", refused)
	}
	got.Elicitations, got.Samplings = int(elicitations.Load()), int(samplings.Load())
	t.Logf("go-sdk %q: %d tools, %d resources, %d templates, %d prompts, %d elicitations, updated %v", version, len(got.Tools), len(got.Resources), len(got.Templates), len(got.PromptNames), got.Elicitations, got.Updated)
	return got
}

// gather adds what comes on ch to seen (each once) until want is among
// them, failing after 10 s.
func gather(t *testing.T, ch <-chan string, seen *[]string, want string) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for !slices.Contains(*seen, want) {
		select {
		case v := <-ch:
			if !slices.Contains(*seen, v) {
				*seen = append(*seen, v)
			}
		case <-deadline:
			t.Fatalf("no %s within 10 s (got %v)", want, *seen)
		}
	}
}

// goNames gathers what name says of every entry of a go-sdk listing.
func goNames[E any](t *testing.T, list string, entries iter.Seq2[E, error], name func(E) string) []string {
	t.Helper()
	var names []string
	for e, err := range entries {
		if err != nil {
			t.Fatalf("%s: %v", list, err)
		}
		names = append(names, name(e))
	}
	return names
}
