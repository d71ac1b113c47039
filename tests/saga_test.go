package tests

// The saga face (option `saga on`): tools/callSaga and
// tools/resumeSaga, plain JSON-RPC POSTs without a session, initialize
// or the 2026-07-28 headers, served by whichever instance of a fleet
// sharing state_key gets each turn, in front of a legacy server (the
// forward bridge) and of a modern one (passed through).

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// sagaStep is a step of a suspended saga.
type sagaStep struct {
	Type   string          `json:"type"`
	StepID string          `json:"stepId"`
	Params json.RawMessage `json:"params"`
}

// sagaSuspended is the result of a suspended saga.
type sagaSuspended struct {
	State     string     `json:"state"`
	SagaToken string     `json:"sagaToken"`
	Steps     []sagaStep `json:"steps"`
}

// sagaPost POSTs a saga method as plain JSON-RPC (no MCP headers at all).
func sagaPost(t *testing.T, url string, hdr map[string]string, id int, method string, params map[string]any) rpcExchange {
	t.Helper()
	return postRPC(t, url, hdr, rpcBody(t, id, method, params), id)
}

func callSaga(t *testing.T, url string, hdr map[string]string, id int, tool string, args map[string]any) rpcExchange {
	t.Helper()
	return sagaPost(t, url, hdr, id, "tools/callSaga", map[string]any{"name": tool, "arguments": args})
}

func resumeSaga(t *testing.T, url string, hdr map[string]string, id int, token string, completed []map[string]any) rpcExchange {
	t.Helper()
	return sagaPost(t, url, hdr, id, "tools/resumeSaga", map[string]any{"sagaToken": token, "completedSteps": completed})
}

// suspended parses a suspension of want steps of the given types.
func suspended(t *testing.T, x rpcExchange, types ...string) sagaSuspended {
	t.Helper()
	if x.Status != http.StatusOK || x.Resp == nil || x.Resp.Error != nil {
		t.Fatalf("want a suspension, got %s", x)
	}
	var s sagaSuspended
	if err := json.Unmarshal(x.Resp.Result, &s); err != nil || s.State != "suspended" || s.SagaToken == "" || len(s.Steps) != len(types) {
		t.Fatalf("want a suspension of %v, got %s", types, x.Resp.Result)
	}
	for i, typ := range types {
		if s.Steps[i].Type != typ || s.Steps[i].StepID == "" {
			t.Fatalf("step %d: want %s, got %+v", i, typ, s.Steps[i])
		}
	}
	return s
}

// sagaRefused checks a -32602 answer whose message has want.
func sagaRefused(t *testing.T, x rpcExchange, want string) {
	t.Helper()
	if x.Status != http.StatusBadRequest || x.Resp == nil || x.Resp.Error == nil || x.Resp.Error.Code != -32602 ||
		!strings.Contains(x.Resp.Error.Message, want) {
		t.Fatalf("want -32602 %q, got %s", want, x)
	}
}

func accept(id string, content map[string]any) map[string]any {
	return map[string]any{"stepId": id, "result": map[string]any{"action": "accept", "content": content}}
}

// TestSagaLegacy: a saga of two elicitation steps in front of a go-sdk
// legacy server whose streams are resumable, each turn on another
// instance of a fleet sharing state_key, completedSteps cumulative; then a
// used sagaToken, another principal's, a tampered one, oversized input,
// and steps completed with an error (the tool sees a decline).
func TestSagaLegacy(t *testing.T) {
	t.Parallel()
	up := newResumableServer(t)
	fleet := startFleet(t, "\t\tupstream "+up.url+" {\n\t\t\tera legacy\n\t\t}\n\t\tsaga on", "peer")
	alice := map[string]string{"Authorization": "Bearer alice"}

	first := suspended(t, callSaga(t, fleet[0].URL, alice, 1, "ask", map[string]any{"topic": "tea"}), "elicitation")
	if !strings.Contains(string(first.Steps[0].Params), "About tea?") {
		t.Fatalf("first step: %s", first.Steps[0].Params)
	}
	done := []map[string]any{accept(first.Steps[0].StepID, map[string]any{"answer": "yes"})}
	second := suspended(t, resumeSaga(t, fleet[1].URL, alice, 2, first.SagaToken, done), "elicitation")
	if second.Steps[0].StepID == first.Steps[0].StepID || !strings.Contains(string(second.Steps[0].Params), "Sure?") {
		t.Fatalf("second step: %+v", second.Steps[0])
	}
	done = append(done, accept(second.Steps[0].StepID, map[string]any{"answer": "sure"}))
	x := resumeSaga(t, fleet[2].URL, alice, 3, second.SagaToken, done)
	if x.Status != http.StatusOK || x.Resp == nil || x.Resp.Error != nil || !strings.Contains(string(x.Resp.Result), `"accept:yes,accept:sure"`) ||
		strings.Contains(string(x.Resp.Result), "suspended") {
		t.Fatalf("final: %s", x)
	}

	// Used: refused where it was used; elsewhere, the call it resumed is over.
	sagaRefused(t, resumeSaga(t, fleet[2].URL, alice, 4, second.SagaToken, done), "sagaToken is not valid")
	if again := resumeSaga(t, fleet[0].URL, alice, 5, second.SagaToken, done); again.Resp == nil || again.Resp.Error == nil {
		t.Fatalf("a used sagaToken on another instance: %s", again)
	}

	// Another principal's, tampered, oversized.
	third := suspended(t, callSaga(t, fleet[1].URL, alice, 6, "ask", map[string]any{"topic": "jam"}), "elicitation")
	mine := []map[string]any{accept(third.Steps[0].StepID, map[string]any{"answer": "x"})}
	sagaRefused(t, resumeSaga(t, fleet[0].URL, map[string]string{"Authorization": "Bearer mallory"}, 7, third.SagaToken, mine), "sagaToken is not valid")
	tampered := []byte(third.SagaToken)
	tampered[len(tampered)/2] ^= 'A' ^ 'B'
	sagaRefused(t, resumeSaga(t, fleet[0].URL, alice, 8, string(tampered), mine), "sagaToken is not valid")
	sagaRefused(t, resumeSaga(t, fleet[0].URL, alice, 9, strings.Repeat("A", 200000), mine), "sagaToken is not valid")
	sagaRefused(t, callSaga(t, fleet[0].URL, alice, 10, "ask", map[string]any{"topic": strings.Repeat("t", 17000)}), "at most 16384 bytes")
	// A step missing or malformed leaves the token usable.
	sagaRefused(t, resumeSaga(t, fleet[0].URL, alice, 11, third.SagaToken, nil), "completedSteps must be an array")
	sagaRefused(t, resumeSaga(t, fleet[0].URL, alice, 12, third.SagaToken, []map[string]any{}), "no entry for step")
	sagaRefused(t, resumeSaga(t, fleet[0].URL, alice, 13, third.SagaToken,
		[]map[string]any{{"stepId": third.Steps[0].StepID, "result": map[string]any{"action": "maybe"}}}), "action")

	// Steps completed with an error: the tool is told the user declined,
	// and the saga ends with what it answers.
	refuse := func(id string) map[string]any {
		return map[string]any{"stepId": id, "error": map[string]any{"code": -1, "message": "user said no"}}
	}
	fourth := suspended(t, resumeSaga(t, fleet[1].URL, alice, 14, third.SagaToken, []map[string]any{refuse(third.Steps[0].StepID)}), "elicitation")
	x = resumeSaga(t, fleet[0].URL, alice, 15, fourth.SagaToken, []map[string]any{refuse(third.Steps[0].StepID), refuse(fourth.Steps[0].StepID)})
	if x.Resp == nil || x.Resp.Error != nil || !strings.Contains(string(x.Resp.Result), `"decline:,decline:"`) {
		t.Fatalf("declined saga: %s", x)
	}
}

// TestSagaOff: without `saga on` the methods are served as before (a
// plain POST without a session is refused with 400); with it, a saga
// needs no session.
func TestSagaOff(t *testing.T) {
	t.Parallel()
	up := newResumableServer(t)
	g := startGateway(t, "\t\tupstream "+up.url+" {\n\t\t\tera legacy\n\t\t}")
	x := callSaga(t, g.URL, nil, 1, "ask", map[string]any{"topic": "tea"})
	if x.Status != http.StatusBadRequest || x.Resp == nil || x.Resp.Error == nil || strings.Contains(x.Raw, "suspended") {
		t.Fatalf("saga off: %s", x)
	}
}

// TestSagaModern: a saga in front of a modern-only server (the
// TypeScript SDK 2.x fixture): plan_party's three rounds (elicitation,
// sampling, elicitation) become three suspensions, each turn on another
// instance; a sampling step completed with an error ends the saga.
func TestSagaModern(t *testing.T) {
	t.Parallel()
	fixture := startModernFixture(t)
	fleet := startFleet(t, "\t\tupstream "+fixture+" {\n\t\t\tera modern\n\t\t}\n\t\tsaga on", "peer")

	s := suspended(t, callSaga(t, fleet[0].URL, nil, 1, "plan_party", map[string]any{"occasion": "picnic"}), "elicitation")
	if s.Steps[0].StepID != "host" {
		t.Fatalf("first step: %+v", s.Steps[0])
	}
	done := []map[string]any{accept("host", map[string]any{"name": "Ada"})}
	s = suspended(t, resumeSaga(t, fleet[1].URL, nil, 2, s.SagaToken, done), "sampling")
	if s.Steps[0].StepID != "toast" || !strings.Contains(string(s.Steps[0].Params), "Ada's picnic") {
		t.Fatalf("second step: %+v", s.Steps[0])
	}
	toastState := s.SagaToken
	done = append(done, map[string]any{"stepId": "toast", "result": map[string]any{"role": "assistant",
		"content": map[string]any{"type": "text", "text": "To Ada!"}, "model": "test-llm"}})
	s = suspended(t, resumeSaga(t, fleet[2].URL, nil, 3, s.SagaToken, done), "elicitation")
	done = append(done, accept("confirm", map[string]any{"send": true}))
	x := resumeSaga(t, fleet[0].URL, nil, 4, s.SagaToken, done)
	if x.Resp == nil || x.Resp.Error != nil || !strings.Contains(string(x.Resp.Result), `hosted by Ada; toast: \"To Ada!\"; invitations sent: true`) {
		t.Fatalf("final: %s", x)
	}
	// Used: refused by the instance that used it. (These instances share
	// no storage: another would retry it, as far as the modern server's
	// own requestState allows; with a shared storage, see once_test.go.)
	sagaRefused(t, resumeSaga(t, fleet[2].URL, nil, 5, toastState, done), "sagaToken is not valid")

	// A sampling step refused by the client.
	s = suspended(t, callSaga(t, fleet[1].URL, nil, 6, "test_sampling", map[string]any{"prompt": "Hi?"}), "sampling")
	x = resumeSaga(t, fleet[2].URL, nil, 7, s.SagaToken,
		[]map[string]any{{"stepId": s.Steps[0].StepID, "error": map[string]any{"code": -1, "message": "no LLM today"}}})
	if x.Resp == nil || x.Resp.Error != nil || !strings.Contains(string(x.Resp.Result), `"isError":true`) ||
		!strings.Contains(string(x.Resp.Result), "no LLM today") {
		t.Fatalf("refused sampling: %s", x)
	}
}

// newHeldServer is a go-sdk v1.8 legacy server without an event store (its
// streams are not resumable: a parked call holds its stream on the
// instance that parked it, and a retry elsewhere is relayed there). Its
// tool ask elicits twice, as resumableServer's; roots_ask lists the
// client's roots first, then elicits once, and answers with both.
func newHeldServer(t *testing.T) string {
	t.Helper()
	server := mcp.NewServer(&mcp.Implementation{Name: "held", Version: "1"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "ask", Description: "Asks twice."},
		func(ctx context.Context, req *mcp.CallToolRequest, in struct {
			Topic string `json:"topic"`
		}) (*mcp.CallToolResult, any, error) {
			got, err := elicitTwice(ctx, req, in.Topic)
			if err != nil {
				return nil, nil, err
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Join(got, ",")}}}, nil, nil
		})
	mcp.AddTool(server, &mcp.Tool{Name: "hello", Description: "Asks nothing."},
		func(_ context.Context, _ *mcp.CallToolRequest, in struct {
			Name string `json:"name"`
		}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "Hello, " + in.Name + "!"}}}, nil, nil
		})
	mcp.AddTool(server, &mcp.Tool{Name: "roots_ask", Description: "Lists roots, then asks."},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			roots, err := req.Session.ListRoots(ctx, nil)
			if err != nil {
				return nil, nil, err
			}
			res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "Go?", RequestedSchema: answerSchema})
			if err != nil {
				return nil, nil, err
			}
			a, _ := res.Content["answer"].(string)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("roots:%d %s:%s", len(roots.Roots), res.Action, a)}}}, nil, nil
		})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil))
	t.Cleanup(ts.Close)
	return ts.URL
}

// TestSagaLegacyHeld: the same saga in front of a legacy server whose
// streams are not resumable: each turn's tool call is relayed to the
// instance holding the parked call, whichever instance the turn reached.
// A server asking for roots is answered with none, without a step.
func TestSagaLegacyHeld(t *testing.T) {
	t.Parallel()
	fleet := startFleet(t, "\t\tupstream "+newHeldServer(t)+" {\n\t\t\tera legacy\n\t\t}\n\t\tsaga on", "peer")

	first := suspended(t, callSaga(t, fleet[0].URL, nil, 1, "ask", map[string]any{"topic": "tea"}), "elicitation")
	done := []map[string]any{accept(first.Steps[0].StepID, map[string]any{"answer": "yes"})}
	second := suspended(t, resumeSaga(t, fleet[1].URL, nil, 2, first.SagaToken, done), "elicitation")
	done = append(done, accept(second.Steps[0].StepID, map[string]any{"answer": "sure"}))
	x := resumeSaga(t, fleet[2].URL, nil, 3, second.SagaToken, done)
	if x.Resp == nil || x.Resp.Error != nil || !strings.Contains(string(x.Resp.Result), `"accept:yes,accept:sure"`) {
		t.Fatalf("final: %s", x)
	}
	// Replayed on another instance: the call is no longer parked.
	if again := resumeSaga(t, fleet[1].URL, nil, 4, second.SagaToken, done); again.Resp == nil || again.Resp.Error == nil {
		t.Fatalf("a used sagaToken on another instance: %s", again)
	}

	// A tool that asks nothing answers at once; an error is the saga's.
	x = callSaga(t, fleet[1].URL, nil, 20, "hello", map[string]any{"name": "Caddy"})
	if x.Status != http.StatusOK || x.Resp == nil || x.Resp.Error != nil || !strings.Contains(string(x.Resp.Result), `"Hello, Caddy!"`) ||
		strings.Contains(string(x.Resp.Result), "sagaToken") {
		t.Fatalf("hello: %s", x)
	}
	if x = callSaga(t, fleet[1].URL, nil, 21, "no_such_tool", nil); x.Resp == nil || x.Resp.Error == nil || x.Resp.Error.Code != -32602 ||
		string(x.Resp.ID) != "21" {
		t.Fatalf("an unknown tool: %s", x)
	}

	// A client's MCP headers, of either era, and a session id are ignored.
	for i, hdr := range []map[string]string{
		{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/callSaga", "Mcp-Name": "other"},
		{"MCP-Protocol-Version": "2025-11-25", "Mcp-Session-Id": "not-a-session"},
	} {
		suspended(t, callSaga(t, fleet[i].URL, hdr, 10+i, "ask", map[string]any{"topic": "headers"}), "elicitation")
	}

	s := suspended(t, callSaga(t, fleet[2].URL, nil, 5, "roots_ask", nil), "elicitation")
	x = resumeSaga(t, fleet[0].URL, nil, 6, s.SagaToken, []map[string]any{accept(s.Steps[0].StepID, map[string]any{"answer": "go"})})
	if x.Resp == nil || x.Resp.Error != nil || !strings.Contains(string(x.Resp.Result), `"roots:0 accept:go"`) {
		t.Fatalf("roots_ask: %s", x)
	}
}

// TestSagaExpired: a sagaToken lives park_ttl; then it is refused.
func TestSagaExpired(t *testing.T) {
	t.Parallel()
	g := startGateway(t, "\t\tupstream "+newHeldServer(t)+" {\n\t\t\tera legacy\n\t\t}\n\t\tsaga on\n\t\tpark_ttl 1s")
	s := suspended(t, callSaga(t, g.URL, nil, 1, "ask", map[string]any{"topic": "tea"}), "elicitation")
	time.Sleep(2500 * time.Millisecond)
	sagaRefused(t, resumeSaga(t, g.URL, nil, 2, s.SagaToken, []map[string]any{accept(s.Steps[0].StepID, map[string]any{"answer": "late"})}),
		"sagaToken is not valid")
}
