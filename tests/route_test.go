package tests

// The routing decision (caddymodule/route.go) through a real Caddy: what a
// request carries, not which upstreams happen to be up, decides where a
// retry goes.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// comebackModern is a modern-only go-sdk server (stateless), in the test
// process, on a loopback port chosen once: it is down (the port refuses
// connections) until start, and comes back on the same port, so that the
// gateway sees one configured upstream go down and come back. Its only
// tool is `whoami` ("modern"); it counts the tools/call requests it
// receives.
type comebackModern struct {
	url   string
	addr  string
	calls atomic.Int32
}

func newComebackModern(t *testing.T) *comebackModern {
	t.Helper()
	// A freePort port: no other test's listener or connection takes it
	// while the upstream is down.
	m := &comebackModern{addr: fmt.Sprintf("127.0.0.1:%d", freePort(t))}
	m.url = "http://" + m.addr + "/mcp"
	return m
}

// start serves the upstream on its port until the test ends.
func (m *comebackModern) start(t *testing.T) {
	t.Helper()
	server := mcp.NewServer(&mcp.Implementation{Name: "comeback-modern", Version: "1"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "whoami", Description: "Says modern."},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "modern"}}}, nil, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, &mcp.StreamableHTTPOptions{Stateless: true})
	var ln net.Listener
	var err error
	for deadline := time.Now().Add(5 * time.Second); ; {
		if ln, err = net.Listen("tcp", m.addr); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond) // the port may linger a moment
	}
	if err != nil {
		t.Fatalf("the modern upstream cannot come back on %s: %v", m.addr, err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if bytes.Contains(body, []byte(`"tools/call"`)) {
			m.calls.Add(1)
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		h.ServeHTTP(w, r)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
}

// listsModern reports whether tools/list through the gateway reached the
// modern upstream (its tool list is the one with `whoami`).
func listsModern(t *testing.T, url string, id int) bool {
	t.Helper()
	x := postRPC(t, url, modernHeaders(modernVersion, "tools/list", ""),
		rpcBody(t, id, "tools/list", map[string]any{"_meta": meta(modernVersion)}), id)
	return x.Resp != nil && x.Resp.Error == nil && strings.Contains(string(x.Resp.Result), `"whoami"`)
}

// TestRouteRetryParkedHereAfterModernCameBack: a block with a modern
// upstream and a legacy one. The modern upstream is down, so a modern
// client's call is bridged to the legacy upstream, which asks for input:
// the call parks here. The modern upstream comes back (and is selected
// again). The retry carries a requestState this instance sealed: it must
// reach its parked call through the forward bridge and complete with the
// tool's result — not go to the modern upstream, which knows no such tool
// and would leave the parked call orphaned until park_ttl. A replay of the
// same state is then answered by the bridge (-32602, already used), and
// neither reaches the modern upstream.
func TestRouteRetryParkedHereAfterModernCameBack(t *testing.T) {
	t.Parallel()
	rs := newRecordingServer(t)
	modern := newComebackModern(t)
	g := startGatewayWith(t, "", accessLogSite, "\t\tupstream "+modern.url+" {\n\t\t\tera modern\n\t\t}\n"+
		"\t\tupstream "+rs.url+" {\n\t\t\tera legacy\n\t\t}\n\t\tfail_duration 1s\n\t\tpark_ttl 2m")

	// Round 1, modern upstream down: the first request finds its
	// connection refused and marks it down (503: pass-through moves only
	// among modern upstreams); the call is then bridged and parks.
	var ir inputRequired
	for id, deadline := 1, time.Now().Add(notHang); ; id++ {
		x := askCall(t, g.URL, id, "tea", nil, nil)
		if x.Resp != nil && x.Resp.Error == nil {
			ir = parseInputRequired(t, x)
			break
		}
		if x.Status != http.StatusServiceUnavailable || time.Now().After(deadline) {
			t.Fatalf("call %d with the modern upstream down: %s; want it bridged (input_required)", id, x)
		}
	}
	if len(ir.InputRequests) != 1 || ir.RequestState == "" {
		t.Fatalf("input_required %+v: want one input request and a requestState", ir)
	}
	var key string
	for k := range ir.InputRequests {
		key = k
	}

	// The modern upstream comes back; once fail_duration is over, modern
	// requests go to it again.
	modern.start(t)
	for id, deadline := 100, time.Now().Add(notHang); !listsModern(t, g.URL, id); id++ {
		if time.Now().After(deadline) {
			t.Fatalf("the modern upstream was not selected again within %v", notHang)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// Round 2: the retry reaches its parked call.
	retry := map[string]any{"inputResponses": map[string]any{key: acceptAnswer}, "requestState": ir.RequestState}
	if got := checkToolResult(t, askCall(t, g.URL, 200, "tea", retry, nil), 200); got != "answer: yes" {
		t.Fatalf("the retry's result %q, want the parked call's (answer: yes)", got)
	}
	if got := wait(t, rs.answers, notHang, "elicitation answer upstream"); got != "accept" {
		t.Fatalf("the legacy upstream got %q, want the client's accept", got)
	}
	if got := wait(t, rs.ended, notHang, "end of the tool call"); got != "done" {
		t.Fatalf("the parked call %s, want done", got)
	}

	// A replay: the state is this instance's, its call has ended.
	replay := checkRPCError(t, askCall(t, g.URL, 201, "tea", retry, nil), http.StatusBadRequest, -32602, 201)
	if replay != nil && replay.Error.Message != stateRefused {
		t.Errorf("replay answered %q, want the bridge's: %q", replay.Error.Message, stateRefused)
	}
	if n := modern.calls.Load(); n != 0 {
		t.Errorf("the modern upstream received %d tools/call, want none: they belong to the parked call", n)
	}

	// The placeholders say where the retry went: the parked call's cell
	// and upstream.
	want := "modern modern-legacy " + rs.url
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		var retried []string
		for _, a := range logLines(g, "handled request") {
			if a["mcp_method"] == "tools/call" && a["mcp_outcome"] == "complete" {
				retried = append(retried, fmt.Sprintf("%v %v %v", a["mcp_era"], a["mcp_cell"], a["mcp_upstream"]))
			}
		}
		if len(retried) == 1 && retried[0] == want {
			break
		}
		if len(retried) > 1 || time.Now().After(deadline) {
			t.Fatalf("the completed retry's access log placeholders %q, want one %q", retried, want)
		}
	}
}
