package tests

// Tasks whose owners die one after the other: what a client polling and
// answering through the survivors is told meanwhile.

import (
	"net/http"
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
	fleet := durableFleet(t, "\t\tupstream "+up.url+" {\n\t\t\tera legacy\n\t\t}\n\t\ttask ask required 0\n\t\ttask_lease 3s")
	alice := &taskClient{t: t, auth: "Bearer alice"}
	created := parseTask(t, alice.callTool(fleet[0].URL, "ask", map[string]any{"topic": "tea"}))
	first := alice.until(fleet[0].URL, created.TaskID, func(v taskView) bool { return v.Status == "input_required" }, "input_required")
	if q := question(t, first); q != "About tea?" {
		t.Fatalf("first question %q", q)
	}

	// The first owner dies: tasks/update through instance 1 at once.
	fleet[0].kill(t)
	start := time.Now()
	x := alice.answerTask(fleet[1].URL, first, "answer", "a")
	if x.Status != http.StatusOK || x.Resp == nil || x.Resp.Error != nil {
		t.Fatalf("tasks/update during the dead owner's lease: want it taken once the lease lapsed, got %s", x)
	}
	t.Logf("tasks/update during the dead owner's lease answered after %v", time.Since(start).Round(time.Millisecond))
	second := alice.until(fleet[1].URL, created.TaskID, func(v taskView) bool {
		return v.Status == "input_required" && question(t, v) == "Sure?"
	}, "asking its second question on the instance that took it over")

	// The second owner dies: instance 2 relays to the first owner (gone),
	// then to the second (gone too), and answers from the record.
	fleet[1].kill(t)
	// (Three times: right after the kill the lease holds for 2s at least.)
	for i := range 3 {
		x := alice.task(fleet[2].URL, "tasks/get", created.TaskID, nil)
		if x.Status != http.StatusOK {
			t.Fatalf("tasks/get %d with its second owner gone: want the task from its record, got %s", i, x)
		}
		if v := parseTask(t, x); v.Status != "input_required" || question(t, v) != "Sure?" {
			t.Fatalf("tasks/get %d with its second owner gone: %+v", i, v)
		}
	}
	// tasks/update waits out the second owner's lease, and goes on.
	if x := alice.answerTask(fleet[2].URL, second, "answer", "b"); x.Status != http.StatusOK || x.Resp == nil || x.Resp.Error != nil {
		t.Fatalf("tasks/update with the second owner's lease holding: %s", x)
	}
	done := alice.until(fleet[2].URL, created.TaskID, func(v taskView) bool { return v.Status == "completed" }, "completed")
	if done.Result == nil || len(done.Result.Content) == 0 || done.Result.Content[0].Text != "accept:a,accept:b" {
		t.Fatalf("completed task %+v", done)
	}
}
