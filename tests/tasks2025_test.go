package tests

// 2025 experimental tasks upstream: a legacy server
// that runs tasks itself (@modelcontextprotocol/sdk 1.x, tests/node/
// tasks2025-server.mjs) behind the gateway. Modern clients that declare the
// Tasks extension see 2026 tasks; the server's own tasks/result and
// tasks/list stay out of their reach.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// startTasks2025Server runs tests/node/tasks2025-server.mjs on 127.0.0.1
// and returns its URL.
func startTasks2025Server(t *testing.T) string {
	t.Helper()
	node := nodeBin(t)
	nodeFile(t, "@modelcontextprotocol/sdk/package.json")
	port := freePort(t)
	u := fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
	cmd := exec.Command(node, filepath.Join(testsDir(t), "node", "tasks2025-server.mjs"), fmt.Sprint(port))
	cmd.Dir = testsDir(t)
	startPeer(t, "tasks2025-server", cmd).waitUp(t, u)
	return u
}

// seenUpstream returns what the fixture at up was sent (GET /seen).
func seenUpstream(t *testing.T, up string) []string {
	t.Helper()
	resp, err := http.Get(strings.TrimSuffix(up, "/mcp") + "/seen")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var seen []string
	if err := json.NewDecoder(resp.Body).Decode(&seen); err != nil {
		t.Fatal(err)
	}
	return seen
}

// task2025View is a 2026 task as the client must see it: flat, integer
// milliseconds, none of the 2025 members.
type task2025View struct {
	taskView
	TTLMs          *int64          `json:"ttlMs"`
	PollIntervalMs *int64          `json:"pollIntervalMs"`
	Task           json.RawMessage `json:"task"`
	TTL            json.RawMessage `json:"ttl"`
	PollInterval   json.RawMessage `json:"pollInterval"`
	Error          *struct {
		Code    *int   `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func parseTask2025(t *testing.T, x rpcExchange) task2025View {
	t.Helper()
	var v task2025View
	if x.Resp == nil || x.Resp.Error != nil || json.Unmarshal(x.Resp.Result, &v) != nil || v.TaskID == "" {
		t.Fatalf("want a task, got %s", x)
	}
	if v.Task != nil || v.TTL != nil || v.PollInterval != nil || v.TTLMs == nil || *v.TTLMs <= 0 || v.PollIntervalMs == nil {
		t.Fatalf("not a flat 2026 task (ttlMs, pollIntervalMs; no task, ttl, pollInterval): %s", x.Resp.Result)
	}
	if *v.PollIntervalMs != 100 {
		// The fixture's tasks poll every 100 ms; the gateway's own, 1 s.
		t.Fatalf("pollIntervalMs %d, want the upstream's 100: not the upstream's task? %s", *v.PollIntervalMs, x.Resp.Result)
	}
	if strings.Contains(string(x.Resp.Result), "io.modelcontextprotocol/related-task") {
		t.Fatalf("related-task _meta reached the client: %s", x.Resp.Result)
	}
	return v
}

// until2025 polls tasks/get until the task reaches status.
func (c *taskClient) until2025(url, id, status string) task2025View {
	c.t.Helper()
	var last task2025View
	c.until(url, id, func(v taskView) bool { return v.Status == status }, status)
	last = parseTask2025(c.t, c.task(url, "tasks/get", id, nil))
	if last.Status != status {
		c.t.Fatalf("task left %s: %+v", status, last)
	}
	return last
}

func TestTasks2025(t *testing.T) {
	t.Parallel()
	up := startTasks2025Server(t)
	g := startGateway(t, upstreamBlock(up, "legacy"))
	alice := &taskClient{t: t, auth: "Bearer alice"}
	bob := &taskClient{t: t, auth: "Bearer bob"}
	callTool := func(c *taskClient, tool string, args map[string]any, caps map[string]any) rpcExchange {
		t.Helper()
		return c.send(g.URL, "tools/call", tool, map[string]any{"name": tool, "arguments": args}, caps)
	}

	// server/discover advertises the extension, and not the 2025 tasks.
	x := alice.send(g.URL, "server/discover", "", map[string]any{}, taskCaps())
	if x.Resp == nil || x.Resp.Error != nil {
		t.Fatalf("server/discover: %s", x)
	}
	var disc struct {
		Capabilities map[string]json.RawMessage `json:"capabilities"`
	}
	_ = json.Unmarshal(x.Resp.Result, &disc)
	if _, has := disc.Capabilities["tasks"]; has || !strings.Contains(string(disc.Capabilities["extensions"]), `"io.modelcontextprotocol/tasks"`) {
		t.Fatalf("server/discover capabilities %s: want the Tasks extension and no tasks", x.Resp.Result)
	}
	// No tools/list first: the gateway lists the tools itself to learn
	// their taskSupport (TestTasks2025Fleet lists them through it).

	t.Run("completed", func(t *testing.T) {
		created := parseTask2025(t, callTool(alice, "slow_task", map[string]any{"seconds": 1}, taskCaps()))
		if created.ResultType != "task" || created.Status != "working" {
			t.Fatalf("CreateTaskResult %+v", created)
		}
		if v := parseTask2025(t, alice.task(g.URL, "tasks/get", created.TaskID, nil)); v.TaskID != created.TaskID || v.ResultType != "complete" {
			t.Fatalf("tasks/get %+v", v)
		}
		done := alice.until2025(g.URL, created.TaskID, "completed")
		if done.Result == nil || len(done.Result.Content) == 0 || done.Result.Content[0].Text != "Done after 1s" {
			t.Fatalf("completed task %+v, want the upstream's result", done)
		}
		// Another principal sees no such task.
		wantRPCError(t, bob.task(g.URL, "tasks/get", created.TaskID, nil), -32602, "bob's tasks/get")
		// Cancelling a finished task: the empty ack, and it stays completed.
		x := alice.task(g.URL, "tasks/cancel", created.TaskID, nil)
		if x.Resp == nil || x.Resp.Error != nil || string(x.Resp.Result) != `{"resultType":"complete"}` {
			t.Fatalf("tasks/cancel of a completed task: %s", x)
		}
		alice.until2025(g.URL, created.TaskID, "completed")
	})

	t.Run("failed", func(t *testing.T) {
		created := parseTask2025(t, callTool(alice, "failing_task", map[string]any{}, taskCaps()))
		v := alice.until2025(g.URL, created.TaskID, "failed")
		if v.Error == nil || v.Error.Code == nil || !strings.Contains(v.Error.Message, "the job broke") || v.Result != nil {
			t.Fatalf("failed task %+v, want an error with the upstream's text and no result", v)
		}
	})

	t.Run("cancelled", func(t *testing.T) {
		created := parseTask2025(t, callTool(alice, "slow_task", map[string]any{"seconds": 60}, taskCaps()))
		wantRPCError(t, bob.task(g.URL, "tasks/cancel", created.TaskID, nil), -32602, "bob's tasks/cancel")
		x := alice.task(g.URL, "tasks/cancel", created.TaskID, nil)
		if x.Resp == nil || x.Resp.Error != nil || string(x.Resp.Result) != `{"resultType":"complete"}` {
			t.Fatalf("tasks/cancel: want the empty ack, got %s", x)
		}
		if v := parseTask2025(t, alice.task(g.URL, "tasks/get", created.TaskID, nil)); v.Status != "cancelled" {
			t.Fatalf("after tasks/cancel: %+v", v)
		}
		// The upstream was sent tasks/cancel, once, for the task whose
		// tasks/result the gateway holds.
		var cancels []string
		results := map[string]bool{}
		for _, m := range seenUpstream(t, up) {
			if id, ok := strings.CutPrefix(m, "tasks/cancel "); ok {
				cancels = append(cancels, id)
			}
			if id, ok := strings.CutPrefix(m, "tasks/result "); ok {
				results[id] = true
			}
		}
		if len(cancels) != 1 || !results[cancels[0]] {
			t.Fatalf("upstream tasks/cancel %v (tasks/result for %v): want one, for the task", cancels, results)
		}
	})

	t.Run("input_required", func(t *testing.T) {
		created := parseTask2025(t, callTool(alice, "ask_task", map[string]any{"filename": "a.txt"}, taskCaps()))
		asked := alice.until2025(g.URL, created.TaskID, "input_required")
		if len(asked.InputRequests) != 1 {
			t.Fatalf("inputRequests %v, want one", asked.InputRequests)
		}
		var key string
		var req struct {
			Method string `json:"method"`
			Params struct {
				Message string `json:"message"`
			} `json:"params"`
		}
		for k, raw := range asked.InputRequests {
			key = k
			_ = json.Unmarshal(raw, &req)
		}
		if req.Method != "elicitation/create" || req.Params.Message != "Delete a.txt?" {
			t.Fatalf("input request %s", asked.InputRequests[key])
		}
		// An unknown key is ignored; the question stays.
		x := alice.task(g.URL, "tasks/update", created.TaskID, map[string]any{"inputResponses": map[string]any{"unknown-key": map[string]any{"ignored": true}}})
		if x.Resp == nil || x.Resp.Error != nil || string(x.Resp.Result) != `{"resultType":"complete"}` {
			t.Fatalf("tasks/update with an unknown key: %s", x)
		}
		alice.until2025(g.URL, created.TaskID, "input_required")
		x = alice.task(g.URL, "tasks/update", created.TaskID, map[string]any{"inputResponses": map[string]any{
			key: map[string]any{"action": "accept", "content": map[string]any{"confirm": true}}}})
		if x.Resp == nil || x.Resp.Error != nil || string(x.Resp.Result) != `{"resultType":"complete"}` {
			t.Fatalf("tasks/update: %s", x)
		}
		done := alice.until2025(g.URL, created.TaskID, "completed")
		if done.Result == nil || len(done.Result.Content) == 0 || done.Result.Content[0].Text != "Deleted a.txt" {
			t.Fatalf("completed task %+v, want Deleted a.txt", done)
		}
	})

	t.Run("no task", func(t *testing.T) {
		// Without the extension an optional tool runs as a plain call.
		x := callTool(alice, "slow_task", map[string]any{"seconds": 0}, map[string]any{})
		if x.Resp == nil || x.Resp.Error != nil || !strings.Contains(string(x.Resp.Result), "Done after 0s") || strings.Contains(string(x.Resp.Result), `"taskId"`) {
			t.Fatalf("slow_task without the extension: %s", x)
		}
		// A modern client's own 2025 params.task is not passed on.
		x = alice.send(g.URL, "tools/call", "echo", map[string]any{"name": "echo", "arguments": map[string]any{"text": "hi"},
			"task": map[string]any{"ttl": 60000}}, taskCaps())
		if x.Resp == nil || x.Resp.Error != nil || !strings.Contains(string(x.Resp.Result), `"text":"hi"`) || strings.Contains(string(x.Resp.Result), `"task"`) {
			t.Fatalf("echo with a 2025 params.task: %s", x)
		}
		// The upstream's tasks/result and tasks/list are not the client's.
		for _, m := range []string{"tasks/result", "tasks/list"} {
			wantRPCError(t, alice.send(g.URL, m, "", map[string]any{"taskId": "x"}, taskCaps()), -32601, m)
		}
		for _, m := range seenUpstream(t, up) {
			if m == "tasks/result x" || strings.HasPrefix(m, "tasks/list") {
				t.Fatalf("a modern client's %s reached the upstream", m)
			}
		}
	})
}

// TestTasks2025LegacyClient: a 2025 client using the TypeScript SDK 1.x's
// experimental tasks API (callToolStream) through the gateway's pinned
// pass-through keeps working with the upstream's 2025 tasks: it sees the
// server's tasks capability, gets a task, polls it, answers the question
// delivered on tasks/result, and reads the result.
func TestTasks2025LegacyClient(t *testing.T) {
	t.Parallel()
	up := startTasks2025Server(t)
	g := startGateway(t, upstreamBlock(up, "legacy"))
	for _, c := range []struct {
		tool, args, text string
		elicitations     int
	}{
		{"slow_task", `{"seconds":1}`, "Done after 1s", 0},
		{"ask_task", `{"filename":"b.txt"}`, "Deleted b.txt", 1},
	} {
		out, err := runNodeScript(t, "tasks2025-client.mjs", g.URL, c.tool, c.args)
		if err != nil {
			t.Fatal(err)
		}
		var got struct {
			ServerTasks  bool
			Types        []string
			Elicitations int
			TaskID       *string
			Result       *struct {
				Content []struct{ Text string }
			}
			Error *string
		}
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("%s: %v", out, err)
		}
		if !got.ServerTasks || got.TaskID == nil || len(got.Types) < 2 || got.Types[0] != "taskCreated" || got.Types[len(got.Types)-1] != "result" {
			t.Fatalf("%s: want the server's tasks, a task created, then its result: %s", c.tool, out)
		}
		if got.Error != nil || got.Result == nil || len(got.Result.Content) == 0 || got.Result.Content[0].Text != c.text || got.Elicitations != c.elicitations {
			t.Fatalf("%s: want %q after %d elicitation(s): %s", c.tool, c.text, c.elicitations, out)
		}
	}
}

// TestTasks2025Fleet: an upstream's task lives on the instance holding its
// upstream session; its taskId (which wraps the upstream's task id and
// session) names that owner, so tasks/get and tasks/update sent to other
// instances reach it, and another principal sees nothing anywhere.
func TestTasks2025Fleet(t *testing.T) {
	t.Parallel()
	up := startTasks2025Server(t)
	fleet := startFleet(t, upstreamBlock(up, "legacy"), "peer")
	alice := &taskClient{t: t, auth: "Bearer alice"}
	bob := &taskClient{t: t, auth: "Bearer bob"}
	if x := alice.send(fleet[0].URL, "tools/list", "", map[string]any{}, taskCaps()); x.Resp == nil || x.Resp.Error != nil {
		t.Fatalf("tools/list: %s", x)
	}
	created := parseTask2025(t, alice.send(fleet[0].URL, "tools/call", "ask_task",
		map[string]any{"name": "ask_task", "arguments": map[string]any{"filename": "c.txt"}}, taskCaps()))
	asked := alice.until2025(fleet[1].URL, created.TaskID, "input_required")
	for _, g := range fleet {
		wantRPCError(t, bob.task(g.URL, "tasks/get", created.TaskID, nil), -32602, "another principal's tasks/get")
	}
	var key string
	for k := range asked.InputRequests {
		key = k
	}
	x := alice.task(fleet[2].URL, "tasks/update", created.TaskID, map[string]any{"inputResponses": map[string]any{
		key: map[string]any{"action": "accept", "content": map[string]any{"confirm": true}}}})
	if x.Resp == nil || x.Resp.Error != nil || string(x.Resp.Result) != `{"resultType":"complete"}` {
		t.Fatalf("tasks/update through another instance: %s", x)
	}
	done := alice.until2025(fleet[1].URL, created.TaskID, "completed")
	if done.Result == nil || len(done.Result.Content) == 0 || done.Result.Content[0].Text != "Deleted c.txt" {
		t.Fatalf("completed task %+v, want Deleted c.txt", done)
	}
}

// TestTasks2025Conformance runs the conformance suite's tasks-* scenarios
// through the gateway in front of the 2025 fixture, whose tools are 2025
// task tools (tests/node/tasks2025-server.mjs): each must run and pass.
// tasks-mrtr-composition's tool asks before any task exists, so it is a
// plain tool of the fixture's that the gateway's `task` policy hosts (the
// gateway's own tasks, beside the upstream's).
func TestTasks2025Conformance(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("needs Node and the conformance suite; skipped with -short")
	}
	nodeBin(t)
	requireLocalhostIPv4(t)
	up := startTasks2025Server(t)
	g := startGateway(t, upstreamBlock(up, "legacy")+"\n\t\ttask test_tool_with_task required 300ms")
	url := localhostURL(t, g.URL)
	for _, name := range tasksScenarios {
		rep := conformance(t, url, "", conformanceWant{MinScored: 1}, "--scenario", name)
		s, ok := rep.Scenarios[name]
		if !ok {
			t.Errorf("%s did not run", name)
			continue
		}
		statuses := map[string]int{}
		for _, c := range s.Checks {
			statuses[c.Status]++
		}
		t.Logf("%s: %d checks %v", name, len(s.Checks), statuses)
	}
	var tasks int
	for _, m := range seenUpstream(t, up) {
		if strings.HasPrefix(m, "tasks/result ") {
			tasks++
		}
	}
	if tasks == 0 {
		t.Fatal("no task of the upstream's own ran (no tasks/result reached it)")
	}
}
