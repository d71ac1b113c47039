package support

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// ModernTasksExtension names the 2026-07-28 Tasks extension in capabilities.
const ModernTasksExtension = "io.modelcontextprotocol/tasks"

// ModernTasksServer is a modern (2026-07-28), stateless MCP server whose tools
// answer tools/call with tasks (the Tasks extension, SEP-2663), served
// with tasks/get, tasks/update and tasks/cancel. It is a fixture written
// for the tests because no real server implements the 2026 Tasks
// extension yet (neither the TypeScript SDK 2.x nor the go-sdk 1.8 does):
// raw JSON-RPC over HTTP, one JSON answer per POST, just enough of the wire
// for a client that follows tasks. It checks what a server must (the
// MCP-Protocol-Version, Mcp-Method and Mcp-Name headers, -32020; the
// extension declared in the request's capabilities, -32021, before any
// task lookup, -32602) and records every request it receives.
//
// Its tools, all tasks (taskSupport required) but `quick`:
//   - slow_task {ms}: completes after ms milliseconds with the text
//     "slow done after {ms}ms".
//   - ask_task {}: at once input_required, asking one form elicitation
//     {name: string} under a fresh key; answered (accept), it completes with
//     "Hello, {name}!"; declined, with "Nobody".
//   - failing_task {}: completes with an isError tool result "the job failed".
//   - broken_task {}: fails with the JSON-RPC error -31001 "the job broke: disk full".
//   - endless_task {ttlMs}: works for ever (until cancelled); ttlMs, when
//     given, is the task's.
//   - unreadable_task {}: works for ever, and tasks/get about it fails
//     with -32603 "task storage unavailable".
//   - quick {}: no task, the text "quick".
type ModernTasksServer struct {
	// URL is the server's MCP endpoint.
	URL string
	// PollIntervalMs is the pollIntervalMs of every task (default 50).
	PollIntervalMs int
	// Cancelled receives the taskId of every tasks/cancel (buffered).
	Cancelled chan string

	mu    sync.Mutex
	tasks map[string]*mtTask
	log   []ModernTasksRequest
	next  atomic.Int64
}

// ModernTasksRequest is one request the ModernTasksServer received.
type ModernTasksRequest struct {
	Method        string
	HeaderMethod  string // Mcp-Method
	HeaderName    string // Mcp-Name
	TaskID        string // params.taskId (tasks/*)
	Params        json.RawMessage
	DeclaredTasks bool // the request's _meta capabilities declared the extension
}

type mtTask struct {
	id, tool  string
	created   time.Time
	ms        int
	ttlMs     int
	status    string // for ask_task, broken and cancelled ones
	asked     string // the key of ask_task's outstanding question
	result    json.RawMessage
	err       json.RawMessage
	statusMsg string
}

// NewModernTasksServer serves a ModernTasksServer on 127.0.0.1 until the test ends.
func NewModernTasksServer(t testing.TB) *ModernTasksServer {
	s := &ModernTasksServer{PollIntervalMs: 50, Cancelled: make(chan string, 64), tasks: map[string]*mtTask{}}
	s.URL = Serve(t, s)
	return s
}

// Requests returns the requests received so far with method ("" for all).
func (s *ModernTasksServer) Requests(method string) []ModernTasksRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []ModernTasksRequest
	for _, r := range s.log {
		if method == "" || r.Method == method {
			out = append(out, r)
		}
	}
	return out
}

type mtRPC struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
		TaskID    string          `json:"taskId"`
		Responses map[string]struct {
			Action  string         `json:"action"`
			Content map[string]any `json:"content"`
		} `json:"inputResponses"`
		Meta map[string]json.RawMessage `json:"_meta"`
	} `json:"params"`
}

// ServeHTTP implements http.Handler.
func (s *ModernTasksServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		return
	}
	var m mtRPC
	if err := json.Unmarshal(body, &m); err != nil {
		mtWrite(w, http.StatusBadRequest, nil, nil, mtError(-32700, "Parse error", nil))
		return
	}
	if len(m.ID) == 0 { // a notification
		w.WriteHeader(http.StatusAccepted)
		return
	}
	var caps struct {
		Extensions map[string]json.RawMessage `json:"extensions"`
	}
	_ = json.Unmarshal(m.Params.Meta["io.modelcontextprotocol/clientCapabilities"], &caps)
	_, declared := caps.Extensions[ModernTasksExtension]
	s.mu.Lock()
	s.log = append(s.log, ModernTasksRequest{Method: m.Method, HeaderMethod: r.Header.Get("Mcp-Method"), HeaderName: r.Header.Get("Mcp-Name"),
		TaskID: m.Params.TaskID, Params: mtParams(body), DeclaredTasks: declared})
	s.mu.Unlock()

	isTask := m.Method == "tasks/get" || m.Method == "tasks/update" || m.Method == "tasks/cancel"
	wantName := ""
	switch {
	case m.Method == "tools/call":
		wantName = m.Params.Name
	case isTask:
		wantName = m.Params.TaskID
	}
	switch {
	case r.Header.Get("MCP-Protocol-Version") != "2026-07-28":
		mtWrite(w, http.StatusBadRequest, m.ID, nil, mtError(-32020, "MCP-Protocol-Version must be 2026-07-28", nil))
		return
	case r.Header.Get("Mcp-Method") != m.Method:
		mtWrite(w, http.StatusBadRequest, m.ID, nil, mtError(-32020, "Mcp-Method does not match the method", nil))
		return
	case wantName != "" && r.Header.Get("Mcp-Name") != wantName:
		mtWrite(w, http.StatusBadRequest, m.ID, nil, mtError(-32020, "Mcp-Name does not match", nil))
		return
	case isTask && !declared:
		mtWrite(w, http.StatusOK, m.ID, nil, mtRequiredTasks())
		return
	}
	switch m.Method {
	case "server/discover":
		mtWrite(w, http.StatusOK, m.ID, map[string]any{
			"resultType": "complete", "supportedVersions": []string{"2026-07-28"},
			"capabilities": map[string]any{"tools": map[string]any{}, "extensions": map[string]any{ModernTasksExtension: map[string]any{}}},
			"_meta":        map[string]any{"io.modelcontextprotocol/serverInfo": map[string]any{"name": "tasks-fixture", "version": "1"}},
			"ttlMs":        0, "cacheScope": "private",
		}, nil)
	case "tools/list":
		var tools []map[string]any
		for _, name := range []string{"slow_task", "ask_task", "failing_task", "broken_task", "endless_task", "unreadable_task", "quick"} {
			support := "required"
			if name == "quick" {
				support = "forbidden"
			}
			tools = append(tools, map[string]any{"name": name, "inputSchema": map[string]any{"type": "object"},
				"execution": map[string]any{"taskSupport": support}})
		}
		mtWrite(w, http.StatusOK, m.ID, map[string]any{"resultType": "complete", "tools": tools}, nil)
	case "tools/call":
		s.call(w, m, declared)
	case "tasks/get", "tasks/update", "tasks/cancel":
		s.task(w, m)
	default:
		mtWrite(w, http.StatusOK, m.ID, nil, mtError(-32601, "Method not found: "+m.Method, nil))
	}
}

func (s *ModernTasksServer) call(w http.ResponseWriter, m mtRPC, declared bool) {
	var args struct {
		Ms    int `json:"ms"`
		TTLMs int `json:"ttlMs"`
	}
	_ = json.Unmarshal(m.Params.Arguments, &args)
	switch m.Params.Name {
	case "quick":
		mtWrite(w, http.StatusOK, m.ID, map[string]any{"resultType": "complete", "content": []any{mtText("quick")}}, nil)
		return
	case "slow_task", "ask_task", "failing_task", "broken_task", "endless_task", "unreadable_task":
	default:
		mtWrite(w, http.StatusOK, m.ID, nil, mtError(-32602, "unknown tool "+m.Params.Name, nil))
		return
	}
	if !declared {
		mtWrite(w, http.StatusOK, m.ID, nil, mtRequiredTasks())
		return
	}
	t := &mtTask{id: fmt.Sprintf("task-%d-%d", time.Now().UnixNano()%1e6, s.next.Add(1)), tool: m.Params.Name,
		created: time.Now(), ms: args.Ms, ttlMs: args.TTLMs, status: "working"}
	switch t.tool {
	case "ask_task":
		t.status, t.asked = "input_required", fmt.Sprintf("who-%d", s.next.Add(1))
	case "failing_task":
		t.status = "completed"
		t.result, _ = json.Marshal(map[string]any{"content": []any{mtText("the job failed")}, "isError": true})
	case "broken_task":
		t.status, t.err = "failed", mtError(-31001, "the job broke: disk full", nil)
	}
	s.mu.Lock()
	s.tasks[t.id] = t
	view := s.view(t, false)
	s.mu.Unlock()
	view["resultType"] = "task"
	mtWrite(w, http.StatusOK, m.ID, view, nil)
}

func (s *ModernTasksServer) task(w http.ResponseWriter, m mtRPC) {
	s.mu.Lock()
	t := s.tasks[m.Params.TaskID]
	if t == nil {
		s.mu.Unlock()
		mtWrite(w, http.StatusOK, m.ID, nil, mtError(-32602, "unknown task "+m.Params.TaskID, nil))
		return
	}
	var res map[string]any
	switch m.Method {
	case "tasks/get":
		if t.tool == "unreadable_task" {
			s.mu.Unlock()
			mtWrite(w, http.StatusOK, m.ID, nil, mtError(-32603, "task storage unavailable", nil))
			return
		}
		res = s.view(t, true)
	case "tasks/update":
		if a, ok := m.Params.Responses[t.asked]; ok && t.status == "input_required" {
			name := "Nobody"
			if a.Action == "accept" {
				name = fmt.Sprint("Hello, ", a.Content["name"], "!")
			}
			t.status, t.asked = "completed", ""
			t.result, _ = json.Marshal(map[string]any{"content": []any{mtText(name)}})
		}
		res = map[string]any{}
	case "tasks/cancel":
		s.settle(t)
		if t.status != "completed" && t.status != "failed" && t.status != "cancelled" {
			t.status, t.statusMsg = "cancelled", "cancelled by the client"
		}
		select {
		case s.Cancelled <- t.id:
		default:
		}
		res = map[string]any{}
	}
	s.mu.Unlock()
	res["resultType"] = "complete"
	mtWrite(w, http.StatusOK, m.ID, res, nil)
}

// settle moves a slow task to completed once its time has come.
func (s *ModernTasksServer) settle(t *mtTask) {
	if t.tool == "slow_task" && t.status == "working" && time.Since(t.created) >= time.Duration(t.ms)*time.Millisecond {
		t.status = "completed"
		t.result, _ = json.Marshal(map[string]any{"content": []any{mtText(fmt.Sprintf("slow done after %dms", t.ms))}})
	}
}

// view is the task as tasks/get shows it (detailed) or as created.
func (s *ModernTasksServer) view(t *mtTask, detailed bool) map[string]any {
	s.settle(t)
	now := time.Now().UTC().Format(time.RFC3339Nano)
	v := map[string]any{"taskId": t.id, "status": t.status, "createdAt": t.created.UTC().Format(time.RFC3339Nano),
		"lastUpdatedAt": now, "ttlMs": nil, "pollIntervalMs": s.PollIntervalMs}
	if t.ttlMs > 0 {
		v["ttlMs"] = t.ttlMs
	}
	if t.statusMsg != "" {
		v["statusMessage"] = t.statusMsg
	}
	if !detailed {
		return v
	}
	switch t.status {
	case "input_required":
		v["inputRequests"] = map[string]any{t.asked: map[string]any{"method": "elicitation/create", "params": map[string]any{
			"mode": "form", "message": "What is your name?",
			"requestedSchema": Form(map[string]any{"name": map[string]any{"type": "string"}})}}}
	case "completed":
		v["result"] = t.result
	case "failed":
		v["error"] = t.err
	}
	return v
}

func mtText(s string) map[string]any { return map[string]any{"type": "text", "text": s} }

func mtError(code int, msg string, data any) json.RawMessage {
	e := map[string]any{"code": code, "message": msg}
	if data != nil {
		e["data"] = data
	}
	b, _ := json.Marshal(e)
	return b
}

func mtRequiredTasks() json.RawMessage {
	return mtError(-32021, "this tool runs as a task: declare the Tasks extension",
		map[string]any{"requiredCapabilities": map[string]any{"extensions": map[string]any{ModernTasksExtension: map[string]any{}}}})
}

// mtWrite writes a JSON-RPC response with result or error.
func mtWrite(w http.ResponseWriter, status int, id json.RawMessage, result any, errObj json.RawMessage) {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	msg := map[string]any{"jsonrpc": "2.0", "id": id}
	if errObj != nil {
		msg["error"] = errObj
	} else {
		msg["result"] = result
	}
	b, _ := json.Marshal(msg)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// mtParams returns the params of the JSON-RPC message b ("{}" if none).
func mtParams(b []byte) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(b, &m) != nil || m["params"] == nil {
		return json.RawMessage("{}")
	}
	return m["params"]
}
