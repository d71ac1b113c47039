package tests

// Attacks on the tasks the gateway hosts: forged,
// tampered, oversized and malformed taskIds, another principal's taskId,
// and a fleet whose owner instance is gone. Every answer must be a clear
// JSON-RPC error, nothing may reach the upstream, and the victim's task
// must go on undisturbed.

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/tests/support"
)

// recordedTaskServer is a legacy go-sdk server written for the attack tests
// (no published server lets a test decide when a call ends): its tool
// `slow` blocks until release is closed, then answers "slow done". Every
// POST it receives is recorded with its JSON-RPC method, so a test can say
// that nothing reached it.
type recordedTaskServer struct {
	url     string
	release chan struct{}
	started chan string // "slow" when a call starts
	ended   chan string // "slow: done" or "slow: cancelled"

	mu    sync.Mutex
	posts []string // the JSON-RPC method of every POST ("" for a response)
}

func newRecordedTaskServer(t *testing.T) *recordedTaskServer {
	t.Helper()
	s := &recordedTaskServer{release: make(chan struct{}), started: make(chan string, 16), ended: make(chan string, 16)}
	server := mcp.NewServer(&mcp.Implementation{Name: "task-attack-server", Version: "1"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "slow", Description: "Blocks until the test releases it, then answers."},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			s.started <- "slow"
			select {
			case <-s.release:
				s.ended <- "slow: done"
				return support.Text("slow done"), nil, nil
			case <-ctx.Done():
				s.ended <- "slow: cancelled"
				return nil, nil, ctx.Err()
			}
		})
	sdk := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
	s.url = support.Serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			var m struct {
				Method string `json:"method"`
			}
			_ = json.Unmarshal(body, &m)
			s.mu.Lock()
			s.posts = append(s.posts, m.Method)
			s.mu.Unlock()
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		sdk.ServeHTTP(w, r)
	}))
	return s
}

// postCount returns how many POSTs the server received.
func (s *recordedTaskServer) postCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.posts)
}

// postsSince returns the methods of the POSTs after the first n.
func (s *recordedTaskServer) postsSince(n int) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.posts[n:]...)
}

func (s *recordedTaskServer) block(extra string) string {
	return "\t\tupstream " + s.url + " {\n\t\t\tera legacy\n\t\t}\n\t\ttask slow optional 0" + extra
}

// rawTaskRequest sends method for a taskId given as raw JSON, with name as
// Mcp-Name, as the principal auth, declaring the Tasks extension.
func rawTaskRequest(t *testing.T, url, auth, method, name string, taskID json.RawMessage, id int) rpcExchange {
	t.Helper()
	m := meta(modernVersion)
	m["io.modelcontextprotocol/clientCapabilities"] = taskCaps()
	params := map[string]any{"_meta": m, "taskId": "TASK-ID"}
	if method == "tasks/update" {
		params["inputResponses"] = map[string]any{"elicit-1": map[string]any{"action": "accept", "content": map[string]any{"name": "Mallory"}}}
	}
	hdr := modernHeaders(modernVersion, method, name)
	hdr["Authorization"] = auth
	// Spliced in: encoding/json refuses to write JSON nested that deep.
	body := strings.Replace(rpcBody(t, id, method, params), `"TASK-ID"`, string(taskID), 1)
	return postRPC(t, url, hdr, body, id)
}

// jsonString is s as a JSON string.
func jsonString(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}

// nestedJSON is an object nested depth levels deep.
func nestedJSON(depth int) json.RawMessage {
	return json.RawMessage(strings.Repeat(`{"a":`, depth) + `1` + strings.Repeat(`}`, depth))
}

// flipOne changes one character in the middle of a base64url token into
// another base64url character: the token still decodes, and no longer
// opens.
func flipOne(id string) string {
	b := []byte(id)
	i := len(b) / 2
	if b[i] == 'A' {
		b[i] = 'B'
	} else {
		b[i] = 'A'
	}
	return string(b)
}

// TestTaskAttackIDs: forged, tampered, oversized, nested and non-string
// taskIds in tasks/get, tasks/update and tasks/cancel are refused with
// -32602 (-32700 for JSON nested past the parser's bound), status 400,
// and nothing reaches the upstream; the real task is untouched and
// completes with its result.
func TestTaskAttackIDs(t *testing.T) {
	t.Parallel()
	up := newRecordedTaskServer(t)
	g := startGateway(t, up.block(""))
	alice := &taskClient{t: t, auth: "Bearer alice"}
	created := parseTask(t, alice.call(g.URL, "slow"))
	wait(t, up.started, 5*time.Second, "the slow call upstream")

	random := make([]byte, 96)
	_, _ = rand.Read(random)
	forged := base64.RawURLEncoding.EncodeToString(random)
	huge := strings.Repeat("A", 1<<20)
	attacks := []struct {
		what   string
		name   string // Mcp-Name
		taskID json.RawMessage
		code   int
	}{
		{"a forged taskId", forged, jsonString(forged), -32602},
		{"a tampered taskId", flipOne(created.TaskID), jsonString(flipOne(created.TaskID)), -32602},
		{"a truncated taskId", created.TaskID[:len(created.TaskID)-4], jsonString(created.TaskID[:len(created.TaskID)-4]), -32602},
		// No Mcp-Name can match: the header check (-32020) comes first.
		{"an empty taskId", "", jsonString(""), -32020},
		{"a 1 MiB taskId (Mcp-Name a real one)", created.TaskID, jsonString(huge), -32020},
		{"a number", "42", json.RawMessage(`42`), -32602},
		{"null", "null", json.RawMessage(`null`), -32602},
		{"an array", "x", json.RawMessage(`["` + created.TaskID + `"]`), -32602},
		{"an object nested 100 deep", "x", nestedJSON(100), -32602},
		{"an object nested 100000 deep", "x", nestedJSON(100000), -32700},
	}
	before := up.postCount()
	if before == 0 {
		t.Fatal("the recorder saw no POST of the call that made the task")
	}
	id := 100
	for _, a := range attacks {
		for _, method := range []string{"tasks/get", "tasks/update", "tasks/cancel"} {
			id++
			x := rawTaskRequest(t, g.URL, alice.auth, method, a.name, a.taskID, id)
			if x.Resp == nil || x.Resp.Error == nil || x.Resp.Error.Code != a.code || x.Status != http.StatusBadRequest {
				t.Errorf("%s in %s: want HTTP 400 and %d, got %s", a.what, method, a.code, x)
			} else if a.name != created.TaskID && strings.Contains(x.Raw, created.TaskID) {
				t.Errorf("%s in %s: the answer echoes the real taskId: %s", a.what, method, x)
			}
		}
	}
	// The 1 MiB taskId in Mcp-Name too: refused before it is read
	// (Go's 1 MiB header bound, HTTP 431), or as unknown.
	resp, err := tryPost(g.URL, map[string]string{"Authorization": alice.auth, "MCP-Protocol-Version": modernVersion,
		"Mcp-Method": "tasks/get", "Mcp-Name": huge}, `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"`+huge+`"}}`)
	if err != nil {
		t.Fatalf("a 1 MiB Mcp-Name: %v", err)
	}
	resp.Body.Close()
	t.Logf("a 1 MiB taskId in Mcp-Name: HTTP %d", resp.StatusCode)
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge && resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a 1 MiB taskId in Mcp-Name: HTTP %d, want 431 or 400", resp.StatusCode)
	}
	if got := up.postsSince(before); len(got) > 0 {
		t.Fatalf("attacks reached the upstream: %v", got)
	}

	// The real task is untouched.
	if v := parseTask(t, alice.task(g.URL, "tasks/get", created.TaskID, nil)); v.Status != "working" {
		t.Fatalf("after the attacks: %+v, want working", v)
	}
	close(up.release)
	done := alice.until(g.URL, created.TaskID, func(v taskView) bool { return v.Status == "completed" }, "completed")
	if done.Result == nil || len(done.Result.Content) == 0 || done.Result.Content[0].Text != "slow done" {
		t.Fatalf("completed task %+v, want slow done", done)
	}
	g.alive(t)
}

// TestTaskAttackOtherPrincipal: bob, holding alice's real taskId, gets
// -32602 on tasks/get, tasks/update and tasks/cancel, the same answer as
// for a taskId that never existed; nothing reaches the upstream, and
// alice's task goes on and completes with its result.
func TestTaskAttackOtherPrincipal(t *testing.T) {
	t.Parallel()
	up := newRecordedTaskServer(t)
	g := startGateway(t, up.block(""))
	alice := &taskClient{t: t, auth: "Bearer alice"}
	created := parseTask(t, alice.call(g.URL, "slow"))
	wait(t, up.started, 5*time.Second, "the slow call upstream")

	random := make([]byte, 96)
	_, _ = rand.Read(random)
	never := base64.RawURLEncoding.EncodeToString(random)
	before := up.postCount()
	for i, auth := range []string{"Bearer bob", "", "Bearer Alice"} {
		for j, method := range []string{"tasks/get", "tasks/update", "tasks/cancel"} {
			id := 10*i + j + 1
			x := rawTaskRequest(t, g.URL, auth, method, created.TaskID, jsonString(created.TaskID), id)
			y := rawTaskRequest(t, g.URL, auth, method, never, jsonString(never), id)
			if x.Resp == nil || x.Resp.Error == nil || x.Resp.Error.Code != -32602 || x.Status != http.StatusBadRequest {
				t.Errorf("principal %q, %s on alice's task: want HTTP 400 and -32602, got %s", auth, method, x)
				continue
			}
			if y.Resp == nil || y.Resp.Error == nil || x.Resp.Error.Message != y.Resp.Error.Message {
				t.Errorf("principal %q, %s: alice's task is told apart from none: %s vs %s", auth, method, x, y)
			}
		}
	}
	if got := up.postsSince(before); len(got) > 0 {
		t.Fatalf("another principal's requests reached the upstream: %v", got)
	}
	select {
	case e := <-up.ended:
		t.Fatalf("alice's call ended upstream: %s", e)
	default:
	}
	if v := parseTask(t, alice.task(g.URL, "tasks/get", created.TaskID, nil)); v.Status != "working" {
		t.Fatalf("alice's task after bob's attempts: %+v, want working", v)
	}
	close(up.release)
	done := alice.until(g.URL, created.TaskID, func(v taskView) bool { return v.Status == "completed" }, "completed")
	if done.Result == nil || len(done.Result.Content) == 0 || done.Result.Content[0].Text != "slow done" {
		t.Fatalf("alice's completed task %+v, want slow done", done)
	}
}

// TestTaskAttackOwnerGone: in a fleet whose instances advertise their
// addresses (which the taskId carries, sealed), the instance holding a
// task is frozen (SIGSTOP): tasks/get for it on another instance ends on
// the relay's 10 s bound with HTTP 504 (-32603); thawed, it serves the
// task again. Then it is killed: tasks/get, tasks/update and tasks/cancel
// on the other instances answer at once with HTTP 502 and -32603 naming
// the owner by its id. No answer shows an internal address.
func TestTaskAttackOwnerGone(t *testing.T) {
	t.Parallel()
	up := newRecordedTaskServer(t)
	fleet := startFleet(t, up.block(""), "advertise")
	alice := &taskClient{t: t, auth: "Bearer alice"}
	created := parseTask(t, alice.call(fleet[0].URL, "slow"))
	wait(t, up.started, 5*time.Second, "the slow call upstream")
	if v := parseTask(t, alice.task(fleet[1].URL, "tasks/get", created.TaskID, nil)); v.Status != "working" {
		t.Fatalf("tasks/get through another instance: %+v", v)
	}

	owner := fleet[0]
	// ask sends method for alice's task to g and returns the answer,
	// failing the test if none comes within 30 s (a hang).
	ask := func(g *gateway, method string, id int) (int, []byte, *rpcResponse) {
		t.Helper()
		m := meta(modernVersion)
		m["io.modelcontextprotocol/clientCapabilities"] = taskCaps()
		params := map[string]any{"_meta": m, "taskId": created.TaskID}
		if method == "tasks/update" {
			params["inputResponses"] = map[string]any{}
		}
		hdr := modernHeaders(modernVersion, method, created.TaskID)
		hdr["Authorization"] = alice.auth
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		resp, err := tryPostContext(ctx, g.URL, hdr, rpcBody(t, id, method, params))
		if err != nil {
			t.Fatalf("%s for the owner's task: no answer within 30s: %v", method, err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("%s for the owner's task: reading the answer: %v", method, err)
		}
		var r rpcResponse
		if json.Unmarshal(body, &r) != nil {
			t.Fatalf("%s for the owner's task: HTTP %d, not JSON-RPC: %s", method, resp.StatusCode, body)
		}
		return resp.StatusCode, body, &r
	}
	ownerAddr := fmt.Sprintf("127.0.0.1:%d", owner.Port)
	hidden := func(what string, body []byte) {
		t.Helper()
		if strings.Contains(string(body), ownerAddr) || strings.Contains(string(body), "127.0.0.1") {
			t.Fatalf("%s: the answer shows an internal address: %s", what, body)
		}
	}

	// Frozen (SIGSTOP: it accepts connections and answers nothing): the
	// forwarded request ends on the relay's first-byte bound, 504.
	owner.freeze(t)
	status, body, r := ask(fleet[1], "tasks/get", 1)
	if err := syscall.Kill(owner.cmd.Process.Pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if r.Error == nil || r.Error.Code != -32603 || status != http.StatusGatewayTimeout {
		t.Fatalf("tasks/get with the owner frozen: want HTTP 504 and -32603, got HTTP %d %s", status, body)
	}
	hidden("tasks/get with the owner frozen", body)
	// Thawed, it serves its task again.
	if v := parseTask(t, alice.task(fleet[2].URL, "tasks/get", created.TaskID, nil)); v.Status != "working" {
		t.Fatalf("tasks/get with the owner thawed: %+v", v)
	}

	// Gone (SIGKILL): 502 at once.
	if err := syscall.Kill(owner.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-owner.done
	for i, method := range []string{"tasks/get", "tasks/update", "tasks/cancel"} {
		for _, g := range fleet[1:] {
			status, body, r := ask(g, method, 10+i)
			if r.Error == nil || r.Error.Code != -32603 || status != http.StatusBadGateway {
				t.Fatalf("%s with the owner gone: want HTTP 502 and -32603, got HTTP %d %s", method, status, body)
			}
			hidden(method+" with the owner gone", body)
			if !strings.Contains(r.Error.Message, "unreachable") {
				t.Errorf("%s with the owner gone: unclear message %q", method, r.Error.Message)
			}
		}
	}
	for _, g := range fleet[1:] {
		g.alive(t)
	}
}
