package tests

// Tasks whose owners die one after the other: what a client polling and
// answering through the survivors is told meanwhile.

import (
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestTaskOwnersLost: three instances share state_key and Caddy's storage
// in front of the go-sdk server with an event store (two questions a
// call). The task's first owner is SIGKILLed while the task waits for an
// answer: a tasks/update on another instance, sent at once, waits out the
// dead owner's lease and goes on (the call taken over there) — never a 503
// a Tasks client would take for the task's outcome. That second owner is
// SIGKILLed too while the task waits for its second answer: tasks/get on
// the third instance answers from the task's record all through the
// second owner's lease (never 502 "start the call again"), and the task,
// taken over a second time, completes with both answers.
func TestTaskOwnersLost(t *testing.T) {
	t.Parallel()
	up := newResumableServer(t)
	storage := t.TempDir()
	fleet := durableFleetIn(t, "\t\tupstream "+up.url+" {\n\t\t\tera legacy\n\t\t}\n\t\ttask ask required 0\n\t\ttask_lease 3s", storage)
	alice := &taskClient{t: t, auth: "Bearer alice"}
	created := parseTask(t, alice.callTool(fleet[0].URL, "ask", map[string]any{"topic": "tea"}))
	// asking waits until g shows the task asking q (from its record, or
	// its call taken over and replayed), and returns it.
	asking := func(g *gateway, q, what string) taskView {
		t.Helper()
		var v taskView
		waitForWithin(t, 20*time.Second, what, func() bool {
			x := alice.task(g.URL, "tasks/get", created.TaskID, nil)
			if x.Status != http.StatusOK {
				t.Fatalf("tasks/get (%s): %s", what, x)
			}
			v = parseTask(t, x)
			return v.Status == "input_required" && question(t, v) == q
		})
		return v
	}
	asking(fleet[0], "About tea?", "the first question")
	awaitRecordWrite(storage)

	// The first owner dies: tasks/update through instance 1 at once.
	fleet[0].kill(t)
	first := asking(fleet[1], "About tea?", "the first question on another instance, the owner killed")
	start := time.Now()
	x := alice.answerTask(fleet[1].URL, first, "answer", "a")
	if x.Status != http.StatusOK || x.Resp == nil || x.Resp.Error != nil {
		t.Fatalf("tasks/update during the dead owner's lease: want it taken once the lease lapsed, got %s", x)
	}
	t.Logf("tasks/update during the dead owner's lease answered after %v", time.Since(start).Round(time.Millisecond))
	asking(fleet[1], "Sure?", "the second question on the instance that took the task over")
	awaitRecordWrite(storage)

	// The second owner dies: instance 2 relays to the first owner (gone),
	// then to the second (gone too), and answers from the record (as the
	// second owner last wrote it: asking, or, had it died before that
	// write, working). Three times: after the kill the lease holds 2s.
	fleet[1].kill(t)
	for i := range 3 {
		x := alice.task(fleet[2].URL, "tasks/get", created.TaskID, nil)
		if x.Status != http.StatusOK {
			t.Fatalf("tasks/get %d with its second owner gone: want the task from its record, got %s", i, x)
		}
		if v := parseTask(t, x); v.Status != "input_required" && v.Status != "working" {
			t.Fatalf("tasks/get %d with its second owner gone: %+v", i, v)
		}
	}
	// tasks/update waits out the second owner's lease, and goes on.
	second := asking(fleet[2], "Sure?", "the second question, the second owner killed")
	if x := alice.answerTask(fleet[2].URL, second, "answer", "b"); x.Status != http.StatusOK || x.Resp == nil || x.Resp.Error != nil {
		t.Fatalf("tasks/update with the second owner's lease holding: %s", x)
	}
	var done taskView
	waitForWithin(t, 20*time.Second, "the task completed", func() bool {
		done = parseTask(t, alice.task(fleet[2].URL, "tasks/get", created.TaskID, nil))
		return done.Status == "completed"
	})
	if done.Result == nil || len(done.Result.Content) == 0 || done.Result.Content[0].Text != "accept:a,accept:b" {
		t.Fatalf("completed task %+v", done)
	}
}

// TestTaskUpdateOwnerCutOff: an owner alive (it renews its lease) but cut
// off from the instance a client reached (instances 1 and 2 list it at an
// address nothing listens on): tasks/update and tasks/cancel there wait one
// task_lease for the lease to lapse, then answer 503 with a Retry-After
// that says when the renewed lease ends; tasks/get answers from the record.
func TestTaskUpdateOwnerCutOff(t *testing.T) {
	t.Parallel()
	up := newResumableServer(t)
	storage := t.TempDir()
	ports := []int{freePort(t), freePort(t), freePort(t)}
	nowhere := freePort(t)
	block := "		upstream " + up.url + " {\n\t\t\tera legacy\n\t\t}\n\t\ttask ask required 0\n\t\ttask_lease 2s"
	fleet := make([]*gateway, len(ports))
	for i, port := range ports {
		b := fleetBlock(t, block, "peer", ports, i)
		if i > 0 {
			b = strings.Replace(b, fmt.Sprintf("peer gw-0 http://127.0.0.1:%d", ports[0]), fmt.Sprintf("peer gw-0 http://127.0.0.1:%d", nowhere), 1)
		}
		fleet[i] = launchGateway(t, port, "\tstorage file_system "+storage, "", b)
	}
	alice := &taskClient{t: t, auth: "Bearer alice"}
	created := parseTask(t, alice.callTool(fleet[0].URL, "ask", map[string]any{"topic": "tea"}))
	asked := alice.until(fleet[0].URL, created.TaskID, func(v taskView) bool { return v.Status == "input_required" }, "input_required")
	awaitRecordWrite(storage)
	for _, x := range []rpcExchange{
		alice.answerTask(fleet[1].URL, asked, "answer", "a"),
		alice.task(fleet[2].URL, "tasks/cancel", created.TaskID, nil),
	} {
		if x.Status != http.StatusServiceUnavailable || x.Resp == nil || x.Resp.Error == nil || x.Resp.Error.Code != -32603 {
			t.Fatalf("with the owner cut off, renewing its lease: want HTTP 503 and -32603, got %s", x)
		}
		secs, err := strconv.Atoi(x.Header.Get("Retry-After"))
		if err != nil || secs < 1 || secs > 3 {
			t.Fatalf("Retry-After %q, want the seconds left of a 2s lease", x.Header.Get("Retry-After"))
		}
	}
	if v := parseTask(t, alice.task(fleet[1].URL, "tasks/get", created.TaskID, nil)); v.Status != "input_required" {
		t.Fatalf("tasks/get from the record: %+v", v)
	}
	// The owner itself goes on with the answers.
	alice.answerTask(fleet[0].URL, asked, "answer", "a")
}

// taskRecord is the (sealed) record of the one task kept in storage, "" if
// none.
func taskRecord(storage string) string {
	var last []byte
	_ = filepath.WalkDir(filepath.Join(storage, "mcp_gateway", "tasks"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			last, _ = os.ReadFile(p)
		}
		return nil
	})
	return string(last)
}

// awaitRecordWrite gives the write of the record of a change just seen
// through tasks/get up to a second to land (records are written right
// after the task changes in memory; a kill before that leaves the record
// one change behind, which the tests allow for but would rather avoid).
// A record written already does not change again: poll ends at the second.
func awaitRecordWrite(storage string) {
	before := taskRecord(storage)
	poll(time.Second, func() bool { return taskRecord(storage) != before })
}

// TestTaskTakenOverWorking: three instances share state_key and Caddy's
// storage in front of server-everything (TypeScript SDK 1.x, its
// InMemoryEventStore: a stream reopened with Last-Event-ID gets the
// replay, and nothing sent after it). A task of its long-running tool,
// called by a client that also declares roots, is taken over while
// working once its owner was SIGKILLed: the new owner, hearing nothing on
// the reopened stream, reopens it again after five task_poll_intervals
// (1s here) and so reads the tool's result: the task completes, instead
// of staying working until its ttl (or failing "not resumable" because
// of the roots the server asked for on the session's standalone stream).
func TestTaskTakenOverWorking(t *testing.T) {
	t.Parallel()
	up := startServerEverything(t)
	const tool = "trigger-long-running-operation"
	block := "\t\tupstream " + up + " {\n\t\t\tera legacy\n\t\t}\n\t\ttask " + tool + " required 0\n\t\ttask_lease 1s\n\t\ttask_poll_interval 200ms"
	storage := t.TempDir()
	fleet := durableFleetIn(t, block, storage)
	alice := &taskClient{t: t, auth: "Bearer alice"}
	caps := taskCaps()
	caps["roots"] = map[string]any{}
	created := parseTask(t, alice.send(fleet[0].URL, "tools/call", tool,
		map[string]any{"name": tool, "arguments": map[string]any{"duration": 4, "steps": 2}}, caps))
	// server-everything asks the session's client for its roots, on the
	// session's standalone stream: a question of the task's.
	rootsAsked := 0
	answerRoots := func(g *gateway, v taskView) {
		t.Helper()
		answers := map[string]any{}
		for k, raw := range v.InputRequests {
			if !strings.Contains(string(raw), `"roots/list"`) {
				t.Fatalf("the task asks %s", raw)
			}
			answers[k] = map[string]any{"roots": []any{map[string]any{"uri": "file:///tmp", "name": "tmp"}}}
		}
		if x := alice.task(g.URL, "tasks/update", v.TaskID, map[string]any{"inputResponses": answers}); x.Resp == nil || x.Resp.Error != nil {
			t.Fatalf("tasks/update with the roots: %s", x)
		}
		rootsAsked++
	}
	// The record is written again once the call's stream said where it
	// stands (its priming event), and once the roots are answered: only
	// then can another instance resume the call.
	written := taskRecord(storage)
	poll(3*time.Second, func() bool {
		v := parseTask(t, alice.task(fleet[0].URL, "tasks/get", created.TaskID, nil))
		if v.Status == "input_required" {
			answerRoots(fleet[0], v)
			written = taskRecord(storage)
		}
		return rootsAsked > 0
	})
	poll(time.Second, func() bool { return taskRecord(storage) != written })
	fleet[0].kill(t)

	start := time.Now()
	var v taskView
	waitForWithin(t, 30*time.Second, "the task taken over while working to end", func() bool {
		x := alice.task(fleet[1].URL, "tasks/get", created.TaskID, nil)
		if x.Status != http.StatusOK {
			t.Fatalf("tasks/get with the owner gone: %s", x)
		}
		if v = parseTask(t, x); v.Status == "input_required" {
			answerRoots(fleet[1], v)
		}
		return v.Status != "working" && v.Status != "input_required"
	})
	t.Logf("the task taken over ended %v after its owner's death: %s (roots asked %d times)", time.Since(start).Round(time.Millisecond), v.Status, rootsAsked)
	if v.Status != "completed" || v.Result == nil || len(v.Result.Content) == 0 || !strings.Contains(v.Result.Content[0].Text, "Long running operation completed") {
		t.Fatalf("the task taken over while working: %+v", v)
	}
}
