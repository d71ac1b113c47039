package forward

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
	"github.com/tidwall/gjson"
)

// fake2025 is a legacy server with 2025 experimental tasks, written for
// these engine tests (run them with -race): the TypeScript SDK 1.x server
// the end-to-end tests use (tests/tasks2025_test.go) needs Node. Like it,
// it answers a task-augmented tools/call with a CreateTaskResult and
// delivers a task's question only on tasks/result. Tools (both
// taskSupport optional):
//
//   - ask: tasks/result asks {x} in-line (related-task _meta), then answers
//     "got {x}";
//   - hang: tasks/result never even sends its headers;
//   - must (taskSupport required): as hang;
//   - flaky: as ask, but its first tasks/result stream ends empty;
//   - dead: every tasks/result stream ends empty;
//   - slowcreate: tools/call sends a ping, then its CreateTaskResult
//     only once release is closed.
type fake2025 struct {
	mu      sync.Mutex
	n       int
	tasks   map[string]*fakeTask
	cancels chan string
	quit    chan struct{} // ends the hung tasks/result (closed at the test's end)
	calls   []string      // the tools/call names it got
	holding chan struct{} // the bridge answered a slowcreate call's ping
	release chan struct{} // closed: slowcreate answers
}

type fakeTask struct {
	tool, status string
	answer       chan json.RawMessage // the response to its question
	results      int                  // tasks/result calls
}

func newFake2025(t *testing.T) (string, *fake2025) {
	t.Helper()
	f := &fake2025{tasks: map[string]*fakeTask{}, cancels: make(chan string, 16), quit: make(chan struct{}),
		holding: make(chan struct{}, 1), release: make(chan struct{})}
	ts := httptest.NewServer(f)
	t.Cleanup(ts.Close)
	return ts.URL + "/mcp", f
}

func (f *fake2025) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodDelete {
		return
	}
	if r.Method != http.MethodPost {
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			TaskID string `json:"taskId"`
			Name   string `json:"name"`
		} `json:"params"`
		Result json.RawMessage `json:"result"`
	}
	if json.NewDecoder(r.Body).Decode(&m) != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	if m.Method == "" || m.ID == nil { // a response (the question's id is the task's) or a notification
		if m.Method == "" && string(m.ID) == `"ping-1"` {
			f.holding <- struct{}{}
		} else if m.Method == "" {
			f.mu.Lock()
			ft := f.tasks[strings.Trim(string(m.ID), `"`)]
			f.mu.Unlock()
			if ft != nil {
				ft.answer <- m.Result
			}
		}
		w.WriteHeader(http.StatusAccepted)
		return
	}
	reply := func(result string) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Mcp-Session-Id", "sess-1")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":%s}`, m.ID, result)
	}
	f.mu.Lock()
	ft := f.tasks[m.Params.TaskID]
	f.mu.Unlock()
	taskObj := func(id string) string {
		f.mu.Lock()
		defer f.mu.Unlock()
		return fmt.Sprintf(`{"taskId":%q,"status":%q,"ttl":60000,"pollInterval":50,"createdAt":"2026-01-02T03:04:05Z","lastUpdatedAt":"2026-01-02T03:04:05Z"}`, id, f.tasks[id].status)
	}
	switch m.Method {
	case "initialize":
		reply(`{"protocolVersion":"2025-11-25","capabilities":{"tools":{},"tasks":{"requests":{"tools":{"call":{}}},"cancel":{}}},"serverInfo":{"name":"fake2025","version":"1"}}`)
	case "tools/list":
		reply(`{"tools":[{"name":"ask","inputSchema":{"type":"object"},"execution":{"taskSupport":"optional"}},` +
			`{"name":"hang","inputSchema":{"type":"object"},"execution":{"taskSupport":"optional"}},` +
			`{"name":"must","inputSchema":{"type":"object"},"execution":{"taskSupport":"required"}}]}`)
	case "tools/call":
		f.mu.Lock()
		f.calls = append(f.calls, m.Params.Name)
		f.n++
		id := fmt.Sprintf("up-%d", f.n)
		f.tasks[id] = &fakeTask{tool: m.Params.Name, status: "working", answer: make(chan json.RawMessage, 1)}
		f.mu.Unlock()
		if m.Params.Name == "slowcreate" {
			w.Header().Set("Content-Type", "text/event-stream")
			w.Header().Set("Mcp-Session-Id", "sess-1")
			// A ping first: its answer tells the test the bridge reads
			// the call's stream.
			fmt.Fprint(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":\"ping-1\",\"method\":\"ping\"}\n\n")
			w.(http.Flusher).Flush()
			select {
			case <-f.release:
			case <-f.quit:
				return
			}
			fmt.Fprintf(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"task\":%s}}\n\n", m.ID, taskObj(id))
			return
		}
		reply(`{"task":` + taskObj(id) + `}`)
	case "tasks/get":
		if ft == nil {
			reply(`{}`)
			return
		}
		reply(taskObj(m.Params.TaskID))
	case "tasks/cancel":
		if ft != nil {
			f.mu.Lock()
			ft.status = "cancelled"
			f.mu.Unlock()
			f.cancels <- m.Params.TaskID
			reply(taskObj(m.Params.TaskID))
		}
	case "tasks/result":
		f.mu.Lock()
		if ft != nil {
			ft.results++
		}
		empty := ft != nil && (ft.tool == "dead" || ft.tool == "flaky" && ft.results == 1)
		f.mu.Unlock()
		if empty {
			w.Header().Set("Content-Type", "text/event-stream")
			return
		}
		if ft == nil || (ft.tool != "ask" && ft.tool != "flaky") {
			select {
			case <-r.Context().Done():
			case <-f.quit:
			}
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Mcp-Session-Id", "sess-1")
		related := fmt.Sprintf(`"_meta":{"io.modelcontextprotocol/related-task":{"taskId":%q}}`, m.Params.TaskID)
		fmt.Fprintf(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":%q,\"method\":\"elicitation/create\",\"params\":{\"message\":\"x?\",\"requestedSchema\":{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"string\"}}},%s}}\n\n", m.Params.TaskID, related)
		w.(http.Flusher).Flush()
		var answer json.RawMessage
		select {
		case answer = <-ft.answer:
		case <-r.Context().Done():
			return
		}
		f.mu.Lock()
		ft.status = "completed"
		f.mu.Unlock()
		text := "got " + gjson.GetBytes(answer, "content.x").String()
		fmt.Fprintf(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"content\":[{\"type\":\"text\",\"text\":%q}],%s}}\n\n", m.ID, text, related)
	}
}

// modernReq builds a validated modern request declaring elicitation and the
// Tasks extension.
func modernReq(t *testing.T, upstream, principal string, id int, method, name, params string) Request {
	t.Helper()
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":{%s,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",`+
		`"io.modelcontextprotocol/clientCapabilities":{"elicitation":{},"extensions":{"io.modelcontextprotocol/tasks":{}}}}}}`, id, method, params)
	h := http.Header{"Mcp-Protocol-Version": {translate.ModernVersion}, "Mcp-Method": {method}, "Mcp-Name": {name}}
	req, rerr := translate.ValidateModern(http.MethodPost, h, []byte(body), nil)
	if rerr != nil {
		t.Fatalf("invalid test request %s: %v", body, rerr)
	}
	return Request{Target: translate.Target{Upstream: upstream, GetStream: translate.GetStreamOff}, Principal: translate.PrincipalHash(principal), ModernRequest: req}
}

// pollTask sends tasks/get for id until cond holds (5 s at most).
func pollTask(t *testing.T, b *Bridge, upstream, principal, id string, cond func(gjson.Result) bool) gjson.Result {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for n := 0; ; n++ {
		a := serve(b, modernReq(t, upstream, principal, 1000+n, "tasks/get", id, fmt.Sprintf(`"taskId":%q`, id)))
		res := gjson.GetBytes(a.final, "result")
		if cond(res) {
			return res
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s: last tasks/get %s", id, a.final)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestTask2025Engine: several principals' tasks at once, each asking a
// question delivered on tasks/result, answered with tasks/update.
func TestTask2025Engine(t *testing.T) {
	upstream, _ := newFake2025(t)
	b := newTestBridge(t, time.Minute)
	for n := range 6 {
		b.support.learn(upstream, translate.PrincipalHash(fmt.Sprint("p", n)), []byte(`{"tools":[{"name":"ask","execution":{"taskSupport":"optional"}},{"name":"hang","execution":{"taskSupport":"optional"}}]}`))
	}
	var wg sync.WaitGroup
	for n := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			who := fmt.Sprint("p", n)
			a := serve(b, modernReq(t, upstream, who, 1, "tools/call", "ask", `"name":"ask","arguments":{}`))
			created := gjson.GetBytes(a.final, "result")
			id := created.Get("taskId").String()
			if created.Get("resultType").String() != "task" || id == "" || created.Get("pollIntervalMs").Int() != 50 || created.Get("task").Exists() {
				t.Errorf("CreateTaskResult %s", a.final)
				return
			}
			asked := pollTask(t, b, upstream, who, id, func(r gjson.Result) bool { return r.Get("status").String() == "input_required" })
			if strings.Contains(asked.Raw, "related-task") || asked.Get("inputRequests.*.method").String() != translate.MethodElicit {
				t.Errorf("input_required %s", asked.Raw)
				return
			}
			key := ""
			asked.Get("inputRequests").ForEach(func(k, _ gjson.Result) bool { key = k.String(); return false })
			if other := serve(b, modernReq(t, upstream, "intruder", 2, "tasks/get", id, fmt.Sprintf(`"taskId":%q`, id))); gjson.GetBytes(other.final, "error.code").Int() != jsonrpc.InvalidParams {
				t.Errorf("another principal's tasks/get: %s", other.final)
			}
			up := serve(b, modernReq(t, upstream, who, 3, "tasks/update", id,
				fmt.Sprintf(`"taskId":%q,"inputResponses":{%q:{"action":"accept","content":{"x":%q}}}`, id, key, who)))
			if gjson.GetBytes(up.final, "result").Raw != `{"resultType":"complete"}` {
				t.Errorf("tasks/update: %s", up.final)
				return
			}
			done := pollTask(t, b, upstream, who, id, func(r gjson.Result) bool { return r.Get("status").String() == "completed" })
			if done.Get("result.content.0.text").String() != "got "+who || strings.Contains(done.Raw, "related-task") {
				t.Errorf("completed %s", done.Raw)
			}
		}()
	}
	wg.Wait()
	if n := b.Tasks()[translate.TaskCompleted]; n != 6 {
		t.Fatalf("Tasks() = %v, want 6 completed", b.Tasks())
	}
	list := b.TaskList()
	if len(list) != 6 || list[0].Tool != "ask" || list[0].Upstream != upstream || list[0].Status != translate.TaskCompleted || list[0].TTLMillis != 60000 {
		t.Fatalf("TaskList() = %+v, want the 6 tasks (ttl the upstream's 60 s)", list)
	}
}

// TestTask2025CancelHung: a task whose tasks/result the upstream never
// answers (no headers) is cancelled at once by tasks/cancel (the upstream
// gets its tasks/cancel), and Close does not wait on the upstream.
func TestTask2025CancelHung(t *testing.T) {
	upstream, fake := newFake2025(t)
	b := newTestBridge(t, time.Minute)
	t.Cleanup(func() { close(fake.quit) }) // before the bridge's Close, should this test fail
	b.support.learn(upstream, translate.PrincipalHash("p"), []byte(`{"tools":[{"name":"hang","execution":{"taskSupport":"optional"}}]}`))
	ids := make([]string, 2)
	for i := range ids {
		a := serve(b, modernReq(t, upstream, "p", 1, "tools/call", "hang", `"name":"hang","arguments":{}`))
		if ids[i] = gjson.GetBytes(a.final, "result.taskId").String(); ids[i] == "" {
			t.Fatalf("CreateTaskResult %s", a.final)
		}
	}
	a := serve(b, modernReq(t, upstream, "p", 2, "tasks/cancel", ids[0], fmt.Sprintf(`"taskId":%q`, ids[0])))
	if gjson.GetBytes(a.final, "result").Raw != `{"resultType":"complete"}` {
		t.Fatalf("tasks/cancel: %s", a.final)
	}
	select {
	case got := <-fake.cancels:
		if got != "up-1" {
			t.Fatalf("upstream tasks/cancel for %s, want up-1", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the upstream got no tasks/cancel")
	}
	if st := pollTask(t, b, upstream, "p", ids[0], func(gjson.Result) bool { return true }); st.Get("status").String() != translate.TaskCancelled {
		t.Fatalf("after tasks/cancel: %s", st.Raw)
	}
	// The other task is still running; Close cancels it without waiting
	// for its tasks/result.
	closed := make(chan struct{})
	go func() { b.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close waits on a hung tasks/result")
	}
	select {
	case got := <-fake.cancels:
		if got != "up-2" {
			t.Fatalf("upstream tasks/cancel for %s, want up-2", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not cancel the running task upstream")
	}
}

// TestTask2025LearnsTools: a client need not list the tools first; the
// bridge lists them itself (once) to learn a tool's taskSupport, so an
// optional tool's call becomes the upstream's task and a required tool's
// call without the extension gets -32021 before it reaches the upstream.
func TestTask2025LearnsTools(t *testing.T) {
	upstream, fake := newFake2025(t)
	b := newTestBridge(t, time.Minute)
	t.Cleanup(func() { close(fake.quit) })
	r := modernReq(t, upstream, "p", 1, "tools/call", "must", `"name":"must","arguments":{}`)
	r.ClientCapabilities = []byte(`{"elicitation":{}}`)
	a := serve(b, r)
	if gjson.GetBytes(a.final, "error.code").Int() != jsonrpc.MissingRequiredClientCapability || a.status != http.StatusBadRequest {
		t.Fatalf("a required tool without the extension: %d %s", a.status, a.final)
	}
	a = serve(b, modernReq(t, upstream, "p", 2, "tools/call", "hang", `"name":"hang","arguments":{}`))
	if gjson.GetBytes(a.final, "result.resultType").String() != "task" || gjson.GetBytes(a.final, "result.pollIntervalMs").Int() != 50 {
		t.Fatalf("an optional tool never listed by the client: %s", a.final)
	}
	fake.mu.Lock()
	calls := fake.calls
	fake.mu.Unlock()
	if len(calls) != 1 || calls[0] != "hang" {
		t.Fatalf("tools/call upstream: %v, want just hang", calls)
	}
}

// TestTask2025ResultStreamEnds: a tasks/result stream that ends without
// the result is called again (the task and its question carry on); one
// that keeps ending fails the task after maxResultCalls calls.
func TestTask2025ResultStreamEnds(t *testing.T) {
	upstream, fake := newFake2025(t)
	b := newTestBridge(t, time.Minute)
	t.Cleanup(func() { close(fake.quit) })
	b.support.learn(upstream, translate.PrincipalHash("p"), []byte(`{"tools":[{"name":"flaky","execution":{"taskSupport":"optional"}},{"name":"dead","execution":{"taskSupport":"optional"}}]}`))

	a := serve(b, modernReq(t, upstream, "p", 1, "tools/call", "flaky", `"name":"flaky","arguments":{}`))
	id := gjson.GetBytes(a.final, "result.taskId").String()
	asked := pollTask(t, b, upstream, "p", id, func(r gjson.Result) bool { return r.Get("status").String() == "input_required" })
	key := ""
	asked.Get("inputRequests").ForEach(func(k, _ gjson.Result) bool { key = k.String(); return false })
	serve(b, modernReq(t, upstream, "p", 2, "tasks/update", id, fmt.Sprintf(`"taskId":%q,"inputResponses":{%q:{"action":"accept","content":{"x":"y"}}}`, id, key)))
	if done := pollTask(t, b, upstream, "p", id, func(r gjson.Result) bool { return translate.TaskTerminal(r.Get("status").String()) }); done.Get("result.content.0.text").String() != "got y" {
		t.Fatalf("after a broken tasks/result: %s", done.Raw)
	}

	a = serve(b, modernReq(t, upstream, "p", 3, "tools/call", "dead", `"name":"dead","arguments":{}`))
	id = gjson.GetBytes(a.final, "result.taskId").String()
	failed := pollTask(t, b, upstream, "p", id, func(r gjson.Result) bool { return translate.TaskTerminal(r.Get("status").String()) })
	if failed.Get("status").String() != translate.TaskFailed || !strings.Contains(failed.Get("error.message").String(), "without a result") {
		t.Fatalf("a tasks/result that keeps ending: %s", failed.Raw)
	}
	fake.mu.Lock()
	defer fake.mu.Unlock()
	for _, ft := range fake.tasks {
		if ft.tool == "dead" && ft.results != maxResultCalls {
			t.Fatalf("tasks/result called %d times for dead, want %d", ft.results, maxResultCalls)
		}
	}
}

// TestTask2025TTL: at the end of task_ttl a running upstream task is
// cancelled upstream and forgotten (-32602), and its place is free again.
func TestTask2025TTL(t *testing.T) {
	upstream, fake := newFake2025(t)
	b := limitedBridge(t, bridgeOptions(func(o *Options) {
		o.Tasks.TTL, o.Tasks.MaxTasksPerPrincipal = 200*time.Millisecond, 1
	}))
	t.Cleanup(func() { close(fake.quit) })
	b.support.learn(upstream, translate.PrincipalHash("p"), []byte(`{"tools":[{"name":"hang","execution":{"taskSupport":"optional"}}]}`))
	a := serve(b, modernReq(t, upstream, "p", 1, "tools/call", "hang", `"name":"hang","arguments":{}`))
	id := gjson.GetBytes(a.final, "result.taskId").String()
	if ttl := gjson.GetBytes(a.final, "result.ttlMs").Int(); id == "" || ttl != 200 {
		t.Fatalf("CreateTaskResult %s, want ttlMs 200", a.final)
	}
	if again := serve(b, modernReq(t, upstream, "p", 2, "tools/call", "hang", `"name":"hang","arguments":{}`)); again.status != http.StatusTooManyRequests {
		t.Fatalf("a second task over max_tasks_per_principal: %d %s", again.status, again.final)
	}
	select {
	case <-fake.cancels:
	case <-time.After(5 * time.Second):
		t.Fatal("the upstream got no tasks/cancel at the ttl")
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		g := serve(b, modernReq(t, upstream, "p", 3, "tasks/get", id, fmt.Sprintf(`"taskId":%q`, id)))
		if gjson.GetBytes(g.final, "error.code").Int() == jsonrpc.InvalidParams {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the task outlived its ttl: %s", g.final)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if next := serve(b, modernReq(t, upstream, "p", 4, "tools/call", "hang", `"name":"hang","arguments":{}`)); gjson.GetBytes(next.final, "result.resultType").String() != "task" {
		t.Fatalf("the place is not free after the ttl: %s", next.final)
	}
}

// TestTask2025ClientLeaves: a client that leaves before the upstream's
// CreateTaskResult arrives gets no task, and the upstream's task is
// cancelled (nobody would ever see it).
func TestTask2025ClientLeaves(t *testing.T) {
	upstream, fake := newFake2025(t)
	b := newTestBridge(t, time.Minute)
	t.Cleanup(func() { close(fake.quit) })
	b.support.learn(upstream, translate.PrincipalHash("p"), []byte(`{"tools":[{"name":"slowcreate","execution":{"taskSupport":"optional"}}]}`))
	ctx, leave := context.WithCancel(context.Background())
	served := make(chan translate.Served, 1)
	go func() {
		served <- b.Serve(ctx, modernReq(t, upstream, "p", 1, "tools/call", "slowcreate", `"name":"slowcreate","arguments":{}`), &recordedAnswer{})
	}()
	select {
	case <-fake.holding:
	case <-time.After(5 * time.Second):
		t.Fatal("the call never reached the upstream")
	}
	leave()
	close(fake.release)
	select {
	case got := <-fake.cancels:
		if got != "up-1" {
			t.Fatalf("upstream tasks/cancel for %s, want up-1", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the orphaned upstream task was not cancelled")
	}
	if s := <-served; s.Outcome != translate.OutcomeCancelled {
		t.Fatalf("outcome %q, want cancelled", s.Outcome)
	}
	if n := len(b.Tasks()); n != 0 {
		t.Fatalf("tasks held: %v", b.Tasks())
	}
}

// TestTask2025PlaceFreedAtEnd: a terminal upstream task gives its place
// toward max_tasks_per_principal back at once (here the limit is 1): after
// tasks/cancel the principal starts another task, and the cancelled one
// stays readable until its ttl.
func TestTask2025PlaceFreedAtEnd(t *testing.T) {
	upstream, fake := newFake2025(t)
	b := limitedBridge(t, bridgeOptions(func(o *Options) {
		o.Tasks.TTL, o.Tasks.MaxTasksPerPrincipal = time.Minute, 1
	}))
	t.Cleanup(func() { close(fake.quit) })
	b.support.learn(upstream, translate.PrincipalHash("p"), []byte(`{"tools":[{"name":"hang","execution":{"taskSupport":"optional"}}]}`))
	call := func(id int) *recordedAnswer {
		return serve(b, modernReq(t, upstream, "p", id, "tools/call", "hang", `"name":"hang","arguments":{}`))
	}
	first := gjson.GetBytes(call(1).final, "result.taskId").String()
	if first == "" {
		t.Fatal("no task")
	}
	if again := call(2); again.status != http.StatusTooManyRequests || !strings.Contains(string(again.final), "tasks/cancel") {
		t.Fatalf("a second running task over max_tasks_per_principal: %d %s", again.status, again.final)
	}
	serve(b, modernReq(t, upstream, "p", 3, "tasks/cancel", first, fmt.Sprintf(`"taskId":%q`, first)))
	if next := call(4); gjson.GetBytes(next.final, "result.taskId").String() == "" {
		t.Fatalf("after tasks/cancel: %d %s, want a new task", next.status, next.final)
	}
	pollTask(t, b, upstream, "p", first, func(r gjson.Result) bool { return r.Get("status").String() == "cancelled" })
}
