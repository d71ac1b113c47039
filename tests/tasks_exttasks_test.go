package tests

// A third-party Tasks requester, @modelcontextprotocol/ext-tasks (the Tasks
// extension's TypeScript client), in front of a fleet whose task owner dies
// while the task waits for an answer.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// extTasksEvent is one line tests/node/exttasks-client.mjs prints.
type extTasksEvent struct {
	Event   string           `json:"event"`
	TaskID  string           `json:"taskId"`
	Message string           `json:"message"`
	Status  string           `json:"status"`
	Text    string           `json:"text"`
	Error   *extTasksError   `json:"error"`
	Updates []extTasksUpdate `json:"updates"`
}

// extTasksError is an error as ext-tasks reports it.
type extTasksError struct {
	Code    *int   `json:"code"`
	Message string `json:"message"`
}

// extTasksUpdate is one tasks/update ext-tasks sent, as the gateway answered.
type extTasksUpdate struct {
	Status     int            `json:"status"`
	RetryAfter *string        `json:"retryAfter"`
	Ms         int            `json:"ms"`
	Error      *extTasksError `json:"error"`
}

// String says how ext-tasks ended.
func (e extTasksEvent) String() string {
	b, _ := json.Marshal(map[string]any{"status": e.Status, "text": e.Text, "error": e.Error, "updates": e.Updates})
	return string(b)
}

// extTasksClient is a running exttasks-client.mjs: events reads its lines,
// answer writes the test's orders, stderr is the file of its stderr.
type extTasksClient struct {
	t      *testing.T
	events chan extTasksEvent
	stdin  io.WriteCloser
	stderr string
}

// startExtTasks runs exttasks-client.mjs calling tool with args as auth,
// first through fleet[0]; its SDK Client connects to the last instance.
func startExtTasks(t *testing.T, auth, tool, args string, fleet []*gateway) *extTasksClient {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	argv := []string{filepath.Join(testsDir(t), "node", "exttasks-client.mjs"), auth, tool, args}
	for _, g := range fleet {
		argv = append(argv, g.URL)
	}
	cmd := groupCommand(ctx, nodeBin(t), argv...)
	cmd.Dir = testsDir(t)
	cmd.Env = append(os.Environ(), "MCP_SCRIPT_TIMEOUT_MS=80000")
	c := &extTasksClient{t: t, events: make(chan extTasksEvent, 8), stderr: filepath.Join(t.TempDir(), "stderr")}
	stderr, err := os.Create(c.stderr)
	if err != nil {
		t.Fatal(err)
	}
	defer stderr.Close()
	cmd.Stderr = stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if c.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(c.events)
		lines := bufio.NewScanner(stdout)
		for lines.Scan() {
			var e extTasksEvent
			if json.Unmarshal(lines.Bytes(), &e) == nil {
				c.events <- e
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
	})
	return c
}

// logs is the tail of what the client wrote on stderr so far.
func (c *extTasksClient) logs() string {
	b, _ := os.ReadFile(c.stderr)
	return tail(string(b), 4000)
}

// next is the client's next line, which must be a want event.
func (c *extTasksClient) next(want string) extTasksEvent {
	c.t.Helper()
	select {
	case e, ok := <-c.events:
		if !ok {
			c.t.Fatalf("exttasks-client ended before %q; stderr:\n%s", want, c.logs())
		}
		if e.Event != want {
			c.t.Fatalf("exttasks-client: want %q, got %s %s", want, e.Event, e)
		}
		return e
	case <-time.After(60 * time.Second):
		c.t.Fatalf("exttasks-client: no %q within 60s; stderr:\n%s", want, c.logs())
	}
	return extTasksEvent{}
}

// answer tells the client to answer its question with text through
// instance target (every later request goes there).
func (c *extTasksClient) answer(target int, text string) {
	c.t.Helper()
	if _, err := fmt.Fprintf(c.stdin, `{"target":%d,"answer":%q}`+"\n", target, text); err != nil {
		c.t.Fatal(err)
	}
}

// TestExtTasksOwnerLost: ext-tasks 0.2.2 calls the go-sdk server's tool
// ask (two questions) through a fleet of three instances sharing state_key
// and storage (task_lease 3s); the call becomes a task. Its owner is
// SIGKILLed while the task waits for the first answer, and ext-tasks
// answers it (tasks/update, from its onInputRequest) through another
// instance at once, while the dead owner's lease holds: the tasks/update
// waits out the lease and the task is taken over, so ext-tasks does not
// conclude failed (before, the 503 it got was the task's outcome for it);
// it answers the second question there and the task completes with both
// answers, the tool having run once.
func TestExtTasksOwnerLost(t *testing.T) {
	t.Parallel()
	up := newResumableServer(t)
	storage := t.TempDir()
	fleet := durableFleetIn(t, "\t\tupstream "+up.url+" {\n\t\t\tera legacy\n\t\t}\n\t\ttask ask required 0\n\t\ttask_lease 3s", storage)
	c := startExtTasks(t, "Bearer alice", "ask", `{"topic":"tea"}`, fleet)

	if q := c.next("asked"); q.Message != "About tea?" || q.TaskID == "" {
		t.Fatalf("first question %+v", q)
	}
	awaitRecordWrite(storage)
	fleet[0].kill(t)
	c.answer(1, "a")
	if q := c.next("asked"); q.Message != "Sure?" {
		t.Fatalf("second question %+v", q)
	}
	c.answer(1, "b")
	end := c.next("outcome")
	t.Logf("ext-tasks ended: %s", end)
	if end.Status != "completed" || end.Text != "accept:a,accept:b" {
		t.Fatalf("ext-tasks ended %s, want completed with accept:a,accept:b", end)
	}
	if n := up.runs.Load(); n != 1 {
		t.Fatalf("the tool ran %d times upstream, want once", n)
	}
}
