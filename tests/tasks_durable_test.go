package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/tests/support"
)

// durableFleet is three instances of one fleet (instance ids and peers,
// one state_key) sharing Caddy's storage (file_system in one directory, as
// a shared volume would be), each with block inside its mcp_gateway block.
func durableFleet(t *testing.T, block string) []*gateway {
	t.Helper()
	return durableFleetIn(t, block, t.TempDir())
}

// durableFleetIn is durableFleet with its storage in the folder storage.
func durableFleetIn(t *testing.T, block, storage string) []*gateway {
	t.Helper()
	ports := []int{freePort(t), freePort(t), freePort(t)}
	globals := "\tstorage file_system " + storage
	fleet := make([]*gateway, len(ports))
	for i, port := range ports {
		fleet[i] = launchGateway(t, port, globals, "", fleetBlock(t, block, "peer", ports, i))
	}
	return fleet
}

// answerTask answers every open question of v (accept, field: value)
// with tasks/update on url, and fails unless the gateway acks it.
func (c *taskClient) answerTask(url string, v taskView, field, value string) rpcExchange {
	c.t.Helper()
	answers := map[string]any{}
	for k := range v.InputRequests {
		answers[k] = map[string]any{"action": "accept", "content": map[string]any{field: value}}
	}
	return c.task(url, "tasks/update", v.TaskID, map[string]any{"inputResponses": answers})
}

// callTool starts tool with args on url, as a task if the gateway makes one.
func (c *taskClient) callTool(url, tool string, args map[string]any) rpcExchange {
	c.t.Helper()
	return c.send(url, "tools/call", tool, map[string]any{"name": tool, "arguments": args}, taskCaps())
}

// question is the message of v's one open question.
func question(t *testing.T, v taskView) string {
	t.Helper()
	for _, raw := range v.InputRequests {
		var q struct {
			Params struct {
				Message string `json:"message"`
			} `json:"params"`
		}
		if json.Unmarshal(raw, &q) == nil {
			return q.Params.Message
		}
	}
	return ""
}

// TestDurableTasks: tasks outlive their instance. Three Caddy
// instances share state_key and Caddy's storage.
//
//   - In front of the go-sdk server with an event store: the task is
//     created on instance 0 and asks its first question; instance 0 is
//     SIGKILLed; instance 1 shows the task from its record, holds
//     tasks/update while the dead owner's lease holds, then
//     takes the task over (the call's stream reopened upstream): the answer
//     reaches the tool, which asks its second question, answered through
//     instance 2 (relayed to the new owner); the task completes with both
//     answers.
//   - The same in front of the TypeScript SDK 1.x server
//     (tests/node/ask-server.mjs: the SDK's transport with an event store).
//   - In front of the TypeScript SDK server server-everything (its
//     InMemoryEventStore): instance 0 is stopped gracefully (caddy stop):
//     it hands the task over at once, and instance 1 finishes it without
//     waiting for a lease.
//   - In front of a server without resumable streams: the task fails when
//     its instance stops, or once the lease of one killed lapsed, with an
//     error saying so — never left input_required, never a 5xx on
//     tasks/get.
func TestDurableTasks(t *testing.T) {
	t.Parallel()
	t.Run("go-sdk, owner killed", func(t *testing.T) {
		up := newResumableServer(t)
		fleet := durableFleet(t, "\t\tupstream "+up.url+" {\n\t\t\tera legacy\n\t\t}\n\t\ttask ask required 0\n\t\ttask_lease 2s")
		alice := &taskClient{t: t, auth: "Bearer alice"}
		created := parseTask(t, alice.callTool(fleet[0].URL, "ask", map[string]any{"topic": "tea"}))
		asked := alice.until(fleet[0].URL, created.TaskID, func(v taskView) bool { return v.Status == "input_required" }, "input_required")
		if q := question(t, asked); q != "About tea?" {
			t.Fatalf("first question %q", q)
		}
		fleet[0].kill(t)

		// From the record while the dead owner's lease holds — unless the
		// kill came before the record of its last change was written —
		// or, once it lapsed, from the call taken over, its stream replayed.
		seen := alice.until(fleet[1].URL, created.TaskID, func(v taskView) bool {
			return v.Status == "input_required" && question(t, v) == "About tea?"
		}, "asking on another instance, the owner killed")
		var ack rpcExchange
		waitFor(t, "tasks/update taken once the dead owner's lease lapsed", func() bool {
			ack = alice.answerTask(fleet[1].URL, seen, "answer", "a")
			if ack.Status == http.StatusServiceUnavailable && ack.Resp != nil && ack.Resp.Error != nil &&
				strings.Contains(ack.Resp.Error.Message, "lease") {
				time.Sleep(200 * time.Millisecond)
				return false
			}
			return true
		})
		if ack.Resp == nil || ack.Resp.Error != nil {
			t.Fatalf("tasks/update once the lease lapsed: %s", ack)
		}
		second := alice.until(fleet[2].URL, created.TaskID, func(v taskView) bool {
			return v.Status == "input_required" && question(t, v) == "Sure?"
		}, "asking its second question")
		if x := alice.answerTask(fleet[2].URL, second, "answer", "b"); x.Resp == nil || x.Resp.Error != nil {
			t.Fatalf("tasks/update through a third instance: %s", x)
		}
		done := alice.until(fleet[2].URL, created.TaskID, func(v taskView) bool { return v.Status == "completed" }, "completed")
		if done.Result == nil || len(done.Result.Content) == 0 || done.Result.Content[0].Text != "accept:a,accept:b" {
			t.Fatalf("completed task %+v", done)
		}
		bob := &taskClient{t: t, auth: "Bearer bob"}
		for _, g := range fleet[1:] {
			wantRPCError(t, bob.task(g.URL, "tasks/get", created.TaskID, nil), -32602, "another principal's tasks/get")
		}
	})

	t.Run("TypeScript SDK, owner killed", func(t *testing.T) {
		up := startAskServer(t)
		fleet := durableFleet(t, "\t\tupstream "+up+" {\n\t\t\tera legacy\n\t\t}\n\t\ttask ask required 0\n\t\ttask_lease 2s")
		alice := &taskClient{t: t, auth: "Bearer alice"}
		created := parseTask(t, alice.callTool(fleet[0].URL, "ask", map[string]any{"rounds": 2}))
		alice.until(fleet[0].URL, created.TaskID, func(v taskView) bool { return v.Status == "input_required" }, "input_required")
		fleet[0].kill(t)
		first := alice.until(fleet[1].URL, created.TaskID, func(v taskView) bool {
			return v.Status == "input_required" && question(t, v) == "Question 0"
		}, "asking on another instance, the owner killed")
		waitFor(t, "tasks/update taken once the dead owner's lease lapsed", func() bool {
			x := alice.answerTask(fleet[1].URL, first, "answer", "one")
			if x.Status == http.StatusServiceUnavailable {
				time.Sleep(200 * time.Millisecond)
				return false
			}
			if x.Resp == nil || x.Resp.Error != nil {
				t.Fatalf("tasks/update once the lease lapsed: %s", x)
			}
			return true
		})
		second := alice.until(fleet[2].URL, created.TaskID, func(v taskView) bool {
			return v.Status == "input_required" && question(t, v) == "Question 1"
		}, "asking its second question")
		if x := alice.answerTask(fleet[2].URL, second, "answer", "two"); x.Resp == nil || x.Resp.Error != nil {
			t.Fatalf("tasks/update through a third instance: %s", x)
		}
		done := alice.until(fleet[2].URL, created.TaskID, func(v taskView) bool { return v.Status == "completed" }, "completed")
		if done.Result == nil || len(done.Result.Content) == 0 || done.Result.Content[0].Text != "2 answers, last two" {
			t.Fatalf("completed task %+v", done)
		}
	})

	t.Run("TypeScript SDK, owner stopped", func(t *testing.T) {
		up := startServerEverything(t)
		fleet := durableFleet(t, "\t\tupstream "+up+" {\n\t\t\tera legacy\n\t\t}\n\t\ttask trigger-elicitation-request required 0\n\t\ttask_lease 1h")
		alice := &taskClient{t: t, auth: "Bearer alice"}
		created := parseTask(t, alice.call(fleet[0].URL, "trigger-elicitation-request"))
		asked := alice.until(fleet[0].URL, created.TaskID, func(v taskView) bool { return v.Status == "input_required" }, "input_required")
		fleet[0].stop(t)
		if x := alice.answerTask(fleet[1].URL, asked, "name", "Ada Durable"); x.Resp == nil || x.Resp.Error != nil {
			t.Fatalf("tasks/update after the owner stopped (a lease of 1h: no wait): %s", x)
		}
		done := alice.until(fleet[1].URL, created.TaskID, func(v taskView) bool { return v.Status == "completed" }, "completed")
		if done.Result == nil || len(done.Result.Content) == 0 || !strings.Contains(fmt.Sprint(done.Result.Content), "Ada Durable") {
			t.Fatalf("completed task %+v", done)
		}
	})

	t.Run("not resumable, owner stopped", func(t *testing.T) {
		up, calls, _ := newTaskServer(t)
		fleet := durableFleet(t, "\t\tupstream "+up+" {\n\t\t\tera legacy\n\t\t}\n\t\ttask ask_later required 0")
		alice := &taskClient{t: t, auth: "Bearer alice"}
		created := parseTask(t, alice.call(fleet[0].URL, "ask_later"))
		wait(t, calls, 5*time.Second, "the call upstream")
		alice.until(fleet[0].URL, created.TaskID, func(v taskView) bool { return v.Status == "input_required" }, "input_required")
		fleet[0].stop(t)
		x := alice.task(fleet[1].URL, "tasks/get", created.TaskID, nil)
		if v := parseTask(t, x); v.Status != "failed" || !strings.Contains(string(x.Resp.Result), "instance running the task stopped") {
			t.Fatalf("tasks/get after the owner stopped: %s", x.Resp.Result)
		}
	})

	t.Run("not resumable, owner killed", func(t *testing.T) {
		up, calls, _ := newTaskServer(t)
		fleet := durableFleet(t, "\t\tupstream "+up+" {\n\t\t\tera legacy\n\t\t}\n\t\ttask ask_later required 0\n\t\ttask_lease 1s")
		alice := &taskClient{t: t, auth: "Bearer alice"}
		created := parseTask(t, alice.call(fleet[0].URL, "ask_later"))
		wait(t, calls, 5*time.Second, "the call upstream")
		alice.until(fleet[0].URL, created.TaskID, func(v taskView) bool { return v.Status == "input_required" }, "input_required")
		fleet[0].kill(t)
		var last rpcExchange
		waitFor(t, "the task failed once the lease lapsed", func() bool {
			last = alice.task(fleet[1].URL, "tasks/get", created.TaskID, nil)
			if last.Status >= 500 {
				t.Fatalf("tasks/get answered %s", last)
			}
			return parseTask(t, last).Status == "failed"
		})
		if !strings.Contains(string(last.Resp.Result), "instance running the task was lost") {
			t.Fatalf("failed task: %s", last.Resp.Result)
		}
	})
}

// rollingServer is a go-sdk server with an event store (a real SDK's
// resumable streams; the tools are ours, written for the test): `ask`
// asks one question (a form {answer}) and answers "got X"; `work` works
// until the test closes release, then answers "done".
func rollingServer(t *testing.T, release <-chan struct{}) string {
	t.Helper()
	server := mcp.NewServer(&mcp.Implementation{Name: "rolling", Version: "1"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "ask", Description: "Asks once."},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "Answer?", RequestedSchema: support.Form(map[string]any{"answer": map[string]any{"type": "string"}})})
			if err != nil {
				return nil, nil, err
			}
			return support.Text(fmt.Sprint("got ", res.Content["answer"])), nil, nil
		})
	mcp.AddTool(server, &mcp.Tool{Name: "work", Description: "Works until released."},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			select {
			case <-release:
				return support.Text("done"), nil, nil
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			}
		})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server },
		&mcp.StreamableHTTPOptions{EventStore: mcp.NewMemoryEventStore(nil)}))
	t.Cleanup(ts.Close)
	return ts.URL
}

// TestDurableRollingRestart: a rolling restart of a three-instance fleet
// (each instance stopped gracefully and started again, one at a time, as a
// deploy does) while 50 tasks run — 25 waiting for an answer, 25 working —
// loses none: after it, every question is answered through whichever
// instance, every working tool is released, and every task completes with
// its own result.
func TestDurableRollingRestart(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	up := rollingServer(t, release)
	block := "\t\tupstream " + up + " {\n\t\t\tera legacy\n\t\t}\n\t\ttask * required 0\n\t\ttask_lease 3s"
	ports := []int{freePort(t), freePort(t), freePort(t)}
	globals := "\tstorage file_system " + t.TempDir()
	fleet := make([]*gateway, len(ports))
	for i, port := range ports {
		fleet[i] = launchGateway(t, port, globals, "", fleetBlock(t, block, "peer", ports, i))
	}
	alice := &taskClient{t: t, auth: "Bearer alice"}
	const n = 50
	ids := make([]string, n)
	for i := range n {
		tool := []string{"ask", "work"}[i%2]
		ids[i] = parseTask(t, alice.call(fleet[i%3].URL, tool)).TaskID
	}
	for i := 0; i < n; i += 2 {
		alice.until(fleet[i%3].URL, ids[i], func(v taskView) bool { return v.Status == "input_required" }, "asking")
	}
	for i := range fleet {
		fleet[i].stop(t)
		// While it is down, the others answer for its tasks (and take
		// them over: it released its lease).
		for j, id := range ids {
			live := fleet[(i+1+j%2)%3]
			if v := parseTask(t, alice.task(live.URL, "tasks/get", id, nil)); v.Status == "failed" || v.Status == "cancelled" {
				t.Fatalf("task %d (%s) after instance %d stopped: %+v", j, id, i, v)
			}
		}
		fleet[i] = launchGateway(t, ports[i], globals, "", fleetBlock(t, block, "peer", ports, i))
	}
	for i := 0; i < n; i += 2 {
		g := fleet[(i/2)%3].URL
		v := alice.until(g, ids[i], func(v taskView) bool { return v.Status == "input_required" }, "asking after the restarts")
		if x := alice.answerTask(g, v, "answer", fmt.Sprint("a", i)); x.Resp == nil || x.Resp.Error != nil {
			t.Fatalf("task %d: tasks/update: %s", i, x)
		}
	}
	close(release)
	for i, id := range ids {
		want := "done"
		if i%2 == 0 {
			want = fmt.Sprint("got a", i)
		}
		v := alice.until(fleet[(i+1)%3].URL, id, func(v taskView) bool { return v.Status == "completed" || v.Status == "failed" }, "ended")
		if v.Status != "completed" || v.Result == nil || len(v.Result.Content) == 0 || v.Result.Content[0].Text != want {
			t.Fatalf("task %d: %+v, want completed with %q", i, v, want)
		}
	}
}

// startAskServer runs tests/node/ask-server.mjs (the TypeScript SDK 1.x's
// McpServer and transport, resumable with an event store; its tool ask
// asks `rounds` questions "Question i" and answers "N answers, last X").
func startAskServer(t *testing.T) string {
	t.Helper()
	port := freePort(t)
	cmd := exec.Command(nodeBin(t), filepath.Join(testsDir(t), "node", "ask-server.mjs"), fmt.Sprint(port))
	cmd.Dir = testsDir(t)
	u := fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
	startPeer(t, "ask-server", cmd).waitUp(t, u)
	return u
}
