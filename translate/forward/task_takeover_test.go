package forward

import (
	"context"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/certmagic"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/tidwall/gjson"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/legacy"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/seal"
)

// fleetOfBridges is n bridges of one fleet (one keyring, instances gw-0,
// gw-1, …) sharing a task store (certmagic's file storage, Caddy's default)
// and a short lease, each with its options (ask: a task at once) and, as
// in Caddy, its own legacy.ConnClient.
func fleetOfBridges(t *testing.T, n int, lease time.Duration) ([]*Bridge, []*Options) {
	t.Helper()
	kr, err := seal.NewKeyring(seal.NewRandomKey())
	if err != nil {
		t.Fatal(err)
	}
	store := &certmagic.FileStorage{Path: t.TempDir()}
	var bs []*Bridge
	var os []*Options
	for i := range n {
		o := DefaultOptions()
		o.Keyring, o.Instance = kr, fmt.Sprintf("gw-%d", i)
		o.Tasks.Policy = TaskPolicy{Tools: map[string]TaskRule{"ask": {Mode: TaskRequired}}}
		o.Tasks.Store, o.Tasks.Lease = store, lease
		client := legacy.NewConnClient(legacy.ConnOptions{})
		p := legacy.NewPool(legacy.PoolOptions{MaxSessions: 100, IdleTimeout: time.Minute, Client: client})
		b := New(p, o)
		t.Cleanup(func() { b.Close(); p.Close(); client.CloseIdleConnections() })
		bs, os = append(bs, b), append(os, o.Ready())
	}
	return bs, os
}

// crash makes b vanish as a killed process would, for the fleet: its lease
// is no longer renewed, its tasks' streams are let go without a word
// upstream, and their records stay as they were.
func crash(b *Bridge) {
	b.leases.mu.Lock()
	b.leases.released = true
	b.leases.mu.Unlock()
	for _, t := range b.allTasks() {
		t.handingOver.Store(true)
		if t.letGo != nil {
			t.letGo()
		}
	}
	b.taskRuns.Wait()
	b.tmu.Lock()
	clear(b.tasks)
	b.tmu.Unlock()
}

// taskOp is tasks/get or tasks/update of id on b, with b's options, as if
// the owner could not be reached (OwnerGone) when gone.
func taskOp(t *testing.T, b *Bridge, o *Options, upstream, method, id, extra string, gone bool) gjson.Result {
	t.Helper()
	r := modernReq(t, upstream, "alice", 7, method, id, fmt.Sprintf(`"taskId":%q%s`, id, extra))
	r.Options, r.OwnerGone = o, gone
	return gjson.ParseBytes(serve(b, r).final)
}

// pollStatus sends tasks/get until the task has status (10 s at most).
func pollStatus(t *testing.T, b *Bridge, o *Options, upstream, id, status string, gone bool) gjson.Result {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		res := taskOp(t, b, o, upstream, "tasks/get", id, "", gone)
		if res.Get("result.status").String() == status {
			return res.Get("result")
		}
		if time.Now().After(deadline) {
			t.Fatalf("task never %s: last tasks/get %s", status, res.Raw)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// answerTask answers the task's one open question with name.
func answerTask(t *testing.T, b *Bridge, o *Options, upstream, id string, task gjson.Result, name string, gone bool) gjson.Result {
	t.Helper()
	var key string
	task.Get("inputRequests").ForEach(func(k, _ gjson.Result) bool { key = k.String(); return false })
	if key == "" {
		t.Fatalf("no question in %s", task.Raw)
	}
	return taskOp(t, b, o, upstream, "tasks/update", id, fmt.Sprintf(`,"inputResponses":{%q:{"action":"accept","content":{"a":%q}}}`, key, name), gone)
}

// startTask starts ask (rounds questions) as a task on b, and waits for its
// first question.
func startTask(t *testing.T, b *Bridge, o *Options, upstream string, rounds int) (string, gjson.Result) {
	t.Helper()
	r := taskRequest(t, upstream, 1, rounds, "alice")
	r.Options, r.Resume = o, true
	a := serve(b, r)
	id := gjson.GetBytes(a.final, "result.taskId").String()
	if id == "" {
		t.Fatalf("no task: %s", a.final)
	}
	return id, pollStatus(t, b, o, upstream, id, translate.TaskInputRequired, false)
}

// TestTaskTakeoverAfterCrash: a task in front of a resumable upstream (the
// go-sdk server with an event store) outlives its instance. Its owner
// vanishes after the first question; until its lease lapses another
// instance shows the task from its record and holds tasks/update; then it
// takes the task over: the answer reaches the
// upstream call, which asks its second question and completes; a third
// instance shows the result from the record, while the second holds the
// task.
func TestTaskTakeoverAfterCrash(t *testing.T) {
	upstream, _ := resumableUpstream(t)
	lease := 400 * time.Millisecond
	bs, os := fleetOfBridges(t, 3, lease)
	id, first := startTask(t, bs[0], os[0], upstream, 2)
	if q := first.Get("inputRequests.*.params.message").String(); q != "question 1" {
		t.Fatalf("first question %q in %s", q, first.Raw)
	}
	crash(bs[0])

	view := taskOp(t, bs[1], os[1], upstream, "tasks/get", id, "", true)
	if view.Get("result.status").String() != translate.TaskInputRequired || view.Get("result.inputRequests.*.params.message").String() != "question 1" {
		t.Fatalf("from the record while the lease holds: %s", view.Raw)
	}
	// tasks/update waits for the lease to lapse, then takes the task over.
	if res := answerTask(t, bs[1], os[1], upstream, id, view.Get("result"), "one", true); res.Get("result.resultType").String() != "complete" {
		t.Fatalf("tasks/update while the lease holds: %s", res.Raw)
	}
	second := pollStatus(t, bs[1], os[1], upstream, id, translate.TaskInputRequired, false)
	for second.Get("inputRequests.*.params.message").String() != "question 2" {
		second = pollStatus(t, bs[1], os[1], upstream, id, translate.TaskInputRequired, false)
	}
	answerTask(t, bs[1], os[1], upstream, id, second, "two", false)
	done := pollStatus(t, bs[1], os[1], upstream, id, translate.TaskCompleted, false)
	if got := done.Get("result.content.0.text").String(); got != "accept:one,accept:two" {
		t.Fatalf("result %q in %s", got, done.Raw)
	}
	// The record is written right after the owner's memory changes.
	elsewhere := pollStatus(t, bs[2], os[2], upstream, id, translate.TaskCompleted, true)
	if elsewhere.Get("result.content.0.text").String() != "accept:one,accept:two" {
		t.Fatalf("a third instance, from the record: %s", elsewhere.Raw)
	}
}

// TestTaskHandOverAtStop: an instance that stops gracefully releases its
// lease, and another takes its tasks over at once, without waiting for the
// lease to lapse.
func TestTaskHandOverAtStop(t *testing.T) {
	upstream, _ := resumableUpstream(t)
	bs, os := fleetOfBridges(t, 2, time.Hour)
	id, first := startTask(t, bs[0], os[0], upstream, 1)
	bs[0].Close()
	if res := answerTask(t, bs[1], os[1], upstream, id, first, "one", true); res.Get("result.resultType").String() != "complete" {
		t.Fatalf("tasks/update after the owner stopped: %s", res.Raw)
	}
	done := pollStatus(t, bs[1], os[1], upstream, id, translate.TaskCompleted, false)
	if got := done.Get("result.content.0.text").String(); got != "accept:one" {
		t.Fatalf("result %q in %s", got, done.Raw)
	}
}

// TestTaskLostWithoutResume: in front of an upstream whose streams cannot
// be resumed, a task whose instance vanished fails, once its lease lapsed,
// with an error that says so, for good: never left input_required.
func TestTaskLostWithoutResume(t *testing.T) {
	upstream, _ := legacyUpstream(t)
	lease := 300 * time.Millisecond
	bs, os := fleetOfBridges(t, 2, lease)
	id, _ := startTask(t, bs[0], os[0], upstream, 1)
	crash(bs[0])
	time.Sleep(lease + 100*time.Millisecond)
	res := pollStatus(t, bs[1], os[1], upstream, id, translate.TaskFailed, true)
	if msg := res.Get("error.message").String(); !strings.Contains(msg, "instance running the task was lost") {
		t.Fatalf("failed task: %s", res.Raw)
	}
	if again := taskOp(t, bs[1], os[1], upstream, "tasks/get", id, "", true); again.Get("result.status").String() != translate.TaskFailed {
		t.Fatalf("read again: %s", again.Raw)
	}
}

// TestTaskRecordOtherPrincipal: another principal's tasks/get of a stored
// task is told the taskId is unknown, from any instance.
func TestTaskRecordOtherPrincipal(t *testing.T) {
	upstream, _ := resumableUpstream(t)
	bs, os := fleetOfBridges(t, 2, time.Hour)
	id, _ := startTask(t, bs[0], os[0], upstream, 1)
	r := modernReq(t, upstream, "mallory", 9, "tasks/get", id, fmt.Sprintf(`"taskId":%q`, id))
	r.Options, r.OwnerGone = os[1], true
	if got := gjson.GetBytes(serve(bs[1], r).final, "error.code").Int(); got != -32602 {
		t.Fatalf("another principal: code %d", got)
	}
}

// TestTaskRecordsSwept: the record of a task whose ttl passed while no
// instance held it (its owner lost, no client asked since) is deleted by
// another instance's sweep; a live one's is kept. The admin list shows the
// owner and its lease of a stored task.
func TestTaskRecordsSwept(t *testing.T) {
	upstream, _ := resumableUpstream(t)
	bs, os := fleetOfBridges(t, 2, time.Hour)
	short := *os[0]
	short.Tasks.TTL = 300 * time.Millisecond
	id, _ := startTask(t, bs[0], short.Ready(), upstream, 1)
	startTask(t, bs[0], os[0], upstream, 1)
	if list := bs[0].TaskList(); len(list) != 2 || list[0].Owner != "gw-0" || list[0].LeaseExpires == nil || list[0].LeaseExpires.Before(time.Now()) {
		t.Fatalf("admin list %+v, want the owner and a lease ahead", list)
	}
	crash(bs[0])
	time.Sleep(400 * time.Millisecond)
	store := os[0].Tasks.Store
	keys, err := store.List(t.Context(), recordsPrefix, true)
	if err != nil || len(keys) < 2 {
		t.Fatalf("records before the sweep: %v %v", keys, err)
	}
	bs[1].claim(os[1])
	bs[1].sweepRecords()
	var left int
	for _, k := range keys {
		if _, err := store.Load(t.Context(), k); err == nil {
			left++
		}
	}
	if left != 1 {
		t.Fatalf("%d records left after the sweep, want the live task's", left)
	}
	if got := taskOp(t, bs[1], os[1], upstream, "tasks/get", id, "", true); got.Get("error.code").Int() != -32602 {
		t.Fatalf("the swept task: %s", got.Raw)
	}
}

// TestTaskRecordAttack: whoever can write to the storage cannot make an
// instance show or run another task in place of the one a taskId names:
// a record copied over another task's (same principal) is refused as
// unknown, and one tampered with is not opened (503, retry later); neither
// shows what the other record held.
func TestTaskRecordAttack(t *testing.T) {
	upstream, _ := resumableUpstream(t)
	bs, os := fleetOfBridges(t, 2, time.Hour)
	first, _ := startTask(t, bs[0], os[0], upstream, 1)
	second, _ := startTask(t, bs[0], os[0], upstream, 1)
	store := os[0].Tasks.Store
	key := func(id string) string {
		tk, err := seal.OpenTask(os[0].Keyring, id)
		if err != nil {
			t.Fatal(err)
		}
		return recordKey(os[0].Keyring, tk.Principal, tk.Handle)
	}
	sealed, err := store.Load(t.Context(), key(first))
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Store(t.Context(), key(second), sealed); err != nil {
		t.Fatal(err)
	}
	crash(bs[0])
	if got := taskOp(t, bs[1], os[1], upstream, "tasks/get", second, "", true); got.Get("error.code").Int() != -32602 || strings.Contains(got.Raw, "question") {
		t.Fatalf("a record copied over another task's: %s", got.Raw)
	}
	tampered := append([]byte(nil), sealed...)
	tampered[len(tampered)/2] ^= 1
	if err := store.Store(t.Context(), key(first), tampered); err != nil {
		t.Fatal(err)
	}
	if got := taskOp(t, bs[1], os[1], upstream, "tasks/get", first, "", true); got.Get("error.code").Int() != -32603 || strings.Contains(got.Raw, "question") {
		t.Fatalf("a tampered record: %s", got.Raw)
	}
}

// TestTaskRecordOldName: a record an older gateway kept under the plain
// digest of its principal (before names were keyed) is still found: its
// instance vanishes, and another serves the task from it.
func TestTaskRecordOldName(t *testing.T) {
	upstream, _ := resumableUpstream(t)
	bs, os := fleetOfBridges(t, 2, time.Hour)
	id, _ := startTask(t, bs[0], os[0], upstream, 1)
	tk, err := seal.OpenTask(os[0].Keyring, id)
	if err != nil {
		t.Fatal(err)
	}
	store := os[0].Tasks.Store
	key := recordKey(os[0].Keyring, tk.Principal, tk.Handle)
	if strings.Contains(key, hex.EncodeToString(tk.Principal[:])) {
		t.Fatalf("the record's key %q names the principal's plain digest", key)
	}
	sealed, err := store.Load(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	crash(bs[0])
	old := path.Join(recordsPrefix, hex.EncodeToString(tk.Principal[:]), hex.EncodeToString(tk.Handle[:]))
	if err := store.Store(t.Context(), old, sealed); err != nil {
		t.Fatal(err)
	}
	if err := store.Delete(t.Context(), key); err != nil {
		t.Fatal(err)
	}
	if got := taskOp(t, bs[1], os[1], upstream, "tasks/get", id, "", true); got.Get("error").Exists() || got.Get("result.status").String() == "" {
		t.Fatalf("a record under its old name: %s", got.Raw)
	}
}

// TestTaskTakeoverWorking: a task whose tool has said nothing yet (working)
// is resumable too, from its stream's priming event: its instance
// vanishes, another takes it over, and the tool's late result completes it.
func TestTaskTakeoverWorking(t *testing.T) {
	release := make(chan struct{})
	server := mcp.NewServer(&mcp.Implementation{Name: "working", Version: "1"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "ask", Description: "Works until released."},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ struct {
			Rounds int `json:"rounds"`
		}) (*mcp.CallToolResult, any, error) {
			select {
			case <-release:
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil, nil
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			}
		})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server },
		&mcp.StreamableHTTPOptions{EventStore: mcp.NewMemoryEventStore(nil)}))
	t.Cleanup(ts.Close)
	lease := 300 * time.Millisecond
	bs, os := fleetOfBridges(t, 2, lease)
	r := taskRequest(t, ts.URL, 1, 0, "alice")
	r.Options, r.Resume = os[0], true
	id := gjson.GetBytes(serve(bs[0], r).final, "result.taskId").String()
	tk, err := seal.OpenTask(os[0].Keyring, id)
	if err != nil {
		t.Fatalf("taskId %q: %v", id, err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		sealed, err := os[0].Tasks.Store.Load(t.Context(), recordKey(os[0].Keyring, tk.Principal, tk.Handle))
		if err == nil {
			if rec, err := seal.OpenTaskRecord(os[0].Keyring, sealed); err == nil && rec.After != "" {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the record never said where the working call stands")
		}
		time.Sleep(10 * time.Millisecond)
	}
	crash(bs[0])
	time.Sleep(lease + 100*time.Millisecond)
	pollStatus(t, bs[1], os[1], ts.URL, id, translate.TaskWorking, true) // taken over
	close(release)
	done := pollStatus(t, bs[1], os[1], ts.URL, id, translate.TaskCompleted, false)
	if got := done.Get("result.content.0.text").String(); got != "done" {
		t.Fatalf("result %q in %s", got, done.Raw)
	}
}
