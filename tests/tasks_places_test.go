package tests

// Task places: a gateway-hosted task holds its place
// toward max_tasks and max_tasks_per_principal only while it runs.

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/tests/support"
)

// newPlacesServer is a go-sdk legacy server written for this test: its tool
// quick answers at once, work works until cancelled (each start is
// reported on started).
func newPlacesServer(t *testing.T) (url string, started <-chan string) {
	t.Helper()
	ch := make(chan string, 64)
	server := mcp.NewServer(&mcp.Implementation{Name: "places-test-server", Version: "1"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "quick", Description: "Answers at once."},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return support.Text("done"), nil, nil
		})
	mcp.AddTool(server, &mcp.Tool{Name: "work", Description: "Works until cancelled."},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			ch <- "work"
			<-ctx.Done()
			return nil, nil, ctx.Err()
		})
	return support.ServeMCP(t, server, nil), ch
}

// placesGateway starts a gateway in front of newPlacesServer with quick
// required (a completed task), work optional at once, max_tasks 4 and
// max_tasks_per_principal 2.
func placesGateway(t *testing.T) (*gateway, <-chan string) {
	t.Helper()
	up, started := newPlacesServer(t)
	g := startGateway(t, "\t\tupstream "+up+" {\n\t\t\tera legacy\n\t\t}\n\t\ttask quick required\n\t\ttask work optional 0"+
		"\n\t\tmax_tasks 4\n\t\tmax_tasks_per_principal 2\n\t\ttask_ttl 10m")
	return g, started
}

// TestTaskPlacesFinishedKeepNoOneOut: with max_tasks 4 and
// max_tasks_per_principal 2, two invented principals' four instantly
// completed tasks keep nobody out: a victim's call and their own next ones
// become tasks (the finished tasks used to hold their places for the whole
// task_ttl: the victim got 503, they 429). The finished tasks stay
// readable.
func TestTaskPlacesFinishedKeepNoOneOut(t *testing.T) {
	t.Parallel()
	g, _ := placesGateway(t)
	mallory := []*taskClient{{t: t, auth: "Bearer invented-1"}, {t: t, auth: "Bearer invented-2"}}
	victim := &taskClient{t: t, auth: "Bearer victim"}

	var done []string
	for _, m := range mallory {
		for range 2 {
			v := parseTask(t, m.call(g.URL, "quick"))
			if v.Status != "completed" {
				t.Fatalf("quick: %+v, want a completed task", v)
			}
			done = append(done, v.TaskID)
		}
	}
	if v := parseTask(t, victim.call(g.URL, "quick")); v.Status != "completed" {
		t.Fatalf("the victim's call: %+v", v)
	}
	for _, m := range mallory {
		parseTask(t, m.call(g.URL, "quick"))
	}
	if v := parseTask(t, mallory[0].task(g.URL, "tasks/get", done[0], nil)); v.Status != "completed" || v.Result == nil {
		t.Fatalf("a finished task's record: %+v, want it readable until task_ttl", v)
	}
}

// TestTaskPlacesCancelFrees: a principal whose two running tasks got 429
// for a third, naming tasks/cancel, cancels them and starts new tasks at
// once (it used to stay at 429 until task_ttl); a full max_tasks refuses
// with 503 saying a place frees when a task ends, and takes the next call
// once tasks were cancelled. Cancelled tasks stay readable.
func TestTaskPlacesCancelFrees(t *testing.T) {
	t.Parallel()
	g, started := placesGateway(t)
	alice := &taskClient{t: t, auth: "Bearer alice"}
	bob := &taskClient{t: t, auth: "Bearer bob"}
	carol := &taskClient{t: t, auth: "Bearer carol"}
	var running []string
	for _, c := range []*taskClient{alice, alice, bob, bob} {
		running = append(running, parseTask(t, c.call(g.URL, "work")).TaskID)
		wait(t, started, 5*time.Second, "a work call upstream")
	}
	x := alice.call(g.URL, "work")
	wantRPCError(t, x, -32603, "alice's third running task")
	if x.Status != http.StatusTooManyRequests || !strings.Contains(x.Resp.Error.Message, "max_tasks_per_principal") ||
		!strings.Contains(x.Resp.Error.Message, "tasks/cancel") {
		t.Errorf("alice's third running task: %s", x)
	}
	x = carol.call(g.URL, "work")
	wantRPCError(t, x, -32603, "carol's task with max_tasks running")
	if x.Status != http.StatusServiceUnavailable || !strings.Contains(x.Resp.Error.Message, "max_tasks") ||
		!strings.Contains(x.Resp.Error.Message, "when a task ends") {
		t.Errorf("carol's task: %s", x)
	}

	for _, id := range running[:2] {
		if r := alice.task(g.URL, "tasks/cancel", id, nil); r.Resp == nil || r.Resp.Error != nil {
			t.Fatalf("tasks/cancel: %s", r)
		}
	}
	parseTask(t, alice.call(g.URL, "work"))
	parseTask(t, carol.call(g.URL, "work"))
	for i := range 2 {
		wait(t, started, 5*time.Second, fmt.Sprint("work call ", i, " after the cancellations"))
	}
	if v := parseTask(t, alice.task(g.URL, "tasks/get", running[0], nil)); v.Status != "cancelled" {
		t.Fatalf("a cancelled task's record: %+v", v)
	}
}
