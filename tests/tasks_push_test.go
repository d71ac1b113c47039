package tests

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

// pushFleet is two instances of one fleet sharing Caddy's storage (one
// folder, as a shared volume would be) in front of tests/legacyfixture,
// test_tool_with_task and slow_compute hosted as tasks at once; extra is
// added to each block.
func pushFleet(t *testing.T, extra string) []*gateway {
	t.Helper()
	bin := buildGoBinary(t, "./tests/legacyfixture")
	port := freePort(t)
	up := fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
	startPeer(t, "legacyfixture", exec.Command(bin, "-addr", fmt.Sprintf("127.0.0.1:%d", port))).waitUp(t, up)
	block := "\t\tupstream " + up + " {\n\t\t\tera legacy\n\t\t}\n\t\ttask test_tool_with_task required 0\n\t\ttask slow_compute optional 0" + extra
	ports := []int{freePort(t), freePort(t)}
	globals := "\tstorage file_system " + t.TempDir()
	fleet := make([]*gateway, len(ports))
	for i, p := range ports {
		fleet[i] = launchGateway(t, p, globals, "", fleetBlock(t, block, "peer", ports, i))
	}
	return fleet
}

// taskListen is an open subscriptions/listen stream.
type taskListen struct {
	ack  json.RawMessage // the acknowledgement's params.notifications
	msgs <-chan sseMsg
	// seen are the statuses its notifications/tasks carried, by taskId,
	// in order; last is the last notification of each.
	seen map[string][]string
	last map[string]taskNote
}

// listen opens a subscriptions/listen on url naming taskIds, declaring
// caps, and reads its acknowledgement; a refusal is returned as the
// exchange, with a nil stream.
func (c *taskClient) listen(url string, caps map[string]any, taskIDs ...string) (*taskListen, rpcExchange) {
	c.t.Helper()
	c.id++
	m := meta(modernVersion)
	m["io.modelcontextprotocol/clientCapabilities"] = caps
	body := rpcBody(c.t, c.id, "subscriptions/listen", map[string]any{"_meta": m,
		"notifications": map[string]any{"taskIds": taskIDs}})
	hdr := modernHeaders(modernVersion, "subscriptions/listen", "")
	hdr["Authorization"] = c.auth
	ctx, cancel := context.WithCancel(context.Background())
	resp, err := tryPostContext(ctx, url, hdr, body)
	if err != nil {
		cancel()
		c.t.Fatalf("listen: %v", err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		defer cancel()
		return nil, readRPC(c.t, resp, c.id)
	}
	c.t.Cleanup(func() { cancel(); resp.Body.Close() })
	l := &taskListen{msgs: readSSE(resp.Body), seen: map[string][]string{}, last: map[string]taskNote{}}
	var ack struct {
		Method string `json:"method"`
		Params struct {
			Notifications json.RawMessage `json:"notifications"`
		} `json:"params"`
	}
	if err := json.Unmarshal([]byte(nextData(c.t, l.msgs).data), &ack); err != nil || ack.Method != "notifications/subscriptions/acknowledged" {
		c.t.Fatalf("listen: first message not the acknowledgement: %v %+v", err, ack)
	}
	l.ack = ack.Params.Notifications
	return l, rpcExchange{}
}

// taskNote is one notifications/tasks as the tests read it.
type taskNote struct {
	taskView
	SubscriptionID json.RawMessage
}

// next returns the next notifications/tasks on l, noting its status.
func (l *taskListen) next(t *testing.T) taskNote {
	t.Helper()
	for {
		var n struct {
			Method string `json:"method"`
			Params struct {
				taskView
				Meta map[string]json.RawMessage `json:"_meta"`
			} `json:"params"`
		}
		if json.Unmarshal([]byte(nextData(t, l.msgs).data), &n) != nil || n.Method != "notifications/tasks" {
			continue
		}
		note := taskNote{n.Params.taskView, n.Params.Meta["io.modelcontextprotocol/subscriptionId"]}
		if len(note.SubscriptionID) == 0 {
			t.Fatalf("notifications/tasks without the subscription id: %+v", n)
		}
		l.seen[note.TaskID] = append(l.seen[note.TaskID], note.Status)
		l.last[note.TaskID] = note
		return note
	}
}

// untilEnded reads l's notifications/tasks until each task of ids has
// sent a terminal status.
func (l *taskListen) untilEnded(t *testing.T, ids ...string) {
	t.Helper()
	ended := func() bool {
		for _, id := range ids {
			s := l.seen[id]
			if len(s) == 0 || !slices.Contains([]string{"completed", "failed", "cancelled"}, s[len(s)-1]) {
				return false
			}
		}
		return true
	}
	for !ended() {
		l.next(t)
	}
}

// TestTaskStatusPushed: two tasks run on instance 0 of a fleet sharing its
// storage; alice listens for both (notifications.taskIds) on instance 1
// (the task's record read every task_listen_poll) and on instance 0 (from
// memory). Each stream acknowledges both taskIds, then carries a
// notifications/tasks with the full task for each status change of each,
// in order: test_tool_with_task working (unless its question came first),
// input_required with its question, working once answered, completed with
// its result; slow_compute working, then cancelled. bob, listening for
// the same taskIds, has none accepted and gets no notifications/tasks; a
// listen naming taskIds without declaring the Tasks extension gets -32021;
// max_task_listeners_per_principal refuses alice's next listen (429).
func TestTaskStatusPushed(t *testing.T) {
	t.Parallel()
	fleet := pushFleet(t, "\n\t\ttask_listen_poll 100ms\n\t\tmax_task_listeners_per_principal 1")
	alice := &taskClient{t: t, auth: "Bearer alice"}
	bob := &taskClient{t: t, auth: "Bearer bob"}
	asks := parseTask(t, alice.callTool(fleet[0].URL, "test_tool_with_task", map[string]any{}))
	slow := parseTask(t, alice.callTool(fleet[0].URL, "slow_compute", map[string]any{"seconds": 60}))
	if asks.ResultType != "task" || slow.ResultType != "task" {
		t.Fatalf("want two tasks, got %+v and %+v", asks, slow)
	}
	ids := []string{asks.TaskID, slow.TaskID}

	_, refused := alice.listen(fleet[1].URL, map[string]any{}, ids...)
	wantRPCError(t, refused, -32021, "a listen naming taskIds without the Tasks extension")
	remote, _ := alice.listen(fleet[1].URL, taskCaps(), ids...)
	local, _ := alice.listen(fleet[0].URL, taskCaps(), ids...)
	other, _ := bob.listen(fleet[1].URL, taskCaps(), ids...)
	want, _ := json.Marshal(map[string]any{"taskIds": ids})
	for name, l := range map[string]*taskListen{"instance 1": remote, "instance 0": local} {
		if string(l.ack) != string(want) {
			t.Fatalf("%s: acknowledged %s, want %s", name, l.ack, want)
		}
	}
	if string(other.ack) != "{}" {
		t.Fatalf("another principal's listen: acknowledged %s, want no taskIds", other.ack)
	}
	if _, full := alice.listen(fleet[1].URL, taskCaps(), ids...); full.Status != http.StatusTooManyRequests {
		t.Fatalf("alice's second listen for tasks on one instance: %s, want 429", full)
	}

	// The question, seen on the stream, answered on the owner.
	var asked taskNote
	for asked.TaskID != asks.TaskID || asked.Status != "input_required" {
		asked = remote.next(t)
	}
	if q := question(t, asked.taskView); q != "What is your name?" {
		t.Fatalf("input_required notification without its question: %+v", asked)
	}
	if x := alice.answerTask(fleet[0].URL, asked.taskView, "name", "Alice"); x.Resp == nil || x.Resp.Error != nil {
		t.Fatalf("tasks/update: %s", x)
	}
	alice.until(fleet[0].URL, asks.TaskID, func(v taskView) bool { return v.Status == "working" }, "working again")
	if x := alice.task(fleet[0].URL, "tasks/cancel", slow.TaskID, nil); x.Resp == nil || x.Resp.Error != nil {
		t.Fatalf("tasks/cancel: %s", x)
	}

	for name, l := range map[string]*taskListen{"instance 1": remote, "instance 0": local} {
		l.untilEnded(t, ids...)
		got := l.seen[asks.TaskID]
		if len(got) > 0 && got[0] == "working" {
			got = got[1:] // its question may come before the listen
		}
		if !slices.Equal(got, []string{"input_required", "working", "completed"}) {
			t.Fatalf("%s: test_tool_with_task's notifications %v, want [working] input_required working completed", name, l.seen[asks.TaskID])
		}
		if r := l.last[asks.TaskID].Result; r == nil || len(r.Content) == 0 || r.Content[0].Text != "Hello, Alice!" {
			t.Fatalf("%s: completed notification without the result: %+v", name, l.last[asks.TaskID])
		}
		if got := l.seen[slow.TaskID]; !slices.Equal(got, []string{"working", "cancelled"}) {
			t.Fatalf("%s: slow_compute's notifications %v, want working cancelled", name, got)
		}
	}
	for len(other.msgs) > 0 { // what bob's stream carried meanwhile
		if m := <-other.msgs; strings.Contains(m.data, "notifications/tasks") {
			t.Fatalf("another principal's listen got %s", m.data)
		}
	}
}

// sdkTaskEvent is one line tests/node/tasklisten-client.mjs prints.
type sdkTaskEvent struct {
	Event   string          `json:"event"`
	Honored json.RawMessage `json:"honored"`
	TaskID  string          `json:"taskId"`
	Status  string          `json:"status"`
	Valid   bool            `json:"valid"`
	Text    *string         `json:"text"`
}

// TestTaskStatusPushedSDK: the TypeScript SDK 2.x Client, declaring the
// Tasks extension, listens on instance 1 (Client.listen with ext-tasks'
// contributeTaskFilterV2) for a task running on instance 0, and gets
// each status change as a notifications/tasks that ext-tasks'
// isTaskStatusNotificationV2 accepts: [working] input_required, working
// once answered, completed with the result. The SDK's honoredFilter drops
// taskIds (its SubscriptionFilter schema knows no taskIds): it is printed,
// not checked.
func TestTaskStatusPushedSDK(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("needs node; skipped with -short")
	}
	fleet := pushFleet(t, "\n\t\ttask_listen_poll 100ms")
	alice := &taskClient{t: t, auth: "Bearer alice"}
	asks := parseTask(t, alice.callTool(fleet[0].URL, "test_tool_with_task", map[string]any{}))

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	cmd := groupCommand(ctx, nodeBin(t), filepath.Join(testsDir(t), "node", "tasklisten-client.mjs"), "Bearer alice", fleet[1].URL, asks.TaskID)
	cmd.Dir = testsDir(t)
	cmd.Env = append(os.Environ(), "MCP_SCRIPT_TIMEOUT_MS=50000")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = cmd.Wait() })
	events := make(chan sdkTaskEvent, 8)
	go func() {
		defer close(events)
		for lines := bufio.NewScanner(stdout); lines.Scan(); {
			var e sdkTaskEvent
			if json.Unmarshal(lines.Bytes(), &e) == nil {
				events <- e
			}
		}
	}()
	next := func(want string) sdkTaskEvent {
		t.Helper()
		select {
		case e, ok := <-events:
			if !ok || e.Event != want {
				t.Fatalf("tasklisten-client: want %q, got %+v (ended: %v); stderr:\n%s", want, e, !ok, stderr.String())
			}
			if want == "task" && (!e.Valid || e.TaskID != asks.TaskID) {
				t.Fatalf("tasklisten-client: a notification ext-tasks does not accept, or of another task: %+v", e)
			}
			return e
		case <-time.After(notHang):
			t.Fatalf("tasklisten-client: no %q within %v; stderr:\n%s", want, notHang, stderr.String())
		}
		return sdkTaskEvent{}
	}
	t.Logf("the SDK's honoredFilter: %s", next("ack").Honored)
	var statuses []string
	e := next("task")
	if statuses = append(statuses, e.Status); e.Status == "working" {
		e = next("task")
		statuses = append(statuses, e.Status)
	}
	if e.Status != "input_required" {
		t.Fatalf("statuses %v, want [working] input_required", statuses)
	}
	v := alice.until(fleet[0].URL, asks.TaskID, func(v taskView) bool { return v.Status == "input_required" }, "input_required")
	if x := alice.answerTask(fleet[0].URL, v, "name", "Bob"); x.Resp == nil || x.Resp.Error != nil {
		t.Fatalf("tasks/update: %s", x)
	}
	for e.Status != "completed" {
		e = next("task")
		statuses = append(statuses, e.Status)
	}
	if got := statuses[len(statuses)-2:]; got[0] != "working" || e.Text == nil || *e.Text != "Hello, Bob!" {
		t.Fatalf("statuses %v, last %+v: want working then completed with Hello, Bob!", statuses, e)
	}
}

// TestTaskPushDelay measures (figures in BENCHMARKS.md, nothing asserted
// on them) how long after a status change a listener gets its
// notifications/tasks: n tasks run on instance 0, alice listens for all
// of them on instance 1 (from the records, every task_listen_poll: the
// default 500ms, and 100ms) and on instance 0 (from memory); the tasks
// are cancelled on instance 0 one by one, 37ms apart, and each delay is
// the notification's arrival less its lastUpdatedAt (one clock: one
// machine). Not parallel: it measures time.
func TestTaskPushDelay(t *testing.T) {
	if testing.Short() {
		t.Skip("a measurement; skipped with -short")
	}
	const n = 20
	for _, poll := range []string{"500ms", "100ms"} {
		fleet := pushFleet(t, "\n\t\ttask_listen_poll "+poll)
		alice := &taskClient{t: t, auth: "Bearer alice"}
		ids := make([]string, n)
		for i := range ids {
			ids[i] = parseTask(t, alice.callTool(fleet[0].URL, "slow_compute", map[string]any{"seconds": 60})).TaskID
		}
		remote, _ := alice.listen(fleet[1].URL, taskCaps(), ids...)
		local, _ := alice.listen(fleet[0].URL, taskCaps(), ids...)
		for _, l := range []*taskListen{remote, local} {
			for len(l.seen) < n {
				l.next(t) // each task's first state, working
			}
		}
		names := []string{"instance 1 (records, task_listen_poll " + poll + ")", "instance 0 (memory)"}
		delays := make([][]time.Duration, len(names))
		done := make(chan string, len(names))
		for i, l := range []*taskListen{remote, local} {
			go func() {
				defer func() { done <- names[i] }()
				for len(delays[i]) < n {
					var note struct {
						Params struct {
							Status        string `json:"status"`
							LastUpdatedAt string `json:"lastUpdatedAt"`
						} `json:"params"`
					}
					m, ok := <-l.msgs
					if !ok {
						return
					}
					at := time.Now()
					if json.Unmarshal([]byte(m.data), &note) != nil || note.Params.Status != "cancelled" {
						continue
					}
					changed, _ := time.Parse(time.RFC3339Nano, note.Params.LastUpdatedAt)
					delays[i] = append(delays[i], at.Sub(changed))
				}
			}()
		}
		for _, id := range ids {
			if x := alice.task(fleet[0].URL, "tasks/cancel", id, nil); x.Resp == nil || x.Resp.Error != nil {
				t.Fatalf("tasks/cancel: %s", x)
			}
			time.Sleep(37 * time.Millisecond) // spreads the changes over the poll's phase
		}
		for range names {
			wait(t, done, notHang, "a listener's notifications")
		}
		for i, d := range delays {
			if len(d) < n {
				t.Fatalf("%s: %d notifications of %d", names[i], len(d), n)
			}
			slices.Sort(d)
			t.Logf("%s: %d notifications; delay min %v, median %v, p90 %v, max %v", names[i], len(d),
				d[0].Round(time.Millisecond), d[n/2].Round(time.Millisecond), d[n*9/10].Round(time.Millisecond), d[n-1].Round(time.Millisecond))
		}
	}
}

// pushingServer is a modern upstream that runs its own task and pushes its
// status (a fixture: no server in tests/node_modules pushes
// notifications/tasks on a listen): it answers subscriptions/listen with
// an SSE stream — the acknowledgement echoing its taskIds, then a
// notifications/tasks working and one completed for each, with the
// request's subscription id — and holds it until the client leaves.
func pushingServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		req := gjson.ParseBytes(body)
		if req.Get("method").String() != "subscriptions/listen" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"Method not found"}}`, req.Get("id").Raw)
			return
		}
		id, ids := req.Get("id").Raw, req.Get("params.notifications.taskIds").Raw
		meta := `"_meta":{"io.modelcontextprotocol/subscriptionId":` + id + `}`
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/subscriptions/acknowledged\",\"params\":{%s,\"notifications\":{\"taskIds\":%s}}}\n\n", meta, ids)
		for _, v := range req.Get("params.notifications.taskIds").Array() {
			for _, status := range []string{"working", "completed"} {
				fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tasks\",\"params\":{\"taskId\":%q,\"status\":%q,\"createdAt\":\"2026-11-28T10:00:00Z\",\"lastUpdatedAt\":\"2026-11-28T10:00:01Z\",\"ttlMs\":60000,%s}}\n\n", v.Str, status, meta)
			}
		}
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String() + "/mcp"
}

// TestUpstreamTaskPushPassesThrough: in front of a modern server that runs
// its tasks itself, a modern client's listen naming their taskIds reaches
// the server, and the server's own acknowledgement and notifications/tasks
// come back unchanged, in order.
func TestUpstreamTaskPushPassesThrough(t *testing.T) {
	t.Parallel()
	g := startGateway(t, "\t\tupstream "+pushingServer(t)+" {\n\t\t\tera modern\n\t\t}")
	alice := &taskClient{t: t, auth: "Bearer alice"}
	l, refused := alice.listen(g.URL, taskCaps(), "up-1", "up-2")
	if l == nil {
		t.Fatalf("listen through the gateway: %s", refused)
	}
	if string(l.ack) != `{"taskIds":["up-1","up-2"]}` {
		t.Fatalf("acknowledged %s, want the server's", l.ack)
	}
	l.untilEnded(t, "up-1", "up-2")
	for _, id := range []string{"up-1", "up-2"} {
		if !slices.Equal(l.seen[id], []string{"working", "completed"}) {
			t.Fatalf("%s: %v, want working completed", id, l.seen[id])
		}
	}
}
