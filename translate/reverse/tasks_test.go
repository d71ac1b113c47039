package reverse

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/seal"
)

func TestRevPollInterval(t *testing.T) {
	for raw, want := range map[string]time.Duration{
		`50`:     revPollFloor,
		`250`:    250 * time.Millisecond,
		`600000`: revPollCeiling,
		`0`:      revPollDefault,
		`-5`:     revPollDefault,
		`"1000"`: revPollDefault,
		`null`:   revPollDefault,
	} {
		if got := revPollInterval(gjson.Parse(raw)); got != want {
			t.Errorf("revPollInterval(%s) = %v, want %v", raw, got, want)
		}
	}
	if got := revPollInterval(gjson.Result{}); got != revPollDefault {
		t.Errorf("no pollIntervalMs: %v, want %v", got, revPollDefault)
	}
}

func TestRevDeclareTasks(t *testing.T) {
	for in, want := range map[string]string{
		`{}`: `{"extensions":{"io.modelcontextprotocol/tasks":{}}}`,
		`{"elicitation":{},"extensions":{"x/y":{"a":1}}}`: `{"elicitation":{},"extensions":{"io.modelcontextprotocol/tasks":{},"x/y":{"a":1}}}`,
		`not json`: `{"extensions":{"io.modelcontextprotocol/tasks":{}}}`,
	} {
		if got := string(revDeclareTasks([]byte(in))); got != want {
			t.Errorf("revDeclareTasks(%s) = %s, want %s", in, got, want)
		}
	}
}

// TestUpstreamRequestTasks: tools/call declares the Tasks extension, other
// methods do not, nor tools/call to an upstream whose tasks are off.
func TestUpstreamRequestTasks(t *testing.T) {
	caps := translate.MetaPath("params", translate.MetaClientCapabilities) + ".extensions"
	on := &Session{ClientSession: seal.ClientSession{Upstream: "http://a/mcp", Capabilities: []byte(`{}`)}}
	off := &Session{ClientSession: on.ClientSession, Target: translate.Target{Upstream: "http://a/mcp", NoTasks: true}}
	for _, c := range []struct {
		s      *Session
		method string
		want   bool
	}{
		{on, "tools/call", true},
		{on, "prompts/get", false},
		{off, "tools/call", false},
	} {
		body, err := upstreamRequest("gw-1", c.method, []byte(`{"name":"x"}`), c.s, "", nil, "")
		if err != nil {
			t.Fatal(err)
		}
		if got := gjson.GetBytes(body, caps).Get(gjson.Escape(reverseTasksExtension)).Exists(); got != c.want {
			t.Errorf("%s (tasks off: %t): extension declared %t, want %t: %s", c.method, c.s.Target.NoTasks, got, c.want, body)
		}
	}
}

// revTaskUpstream is a modern server answering tools/call with the task
// created and every tasks/get with get (a JSON-RPC result or error member,
// e.g. `"result":{...}`), recording the methods it receives.
func revTaskUpstream(t *testing.T, created, get string) (string, func() []string) {
	t.Helper()
	var mu sync.Mutex
	var methods []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		m := gjson.ParseBytes(body)
		mu.Lock()
		methods = append(methods, m.Get("method").Str)
		mu.Unlock()
		id := m.Get("id").Raw
		w.Header().Set("Content-Type", "application/json")
		switch m.Get("method").Str {
		case "server/discover":
			_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":`+id+`,"result":{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{"tools":{}},"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"reverse-test","version":"1"}}}}`)
		case "tools/call":
			_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":`+id+`,"result":`+created+`}`)
		case "tasks/get":
			_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":`+id+`,`+get+`}`)
		default:
			_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":`+id+`,"result":{"resultType":"complete"}}`)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), methods...)
	}
}

// TestFollowTaskMalformed: tasks the bridge cannot follow end the call with
// -32603 saying why, and one it stops following is cancelled upstream.
func TestFollowTaskMalformed(t *testing.T) {
	const task = `{"resultType":"task","taskId":"t1","status":"working","pollIntervalMs":100}`
	for _, c := range []struct {
		name, created, get, want string
		cancelled                bool
	}{
		{"no taskId", `{"resultType":"task","status":"working"}`, `"result":{}`, "a task without a taskId", false},
		{"unknown status", task, `"result":{"resultType":"complete","taskId":"t1","status":"paused"}`, `unknown status "paused"; it was cancelled`, true},
		{"gone", task, `"error":{"code":-32602,"message":"unknown task t1"}`, "no longer knows task t1: unknown task t1", false},
		{"no result", task, `"result":{"resultType":"complete","taskId":"t1","status":"completed"}`, "completed without a result object", false},
		{"failed without error", task, `"result":{"resultType":"complete","taskId":"t1","status":"failed"}`, "failed without a JSON-RPC error object", false},
		{"cancelled upstream", task, `"result":{"resultType":"complete","taskId":"t1","status":"cancelled","statusMessage":"operator"}`, "the upstream cancelled task t1: operator", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			url, methods := revTaskUpstream(t, c.created, c.get)
			rv := newTestReverse(t)
			s := openSession(t, rv, url, "p", `{}`)
			sink := newRecordingSink()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			rv.Serve(ctx, s, callRequest(t, 3, 0), sink)
			f := wantFinal(t, sink)
			e := gjson.GetBytes(f.msg, "error")
			if e.Get("code").Int() != jsonrpc.InternalError || !strings.Contains(e.Get("message").Str, c.want) {
				t.Fatalf("answer %s, want -32603 saying %q", f.msg, c.want)
			}
			got := strings.Contains(strings.Join(methods(), ","), "tasks/cancel")
			if got != c.cancelled {
				t.Fatalf("tasks/cancel sent: %t, want %t (%v)", got, c.cancelled, methods())
			}
		})
	}
}

// TestFollowTaskResult: a completed task's result reaches the legacy client
// without resultType; a failed task's error object as it is.
func TestFollowTaskResult(t *testing.T) {
	const task = `{"resultType":"task","taskId":"t1","status":"completed"}`
	for get, want := range map[string]string{
		`"result":{"resultType":"complete","taskId":"t1","status":"completed","result":{"resultType":"complete","content":[{"type":"text","text":"ok"}]}}`: `{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"ok"}]}}`,
		`"result":{"resultType":"complete","taskId":"t1","status":"failed","error":{"code":-31000,"message":"boom","data":{"x":1}}}`:                       `{"jsonrpc":"2.0","id":3,"error":{"code":-31000,"message":"boom","data":{"x":1}}}`,
	} {
		url, _ := revTaskUpstream(t, task, get)
		rv := newTestReverse(t)
		s := openSession(t, rv, url, "p", `{}`)
		sink := newRecordingSink()
		served := rv.Serve(context.Background(), s, callRequest(t, 3, 0), sink)
		f := wantFinal(t, sink)
		var a, b any
		_ = json.Unmarshal(f.msg, &a)
		_ = json.Unmarshal([]byte(want), &b)
		if ja, _ := json.Marshal(a); string(ja) != string(revJSON(b)) {
			t.Errorf("answer %s, want %s", f.msg, want)
		}
		if served.Outcome == "" {
			t.Errorf("no outcome")
		}
	}
}

func revJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

func TestRevDropTaskSupport(t *testing.T) {
	in := `{"tools":[{"name":"a","execution":{"taskSupport":"required"}},{"name":"b","execution":{"taskSupport":"optional","x":1}},{"name":"c"}]}`
	out, err := LegacyResult("tools/list", []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"tools":[{"name":"a","execution":{}},{"name":"b","execution":{"x":1}},{"name":"c"}]}`
	if string(out) != want {
		t.Fatalf("LegacyResult(tools/list) = %s, want %s", out, want)
	}
}
