package tests

// Gateway-hosted tasks (the Tasks extension
// io.modelcontextprotocol/tasks) for a legacy server that knows nothing of
// tasks: tests/legacyfixture's plain in-line tools behind a `task` policy.

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/tests/support"
)

// taskPolicy is the Caddyfile policy that passes every tasks-* scenario
// in front of tests/legacyfixture (see its tasks.go).
const taskPolicy = `		task greet forbidden
		task slow_compute optional 200ms
		task failing_job required
		task protocol_error_job required
		task confirm_delete optional 0
		task multi_input optional 0
		task test_tool_with_task required 300ms
`

// startTaskGateway starts tests/legacyfixture and a gateway in front of it
// with taskPolicy and the extra Caddyfile lines; it returns the gateway
// and the fixture's URL.
func startTaskGateway(t *testing.T, extra string) (*gateway, string) {
	t.Helper()
	bin := buildGoBinary(t, "./tests/legacyfixture")
	port := freePort(t)
	upstream := fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
	p := startPeer(t, "legacyfixture", exec.Command(bin, "-addr", fmt.Sprintf("127.0.0.1:%d", port)))
	p.waitUp(t, upstream)
	g := startGateway(t, "\t\tupstream "+upstream+" {\n\t\t\tera legacy\n\t\t}\n"+taskPolicy+extra)
	return g, upstream
}

// TestConformanceTasks runs every tasks-* scenario of the conformance
// suite, one by one, through the gateway in front of the legacy fixture
// with the task policy: each must run and pass. tasks-status-notifications
// is a stub of the suite's that reports only SKIPPED checks: it must run
// and show just that.
func TestConformanceTasks(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("needs Node and the conformance suite; skipped with -short")
	}
	nodeBin(t)
	requireLocalhostIPv4(t)
	g, _ := startTaskGateway(t, "")
	url := localhostURL(t, g.URL)
	for _, name := range append(slices.Clone(tasksScenarios), "tasks-status-notifications") {
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
		t.Logf("%s: %d checks %v in %v", name, len(s.Checks), statuses, rep.Duration.Round(1e6))
		if name == "tasks-status-notifications" && (len(s.Checks) == 0 || statuses["SKIPPED"] != len(s.Checks)) {
			t.Errorf("%s: want only SKIPPED checks (the suite's stub), got %v", name, statuses)
		}
	}
}

// newTaskServer is a legacy go-sdk server written for the task tests (no
// published server has tools with these timings):
//
//   - `ask_later` works 300 ms, asks a name (a form {name}) in-line, and
//     answers "Hi {name}";
//   - `work` works until cancelled.
//
// calls gets each tool's name when a call starts, ended its name and how
// it ended ("done" or "cancelled").
func newTaskServer(t *testing.T) (url string, calls, ended <-chan string) {
	t.Helper()
	started, done := make(chan string, 32), make(chan string, 32)
	server := mcp.NewServer(&mcp.Implementation{Name: "task-test-server", Version: "1"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "ask_later", Description: "Works 300ms, asks a name, answers Hi {name}."},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			started <- "ask_later"
			time.Sleep(300 * time.Millisecond)
			res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "Your name?", RequestedSchema: support.Form(map[string]any{"name": map[string]any{"type": "string"}})})
			if err != nil {
				done <- "ask_later: cancelled"
				return nil, nil, err
			}
			done <- "ask_later: done"
			return support.Text(fmt.Sprint("Hi ", res.Content["name"])), nil, nil
		})
	mcp.AddTool(server, &mcp.Tool{Name: "work", Description: "Works until cancelled."},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			started <- "work"
			<-ctx.Done()
			done <- "work: cancelled"
			return nil, nil, ctx.Err()
		})
	return support.ServeMCP(t, server, nil), started, done
}

// taskCaps are client capabilities declaring elicitation and the Tasks
// extension.
func taskCaps() map[string]any {
	return map[string]any{"elicitation": map[string]any{}, "extensions": map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}}
}

// taskClient sends modern requests as one principal (its Authorization).
type taskClient struct {
	t    *testing.T
	auth string
	id   int
}

// send POSTs method with params to url (Mcp-Name: name), declaring caps.
func (c *taskClient) send(url, method, name string, params map[string]any, caps map[string]any) rpcExchange {
	c.t.Helper()
	c.id++
	m := meta(modernVersion)
	m["io.modelcontextprotocol/clientCapabilities"] = caps
	params["_meta"] = m
	hdr := modernHeaders(modernVersion, method, name)
	hdr["Authorization"] = c.auth
	return postRPC(c.t, url, hdr, rpcBody(c.t, c.id, method, params), c.id)
}

// call starts tool on url.
func (c *taskClient) call(url, tool string) rpcExchange {
	c.t.Helper()
	return c.send(url, "tools/call", tool, map[string]any{"name": tool, "arguments": map[string]any{}}, taskCaps())
}

// task sends tasks/get, tasks/update or tasks/cancel for id to url.
func (c *taskClient) task(url, method, id string, extra map[string]any) rpcExchange {
	c.t.Helper()
	params := map[string]any{"taskId": id}
	maps.Copy(params, extra)
	return c.send(url, method, id, params, taskCaps())
}

// taskView is a CreateTaskResult or a tasks/get result as the tests read it.
type taskView struct {
	ResultType    string                     `json:"resultType"`
	TaskID        string                     `json:"taskId"`
	Status        string                     `json:"status"`
	InputRequests map[string]json.RawMessage `json:"inputRequests"`
	Result        *struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	} `json:"result"`
}

func parseTask(t *testing.T, x rpcExchange) taskView {
	t.Helper()
	var v taskView
	if x.Resp == nil || x.Resp.Error != nil || json.Unmarshal(x.Resp.Result, &v) != nil || v.TaskID == "" {
		t.Fatalf("want a task, got %s", x)
	}
	return v
}

// until polls tasks/get for id on url until cond holds (5 s at most).
func (c *taskClient) until(url, id string, cond func(taskView) bool, what string) taskView {
	c.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		v := parseTask(c.t, c.task(url, "tasks/get", id, nil))
		if cond(v) {
			return v
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("task never %s; last seen %+v", what, v)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// wantRPCError checks that x is a JSON-RPC error with code.
func wantRPCError(t *testing.T, x rpcExchange, code int, what string) {
	t.Helper()
	if x.Resp == nil || x.Resp.Error == nil || x.Resp.Error.Code != code {
		t.Fatalf("%s: want error %d, got %s", what, code, x)
	}
}

// TestFleetTasks: a task lives on the instance that holds its upstream
// call; tasks/get, tasks/update and tasks/cancel sent to the other
// instances of a fleet reach it (the signed relay), and another principal
// sees no such task (-32602), wherever it asks.
func TestFleetTasks(t *testing.T) {
	t.Parallel()
	up, calls, ended := newTaskServer(t)
	policy := "\n\t\ttask ask_later optional 0\n\t\ttask work optional 0"
	fleet := startFleet(t, "\t\tupstream "+up+" {\n\t\t\tera legacy\n\t\t}"+policy, "peer")
	alice := &taskClient{t: t, auth: "Bearer alice"}
	bob := &taskClient{t: t, auth: "Bearer bob"}

	created := parseTask(t, alice.call(fleet[0].URL, "ask_later"))
	if created.ResultType != "task" || created.Status != "working" {
		t.Fatalf("CreateTaskResult %+v", created)
	}
	wait(t, calls, 5*time.Second, "the call upstream")
	asked := alice.until(fleet[1].URL, created.TaskID, func(v taskView) bool { return v.Status == "input_required" }, "input_required")
	if len(asked.InputRequests) != 1 {
		t.Fatalf("inputRequests %v, want one", asked.InputRequests)
	}
	for _, g := range fleet {
		wantRPCError(t, bob.task(g.URL, "tasks/get", created.TaskID, nil), -32602, "another principal's tasks/get")
		wantRPCError(t, bob.task(g.URL, "tasks/cancel", created.TaskID, nil), -32602, "another principal's tasks/cancel")
	}
	var key string
	for k := range asked.InputRequests {
		key = k
	}
	ack := alice.task(fleet[2].URL, "tasks/update", created.TaskID, map[string]any{"inputResponses": map[string]any{
		key: map[string]any{"action": "accept", "content": map[string]any{"name": "Alice"}}}})
	if ack.Resp == nil || ack.Resp.Error != nil || string(ack.Resp.Result) != `{"resultType":"complete"}` {
		t.Fatalf("tasks/update through another instance: %s", ack)
	}
	done := alice.until(fleet[1].URL, created.TaskID, func(v taskView) bool { return v.Status == "completed" }, "completed")
	if done.Result == nil || len(done.Result.Content) == 0 || done.Result.Content[0].Text != "Hi Alice" {
		t.Fatalf("completed task %+v, want Hi Alice", done)
	}
	if got := wait(t, ended, 5*time.Second, "end of ask_later"); got != "ask_later: done" {
		t.Fatalf("upstream: %s", got)
	}

	// tasks/cancel through another instance cancels the call upstream.
	working := parseTask(t, alice.call(fleet[0].URL, "work"))
	wait(t, calls, 5*time.Second, "the work call upstream")
	if x := alice.task(fleet[2].URL, "tasks/cancel", working.TaskID, nil); x.Resp == nil || x.Resp.Error != nil {
		t.Fatalf("tasks/cancel: %s", x)
	}
	if got := wait(t, ended, 5*time.Second, "the upstream's cancellation"); got != "work: cancelled" {
		t.Fatalf("upstream: %s", got)
	}
	if v := parseTask(t, alice.task(fleet[1].URL, "tasks/get", working.TaskID, nil)); v.Status != "cancelled" {
		t.Fatalf("after tasks/cancel: %+v", v)
	}
}

// TestTaskLimits: max_tasks_per_principal refuses a principal's next call
// that may become a task (429, -32603, the option named) before it reaches
// the upstream, leaving other principals alone; max_tasks refuses
// everybody's (503); task_ttl ends a task's life (a running one is
// cancelled upstream; then tasks/get says -32602); a required tool's call
// without the extension gets -32021 and never reaches the upstream.
func TestTaskLimits(t *testing.T) {
	t.Parallel()
	up, calls, ended := newTaskServer(t)
	g := startGateway(t, "\t\tupstream "+up+" {\n\t\t\tera legacy\n\t\t}\n\t\ttask work optional 0\n\t\ttask ask_later required"+
		"\n\t\tmax_tasks 2\n\t\tmax_tasks_per_principal 1\n\t\ttask_ttl 2s")
	alice := &taskClient{t: t, auth: "Bearer alice"}
	bob := &taskClient{t: t, auth: "Bearer bob"}
	carol := &taskClient{t: t, auth: "Bearer carol"}

	x := alice.send(g.URL, "tools/call", "ask_later", map[string]any{"name": "ask_later", "arguments": map[string]any{}}, map[string]any{"elicitation": map[string]any{}})
	wantRPCError(t, x, -32021, "a required tool without the extension")
	if !strings.Contains(string(x.Resp.Error.Data), `"io.modelcontextprotocol/tasks"`) {
		t.Fatalf("-32021 data %s, want requiredCapabilities naming the extension", x.Resp.Error.Data)
	}

	first := parseTask(t, alice.call(g.URL, "work"))
	wait(t, calls, 5*time.Second, "alice's call upstream")
	x = alice.call(g.URL, "work")
	wantRPCError(t, x, -32603, "alice's second task")
	if x.Status != http.StatusTooManyRequests || !strings.Contains(x.Resp.Error.Message, "max_tasks_per_principal") {
		t.Fatalf("alice's second task: %s", x)
	}
	parseTask(t, bob.call(g.URL, "work"))
	wait(t, calls, 5*time.Second, "bob's call upstream")
	x = carol.call(g.URL, "work")
	wantRPCError(t, x, -32603, "carol's task with max_tasks held")
	if x.Status != http.StatusServiceUnavailable || !strings.Contains(x.Resp.Error.Message, "max_tasks") {
		t.Fatalf("carol's task: %s", x)
	}
	// Neither refused call, nor the one without the extension, was sent.
	select {
	case c := <-calls:
		t.Fatalf("a refused call reached the upstream: %s", c)
	default:
	}

	// task_ttl: both running tasks are cancelled upstream, and forgotten.
	for range 2 {
		if got := wait(t, ended, 5*time.Second, "the end of a task at its ttl"); got != "work: cancelled" {
			t.Fatalf("upstream: %s", got)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		x = alice.task(g.URL, "tasks/get", first.TaskID, nil)
		if x.Resp != nil && x.Resp.Error != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the task outlived its ttl: %s", x)
		}
		time.Sleep(100 * time.Millisecond)
	}
	wantRPCError(t, x, -32602, "tasks/get after the ttl")
	// The places are free again.
	parseTask(t, carol.call(g.URL, "work"))
}
