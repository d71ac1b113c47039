package forward

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/internal/testkit"
	"github.com/tidwall/gjson"
)

// taskRecorder is an Observer that keeps the task events.
type taskRecorder struct {
	testkit.Observer
	tmu   sync.Mutex
	tasks []TaskReport
}

func (o *taskRecorder) TaskChanged(r TaskReport) {
	o.tmu.Lock()
	defer o.tmu.Unlock()
	o.tasks = append(o.tasks, r)
}

// waitTasks returns the task events once there are at least n.
func (o *taskRecorder) waitTasks(t *testing.T, n int) []TaskReport {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		o.tmu.Lock()
		got := slices.Clone(o.tasks)
		o.tmu.Unlock()
		if len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d task events, want %d: %+v", len(got), n, got)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// taskRequest is a tools/call of ask declaring elicitation and the Tasks
// extension, as principal.
func taskRequest(t *testing.T, upstream string, id, rounds int, principal string) Request {
	t.Helper()
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"ask","arguments":{"rounds":%d},`+
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":`+
		`{"elicitation":{},"extensions":{"io.modelcontextprotocol/tasks":{}}}}}}`, id, rounds)
	h := http.Header{"Mcp-Protocol-Version": {translate.ModernVersion}, "Mcp-Method": {"tools/call"}, "Mcp-Name": {"ask"}}
	req, rerr := translate.ValidateModern(http.MethodPost, h, []byte(body), nil)
	if rerr != nil {
		t.Fatalf("invalid test request: %v", rerr)
	}
	return Request{Target: translate.Target{Upstream: upstream}, Principal: translate.PrincipalHash(principal), ModernRequest: req}
}

// TestTaskEventsAndList: a required tool that ends within its window is a
// task created completed, and reported ended at once; a task made at once
// (window 0) that asks is listed working, then input_required with its
// question, and reported ended cancelled when the bridge closes. TaskList
// shows neither the taskId nor the principal's hash, and tells two
// principals apart.
func TestTaskEventsAndList(t *testing.T) {
	upstream, _ := legacyUpstream(t)
	b := newTestBridge(t, time.Minute)
	obs := &taskRecorder{}
	o := *b.defaults
	o.Observer = obs
	o.Tasks.Policy = TaskPolicy{Tools: map[string]TaskRule{"ask": {Mode: TaskRequired, Window: time.Minute}}}
	quick := o.Ready()
	o.Tasks.Policy = TaskPolicy{Tools: map[string]TaskRule{"ask": {Mode: TaskRequired}}}
	atOnce := o.Ready()

	r := taskRequest(t, upstream, 1, 0, "alice")
	r.Options = quick
	a := serve(b, r)
	if got := gjson.GetBytes(a.final, "result.status").String(); got != translate.TaskCompleted {
		t.Fatalf("a required call ended within its window: %s, want a completed task", a.final)
	}
	done := gjson.GetBytes(a.final, "result.taskId").String()
	ev := obs.waitTasks(t, 2)
	if ev[0].Event != "created" || ev[0].Status != translate.TaskCompleted || ev[1].Event != "ended" || ev[1].Status != translate.TaskCompleted ||
		ev[0].Tool != "ask" || ev[0].Upstream != upstream {
		t.Fatalf("events %+v, want created and ended completed", ev)
	}

	r = taskRequest(t, upstream, 2, 1, "bob")
	r.Options = atOnce
	a = serve(b, r)
	if got := gjson.GetBytes(a.final, "result.status").String(); got != translate.TaskWorking {
		t.Fatalf("a call with window 0: %s, want a working task", a.final)
	}
	asking := gjson.GetBytes(a.final, "result.taskId").String()
	if ev := obs.waitTasks(t, 3); ev[2].Event != "created" || ev[2].Status != translate.TaskWorking {
		t.Fatalf("events %+v, want the second created working", ev)
	}
	deadline := time.Now().Add(5 * time.Second)
	var list []TaskInfo
	for {
		list = b.TaskList()
		if len(list) == 2 && list[1].Status == translate.TaskInputRequired {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("tasks %+v, want the second at input_required", list)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if list[0].Status != translate.TaskCompleted || list[1].Waiting != 1 || list[0].Tool != "ask" || list[0].Upstream != upstream ||
		list[0].TTLMillis != time.Hour.Milliseconds() || !list[0].Expires.Equal(list[0].Created.Add(time.Hour)) {
		t.Fatalf("tasks %+v", list)
	}
	if list[0].Principal == list[1].Principal || list[0].ID == list[1].ID || len(list[0].ID) != 12 || len(list[0].Principal) != 12 {
		t.Fatalf("tasks not told apart: %+v", list)
	}
	raw, _ := json.Marshal(list)
	alice := translate.PrincipalHash("alice")
	for _, secret := range []string{done, asking, fmt.Sprintf("%x", alice[:6])} {
		if strings.Contains(string(raw), secret) {
			t.Fatalf("TaskList shows %q: %s", secret, raw)
		}
	}
	if got := b.Tasks(); got[translate.TaskCompleted] != 1 || got[translate.TaskInputRequired] != 1 {
		t.Fatalf("Tasks() = %v", got)
	}

	b.Close()
	if ev := obs.waitTasks(t, 4); ev[3].Event != "ended" || ev[3].Status != translate.TaskCancelled {
		t.Fatalf("events %+v, want the second ended cancelled at close", ev)
	}
}
