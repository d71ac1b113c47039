package tests

// Operating the tasks the gateway hosts: the admin
// API's list, the metrics by status, and the log lines.

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestTaskOperations: two principals' tasks show in /mcp_gateway/tasks
// (tool, status, a principal digest, created, ttl; no taskId, credential,
// arguments or result) and in caddy_mcp_gateway_tasks{status}; when one is
// cancelled and the other completes, the list, the gauges,
// tasks_ended_total{status} and one log line per event say so, and no
// taskId or credential appears in the log.
func TestTaskOperations(t *testing.T) {
	t.Parallel()
	up := newRecordedTaskServer(t)
	g := startGatewayWith(t, "\tdebug", "", up.block("\n\t\ttask_ttl 10m"))
	alice := &taskClient{t: t, auth: "Bearer alice-secret"}
	bob := &taskClient{t: t, auth: "Bearer bob-secret"}
	a := parseTask(t, alice.call(g.URL, "slow"))
	wait(t, up.started, 5*time.Second, "alice's call upstream")
	b := parseTask(t, bob.call(g.URL, "slow"))
	wait(t, up.started, 5*time.Second, "bob's call upstream")

	var list []map[string]any
	adminGET(t, g, "/mcp_gateway/tasks", &list)
	if len(list) != 2 {
		t.Fatalf("tasks = %v, want alice's and bob's", list)
	}
	for _, e := range list {
		if e["tool"] != "slow" || e["status"] != "working" || e["upstream"] != up.url || e["ttl_ms"] != float64(600000) ||
			e["waiting_inputs"] != float64(0) || e["id"] == "" || e["principal"] == "" || e["created"] == nil || e["expires"] == nil {
			t.Fatalf("task entry %v", e)
		}
	}
	if list[0]["principal"] == list[1]["principal"] || list[0]["id"] == list[1]["id"] {
		t.Fatalf("two principals' tasks are not told apart: %v", list)
	}
	raw, _ := json.Marshal(list)
	for _, secret := range []string{a.TaskID, b.TaskID, "alice", "bob", "Bearer"} {
		if strings.Contains(string(raw), secret) {
			t.Fatalf("/mcp_gateway/tasks shows %q: %s", secret, raw)
		}
	}
	waitMetrics(t, g, map[string]float64{
		`caddy_mcp_gateway_tasks{status="working"}`:                                                 2,
		`caddy_mcp_gateway_tasks{status="completed"}`:                                               0,
		"caddy_mcp_gateway_tasks_created_total":                                                     2,
		`caddy_mcp_gateway_requests_total{cell="modern-legacy",method="tools/call",outcome="task"}`: 2,
		`caddy_mcp_gateway_tasks_ended_total{status="cancelled"}`:                                   -1, // none yet
	})

	// A reload keeps the tasks (the bridge outlives configurations, as
	// for parked calls); the counters start again in the new one.
	g.reload(t, up.block("\n\t\ttask_ttl 10m\n\t\tmax_tasks 500"))
	adminGET(t, g, "/mcp_gateway/tasks", &list)
	if len(list) != 2 {
		t.Fatalf("tasks after a reload = %v, want alice's and bob's", list)
	}
	if x := bob.task(g.URL, "tasks/cancel", b.TaskID, nil); x.Resp == nil || x.Resp.Error != nil {
		t.Fatalf("bob's tasks/cancel: %s", x)
	}
	if got := wait(t, up.ended, 5*time.Second, "bob's call's cancellation upstream"); got != "slow: cancelled" {
		t.Fatalf("upstream: %s", got)
	}
	close(up.release)
	alice.until(g.URL, a.TaskID, func(v taskView) bool { return v.Status == "completed" }, "completed")
	waitMetrics(t, g, map[string]float64{
		`caddy_mcp_gateway_tasks{status="working"}`:                                                       0,
		`caddy_mcp_gateway_tasks{status="completed"}`:                                                     1,
		`caddy_mcp_gateway_tasks{status="cancelled"}`:                                                     1,
		`caddy_mcp_gateway_tasks_ended_total{status="completed"}`:                                         1,
		`caddy_mcp_gateway_tasks_ended_total{status="cancelled"}`:                                         1,
		`caddy_mcp_gateway_requests_total{cell="modern-legacy",method="tasks/cancel",outcome="complete"}`: 1,
		"caddy_mcp_gateway_tasks_created_total":                                                           0, // counted before the reload
	})
	adminGET(t, g, "/mcp_gateway/tasks", &list)
	statuses := map[any]int{}
	for _, e := range list {
		statuses[e["status"]]++
	}
	if len(list) != 2 || statuses["completed"] != 1 || statuses["cancelled"] != 1 {
		t.Fatalf("tasks after the ends = %v, want one completed and one cancelled (kept until task_ttl)", list)
	}

	created := waitLogLines(t, g, "task created", 2)
	ended := waitLogLines(t, g, "task ended", 2)
	endings := map[any]int{}
	for _, l := range append(created, ended...) {
		if l["logger"] != "http.handlers.mcp_gateway" || l["tool"] != "slow" || l["upstream"] != up.url {
			t.Fatalf("task log line %v", l)
		}
	}
	for _, l := range created {
		if l["level"] != "debug" || l["status"] != "working" {
			t.Fatalf("task created line %v", l)
		}
	}
	for _, l := range ended {
		if l["level"] != "info" {
			t.Fatalf("task ended line %v", l)
		}
		endings[l["status"]]++
	}
	if endings["completed"] != 1 || endings["cancelled"] != 1 {
		t.Fatalf("task ended lines %v, want one completed and one cancelled", ended)
	}
	for _, secret := range []string{a.TaskID, b.TaskID, "alice-secret", "bob-secret"} {
		if strings.Contains(g.Log(), secret) {
			t.Fatalf("the log shows %q", secret)
		}
	}
}
