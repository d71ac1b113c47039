package tests

// The REST face's OpenAPI document checked by third-party tooling
// (@apidevtools/swagger-parser, Redocly's `minimal` ruleset, the
// OpenAPI→MCP bridge @ivotoby/openapi-mcp-server answering a tool's
// questions), and an isError tool result read one way by every face.

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/tests/support"
)

// orderSchema is the inputSchema of openAPIServer's order tool, as
// pydantic writes a model with a nested one: the items are a reference
// into the schema's own $defs.
const orderSchema = `{"type":"object","$defs":{"Item":{"type":"object","properties":{"sku":{"type":"string"},"qty":{"type":"integer"}},"required":["sku"]}},` +
	`"properties":{"items":{"type":"array","items":{"$ref":"#/$defs/Item"}}},"required":["items"]}`

// openAPIServer is a legacy go-sdk server (no published server has this
// mix of tools): ask elicits twice (elicitTwice), order takes
// orderSchema and counts the items, refuse answers an isError result.
func openAPIServer(t *testing.T) string {
	t.Helper()
	server := mcp.NewServer(&mcp.Implementation{Name: "openapi-test", Version: "1"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "ask", Description: "Asks twice."},
		func(ctx context.Context, req *mcp.CallToolRequest, in struct {
			Topic string `json:"topic"`
		}) (*mcp.CallToolResult, any, error) {
			got, err := elicitTwice(ctx, req, in.Topic)
			if err != nil {
				return nil, nil, err
			}
			return support.Text(strings.Join(got, ",")), nil, nil
		})
	server.AddTool(&mcp.Tool{Name: "order", Description: "Orders items.", InputSchema: json.RawMessage(orderSchema)},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var in struct {
				Items []json.RawMessage `json:"items"`
			}
			_ = json.Unmarshal(req.Params.Arguments, &in)
			return support.Text(strings.Repeat("item ", len(in.Items))), nil
		})
	mcp.AddTool(server, &mcp.Tool{Name: "refuse", Description: "Answers an isError result."},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "refused on purpose"}}}, nil, nil
		})
	return support.ServeMCP(t, server, nil)
}

// TestRESTOpenAPITooling: the document a live gateway serves is valid
// for @apidevtools/swagger-parser (a tool's $defs reference resolves),
// draws no problem from Redocly's `minimal` ruleset (every required
// property defined, security declared), and the OpenAPI→MCP bridge
// @ivotoby/openapi-mcp-server, given only the document and the base,
// answers a tool's two questions through the advance operation (the
// answer's properties are its tool's arguments, not a `body`) and gets
// the tool's result.
func TestRESTOpenAPITooling(t *testing.T) {
	t.Parallel()
	nodeBin(t)
	nodeFile(t, "@apidevtools/swagger-parser/package.json")
	nodeFile(t, "@redocly/openapi-core/package.json")
	nodeFile(t, "@ivotoby/openapi-mcp-server/package.json")
	gw := restFleet(t, upstreamBlock(openAPIServer(t), "legacy"), "")
	doc := gw[0] + "/api/openapi.json"

	t.Run("swagger-parser and Redocly minimal", func(t *testing.T) {
		out, err := runNodeScript(t, "openapi-lint.mjs", doc)
		if err != nil {
			t.Fatal(err)
		}
		var got struct {
			SwaggerParser *string
			Redocly       []map[string]string
		}
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("%s: %v", out, err)
		}
		if got.SwaggerParser != nil {
			t.Errorf("swagger-parser: %s", *got.SwaggerParser)
		}
		for _, p := range got.Redocly {
			t.Errorf("Redocly minimal: %s %s: %s at %s", p["severity"], p["rule"], p["message"], p["at"])
		}
		// What swagger-parser resolved: the order tool's $defs reference.
		if r := restDo(t, "GET", doc, nil, ""); !strings.Contains(string(r.Body), `"#/components/schemas/order.arguments/$defs/Item"`) {
			t.Errorf("the order tool's reference, rebased, is not in the document: %s", r)
		}
	})

	t.Run("openapi-mcp-server", func(t *testing.T) {
		out, err := runNodeScript(t, "openapi-bridge.mjs", doc, gw[1]+"/api", "ask", "b1", `{"topic":"tea"}`, "answer", "ok")
		if err != nil {
			t.Fatal(err)
		}
		var got struct {
			Tools []string
			Steps []restCall
		}
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("%s: %v", out, err)
		}
		want := []string{"awaitingElicitationResult", "awaitingElicitationResult", "success"}
		if len(got.Steps) != len(want) {
			t.Fatalf("want the steps %v, got %s", want, out)
		}
		for i, s := range got.Steps {
			if s.Status != want[i] {
				t.Fatalf("step %d: want %s, got %s", i, want[i], out)
			}
		}
		if last := got.Steps[len(got.Steps)-1]; !strings.Contains(string(last.Result), "accept:ok,accept:ok") {
			t.Fatalf("final: %s", out)
		}
	})
}

// TestIsErrorOneWay: a tool that runs and answers an isError result
// ended the same way on every face: the REST call is `success` with
// that result (and no error), the saga answers it as its result, and a
// hosted task is `completed` with it.
func TestIsErrorOneWay(t *testing.T) {
	t.Parallel()
	gw := restFleet(t, upstreamBlock(openAPIServer(t), "legacy"), "\t\tsaga on\n\t\ttask refuse optional 0\n")
	isError := func(what string, result json.RawMessage) {
		t.Helper()
		var r struct {
			IsError bool `json:"isError"`
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		}
		if json.Unmarshal(result, &r) != nil || !r.IsError || len(r.Content) != 1 || r.Content[0].Text != "refused on purpose" {
			t.Fatalf("%s: want the isError result, got %s", what, result)
		}
	}

	c := wantCall(t, restDo(t, "PUT", gw[0]+"/api/tools/refuse/calls/r1", map[string]string{"Idempotency-Key": "k"}, `{"arguments":{}}`),
		http.StatusCreated, "success")
	if len(c.Error) != 0 {
		t.Fatalf("REST: an error beside the result: %s", c.Error)
	}
	isError("REST", c.Result)
	list := restDo(t, "GET", gw[1]+"/api/tools/refuse/calls?status=success", nil, "")
	if list.Status != http.StatusOK || !strings.Contains(string(list.Body), `"id":"r1"`) {
		t.Fatalf("REST: the call is not listed as success: %s", list)
	}

	x := callSaga(t, gw[1]+"/mcp", nil, 1, "refuse", map[string]any{})
	if x.Resp == nil || x.Resp.Error != nil {
		t.Fatalf("saga: %s", x)
	}
	isError("saga", x.Resp.Result)

	tc := &taskClient{t: t, auth: "Bearer alice"}
	created := parseTask(t, tc.call(gw[0]+"/mcp", "refuse"))
	tc.until(gw[0]+"/mcp", created.TaskID, func(v taskView) bool { return v.Status == "completed" }, "completed")
	got := tc.task(gw[0]+"/mcp", "tasks/get", created.TaskID, nil)
	var task struct {
		Result json.RawMessage `json:"result"`
	}
	if got.Resp == nil || json.Unmarshal(got.Resp.Result, &task) != nil {
		t.Fatalf("task: %s", got)
	}
	isError("task", task.Result)
}
