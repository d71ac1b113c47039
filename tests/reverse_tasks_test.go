package tests

// The reverse bridge and the 2026-07-28 Tasks extension: a legacy client in
// front of a modern server that answers tools/call with a task. The
// gateway follows the task (tasks/get, tasks/update, tasks/cancel) and the
// client sees one blocking call. Upstream: support.ModernTasksServer, a fixture,
// because no real server implements the Tasks extension yet.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/tests/support"
)

// revTasksGateway starts a gateway in front of a new TasksServer (era
// modern); upstreamExtra goes in the upstream's block, extra in the
// handler's.
func revTasksGateway(t *testing.T, upstreamExtra, extra string) (*gateway, *support.ModernTasksServer) {
	t.Helper()
	fx := support.NewModernTasksServer(t)
	g := startGateway(t, "\t\tupstream "+fx.URL+" {\n\t\t\tera modern\n"+upstreamExtra+"\t\t}\n"+extra)
	return g, fx
}

// revGoClient connects the go-sdk client in the 2025-11-25 era, answering
// elicitations with goLegacyHandlers (name: Ada), counted in elicitations.
func revGoClient(t *testing.T, url string, elicitations *atomic.Int32) *mcp.ClientSession {
	t.Helper()
	var samplings atomic.Int32
	client := mcp.NewClient(&mcp.Implementation{Name: "go-legacy-client", Version: "1"}, goLegacyHandlers(elicitations, &samplings))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// revWaitCancelled waits for the fixture's tasks/cancel of a task, and
// returns its id.
func revWaitCancelled(t *testing.T, fx *support.ModernTasksServer, within time.Duration) string {
	t.Helper()
	select {
	case id := <-fx.Cancelled:
		return id
	case <-time.After(within):
		t.Fatalf("no tasks/cancel reached the upstream within %v; it received %d tasks/get", within, len(fx.Requests("tasks/get")))
		return ""
	}
}

// revPolledTasks returns the ids of the tasks the fixture was asked about.
func revPolledTasks(fx *support.ModernTasksServer) map[string]bool {
	ids := map[string]bool{}
	for _, r := range fx.Requests("tasks/get") {
		ids[r.TaskID] = true
	}
	return ids
}

// revWaitPolled waits until the fixture has received a tasks/get about a
// task not in known, and returns the task's id.
func revWaitPolled(t *testing.T, fx *support.ModernTasksServer, known map[string]bool) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for id := range revPolledTasks(fx) {
			if !known[id] {
				return id
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("the gateway never polled the task")
	return ""
}

// revCall sends a legacy tools/call of tool (arguments args) on session
// sid with raw HTTP and returns the JSON-RPC response.
func revCall(t *testing.T, url, sid string, id int, tool, args string) *rpcResponse {
	t.Helper()
	x := postRPC(t, url, legacyHeaders(sid), fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, id, tool, args), id)
	if x.Resp == nil {
		t.Fatalf("tools/call %s: no JSON-RPC response: %s", tool, x)
	}
	return x.Resp
}

// TestReverseTaskCompletes: a tool the modern server runs as a task is one
// blocking call for the go-sdk legacy client: the gateway declares the
// Tasks extension on tools/call, polls tasks/get (with Mcp-Method and
// Mcp-Name = taskId, no faster than its floor although the server asks for
// 50 ms) and answers with the task's result; a completed task whose result
// is an isError tool result reaches the client as one.
func TestReverseTaskCompletes(t *testing.T) {
	t.Parallel()
	g, fx := revTasksGateway(t, "", "")
	var elicitations atomic.Int32
	cs := revGoClient(t, g.URL, &elicitations)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	started := time.Now()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "slow_task", Arguments: map[string]any{"ms": 800}})
	if err != nil {
		t.Fatalf("slow_task: %v", err)
	}
	took := time.Since(started)
	if got := toolText(res); res.IsError || got != "slow done after 800ms" {
		t.Fatalf("slow_task: %q (isError %t), want the task's result", got, res.IsError)
	}
	if took < 800*time.Millisecond {
		t.Fatalf("slow_task answered after %v, before its task completed", took)
	}
	calls := fx.Requests("tools/call")
	if len(calls) != 1 || !calls[0].DeclaredTasks {
		t.Fatalf("tools/call upstream: %+v; want one, declaring the Tasks extension", calls)
	}
	gets := fx.Requests("tasks/get")
	if len(gets) == 0 {
		t.Fatal("no tasks/get reached the upstream")
	}
	for _, r := range gets {
		if r.HeaderMethod != "tasks/get" || r.HeaderName != r.TaskID || r.TaskID == "" || !r.DeclaredTasks {
			t.Fatalf("tasks/get headers Mcp-Method %q, Mcp-Name %q for task %q (extension declared: %t)", r.HeaderMethod, r.HeaderName, r.TaskID, r.DeclaredTasks)
		}
	}
	// 800 ms at the 100 ms floor: about 8 polls, never one per 50 ms.
	if max := int(took/(100*time.Millisecond)) + 2; len(gets) > max {
		t.Fatalf("%d tasks/get in %v: faster than the 100ms floor (at most %d)", len(gets), took, max)
	}

	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "failing_task", Arguments: map[string]any{}})
	if err != nil {
		t.Fatalf("failing_task: %v", err)
	}
	if got := toolText(res); !res.IsError || got != "the job failed" {
		t.Fatalf("failing_task: %q (isError %t), want the isError result", got, res.IsError)
	}
	if n := len(fx.Requests("tasks/cancel")); n != 0 {
		t.Fatalf("%d tasks/cancel for tasks that completed", n)
	}
}

// TestReverseTaskElicitation: an input_required task's question reaches the
// go-sdk client in-line; its answer goes upstream with tasks/update, keyed
// as the task asked, and the result carries it. The TypeScript SDK 1.x
// client does the same.
func TestReverseTaskElicitation(t *testing.T) {
	t.Parallel()
	g, fx := revTasksGateway(t, "", "")
	t.Run("TypeScript SDK 1.x", func(t *testing.T) {
		got := runClient(t, "legacy-client.mjs", g.URL, "ask_task", `{}`, "terminate")
		if text := got.Result.text(); got.Result.IsError || text != "Hello, Test User!" || got.Elicitations != 1 {
			t.Fatalf("%q (isError %t) after %d elicitations; want \"Hello, Test User!\" after 1", text, got.Result.IsError, got.Elicitations)
		}
	})
	t.Run("go-sdk", func(t *testing.T) {
		var elicitations atomic.Int32
		cs := revGoClient(t, g.URL, &elicitations)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		before := len(fx.Requests("tasks/update"))
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ask_task", Arguments: map[string]any{}})
		if err != nil {
			t.Fatalf("ask_task: %v", err)
		}
		if got := toolText(res); res.IsError || got != "Hello, Ada!" || elicitations.Load() != 1 {
			t.Fatalf("ask_task: %q (isError %t) after %d elicitations; want \"Hello, Ada!\" after 1", got, res.IsError, elicitations.Load())
		}
		updates := fx.Requests("tasks/update")[before:]
		if len(updates) != 1 {
			t.Fatalf("%d tasks/update upstream, want 1", len(updates))
		}
		u := updates[0]
		var p struct {
			TaskID    string                     `json:"taskId"`
			Responses map[string]json.RawMessage `json:"inputResponses"`
		}
		if err := json.Unmarshal(u.Params, &p); err != nil {
			t.Fatal(err)
		}
		if u.HeaderMethod != "tasks/update" || u.HeaderName != p.TaskID || len(p.Responses) != 1 {
			t.Fatalf("tasks/update: Mcp-Method %q, Mcp-Name %q, params %s", u.HeaderMethod, u.HeaderName, u.Params)
		}
		for key, answer := range p.Responses {
			if !strings.HasPrefix(key, "who-") || !strings.Contains(string(answer), `"Ada"`) || !strings.Contains(string(answer), `"accept"`) {
				t.Fatalf("inputResponses %s: want the client's accepted answer under the task's key", u.Params)
			}
		}
	})
}

// TestReverseTaskFailed: a failed task's JSON-RPC error reaches the legacy
// client with its code and message; a task asking a question the client
// cannot answer (it declared no elicitation) ends the call with an isError
// result saying so, and is cancelled upstream.
func TestReverseTaskFailed(t *testing.T) {
	t.Parallel()
	g, fx := revTasksGateway(t, "", "")
	sid, _ := initReverse(t, g.URL, "2025-11-25", `{}`, nil)
	resp := revCall(t, g.URL, sid, 7, "broken_task", `{}`)
	if resp.Error == nil || resp.Error.Code != -31001 || resp.Error.Message != "the job broke: disk full" {
		t.Fatalf("broken_task: %s; want the task's error -31001 \"the job broke: disk full\"", revSummary(resp))
	}
	resp = revCall(t, g.URL, sid, 8, "ask_task", `{}`)
	var res struct {
		IsError bool `json:"isError"`
	}
	_ = json.Unmarshal(resp.Result, &res)
	if resp.Error != nil || !res.IsError || !strings.Contains(string(resp.Result), `did not declare the capability {\"elicitation\":{}}`) {
		t.Fatalf("ask_task without elicitation: %s; want an isError result naming the capability", revSummary(resp))
	}
	revWaitCancelled(t, fx, 5*time.Second)
}

// TestReverseTaskCancel: the legacy client's cancellation becomes
// tasks/cancel upstream — notifications/cancelled for the call, the client
// closing the call's stream, DELETE of the session, and the go-sdk
// client's own cancellation.
func TestReverseTaskCancel(t *testing.T) {
	t.Parallel()
	g, fx := revTasksGateway(t, "", "")
	// start begins an endless task call on a new session and returns the
	// session and the call's cancel; the call's outcome arrives on done.
	start := func(t *testing.T) (sid, task string, cancel context.CancelFunc, done <-chan error) {
		sid, _ = initReverse(t, g.URL, "2025-11-25", `{}`, nil)
		known := revPolledTasks(fx)
		ctx, cancel := context.WithCancel(context.Background())
		ch := make(chan error, 1)
		go func() {
			resp, err := tryPostContext(ctx, g.URL, legacyHeaders(sid), `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"endless_task","arguments":{}}}`)
			if err == nil {
				resp.Body.Close()
			}
			ch <- err
		}()
		return sid, revWaitPolled(t, fx, known), cancel, ch
	}
	t.Run("notifications/cancelled", func(t *testing.T) {
		sid, task, cancel, done := start(t)
		defer cancel()
		if r := post(t, g.URL, legacyHeaders(sid), `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,"reason":"changed my mind"}}`); r.StatusCode != http.StatusAccepted {
			t.Fatalf("notifications/cancelled: HTTP %d", r.StatusCode)
		}
		if got := revWaitCancelled(t, fx, 10*time.Second); got != task {
			t.Fatalf("tasks/cancel for %q, want %q", got, task)
		}
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("the cancelled call's answer never ended")
		}
	})
	t.Run("stream closed", func(t *testing.T) {
		_, task, cancel, _ := start(t)
		cancel()
		if got := revWaitCancelled(t, fx, 10*time.Second); got != task {
			t.Fatalf("tasks/cancel for %q, want %q", got, task)
		}
	})
	t.Run("DELETE", func(t *testing.T) {
		sid, task, cancel, _ := start(t)
		defer cancel()
		if r := send(t, http.MethodDelete, g.URL, legacyHeaders(sid), ""); r.StatusCode != http.StatusOK {
			t.Fatalf("DELETE: HTTP %d", r.StatusCode)
		}
		if got := revWaitCancelled(t, fx, 10*time.Second); got != task {
			t.Fatalf("tasks/cancel for %q, want %q", got, task)
		}
	})
	t.Run("go-sdk", func(t *testing.T) {
		var elicitations atomic.Int32
		cs := revGoClient(t, g.URL, &elicitations)
		ctx, cancel := context.WithCancel(context.Background())
		known := revPolledTasks(fx)
		done := make(chan error, 1)
		go func() {
			_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "endless_task", Arguments: map[string]any{}})
			done <- err
		}()
		task := revWaitPolled(t, fx, known)
		cancel()
		if got := revWaitCancelled(t, fx, 10*time.Second); got != task {
			t.Fatalf("tasks/cancel for %q, want %q", got, task)
		}
		if err := <-done; err == nil {
			t.Fatal("the cancelled call returned no error")
		}
	})
}

// TestReverseTaskBounded: a task that never ends is bounded — by its ttlMs,
// by max_task_wait, and by tasks/get failing three times in a row — with a
// clear error to the client and tasks/cancel upstream.
func TestReverseTaskBounded(t *testing.T) {
	t.Parallel()
	g, fx := revTasksGateway(t, "", "\t\tmax_task_wait 2s\n")
	sid, _ := initReverse(t, g.URL, "2025-11-25", `{}`, nil)
	for i, c := range []struct {
		tool, args, want string
		within           time.Duration
	}{
		{"endless_task", `{"ttlMs":1000}`, "did not end within 1s (the task's ttlMs); it was cancelled", 1 * time.Second},
		{"endless_task", `{}`, "did not end within 2s (max_task_wait); it was cancelled", 2 * time.Second},
		{"unreadable_task", `{}`, "could not be read 3 times in a row; it was cancelled: tasks/get failed: task storage unavailable (code -32603)", 0},
	} {
		started := time.Now()
		resp := revCall(t, g.URL, sid, 10+i, c.tool, c.args)
		took := time.Since(started)
		if resp.Error == nil || resp.Error.Code != -32603 || !strings.Contains(resp.Error.Message, c.want) {
			t.Fatalf("%s %s: %s; want -32603 saying %q", c.tool, c.args, revSummary(resp), c.want)
		}
		if took < c.within || took > c.within+5*time.Second {
			t.Fatalf("%s %s: answered after %v, want about %v", c.tool, c.args, took, c.within)
		}
		revWaitCancelled(t, fx, 5*time.Second)
	}
}

// TestReverseTasksOff: with `tasks off` the gateway does not declare the
// extension: the server refuses a tool that needs a task (-32021, relayed),
// and a tool that is no task still works.
func TestReverseTasksOff(t *testing.T) {
	t.Parallel()
	g, fx := revTasksGateway(t, "\t\t\ttasks off\n", "")
	sid, _ := initReverse(t, g.URL, "2025-11-25", `{}`, nil)
	// The server refuses with -32021, which a 2025 client's revision does
	// not define: it gets -32600 with the server's message.
	if resp := revCall(t, g.URL, sid, 2, "slow_task", `{"ms":10}`); resp.Error == nil || resp.Error.Code != -32600 || !strings.Contains(resp.Error.Message, "Tasks extension") {
		t.Fatalf("slow_task with tasks off: %s; want -32600 with the server's message", revSummary(resp))
	}
	if resp := revCall(t, g.URL, sid, 3, "quick", `{}`); resp.Error != nil || !strings.Contains(string(resp.Result), `"quick"`) {
		t.Fatalf("quick: %s", revSummary(resp))
	}
	for _, r := range fx.Requests("tools/call") {
		if r.DeclaredTasks {
			t.Fatalf("tools/call declared the Tasks extension with tasks off: %s", r.Params)
		}
	}
}

// revSummary shows a JSON-RPC response in a failure message.
func revSummary(resp *rpcResponse) string {
	if resp.Error != nil {
		return fmt.Sprintf("error %d %q", resp.Error.Code, resp.Error.Message)
	}
	return "result " + string(resp.Result)
}
