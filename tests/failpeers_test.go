package tests

// The peers and helpers of the failure and limit tests: go-sdk servers in
// the test process (the real SDK, with tools written for these tests: no
// packaged server asks, floods or drops its stream on demand), which a test
// can kill mid-call.

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/tests/support"
)

// notHang bounds every wait of these tests: reaching it means a hang.
const notHang = 20 * time.Second

// failingLegacy is a legacy go-sdk server (sessions, with an event store so
// that its streams can be resumed) in the test process, so that a test can
// kill it mid-call: kill ends its listener and every connection, which is
// what the gateway sees of a killed process. Its tools:
//
//   - `ask` elicits once and reports the answer;
//   - `hold` sends a progress notification, then waits for release (or its
//     cancellation) and reports "held";
//   - `drop` sends a progress notification, closes its SSE stream (the go-sdk
//     server-initiated disconnect of 2025-11-25, which the client resumes
//     with Last-Event-ID), sends another and reports "survived";
//   - `many` asks {n} questions at once (one round; support.AddMany);
//   - `chatter` elicits once and, once the test sends on parked (its
//     client got input_required: the call is parked), sends 50 progress
//     notifications (support.AddChatterReleased);
//   - `flood` sends {n} progress notifications of 32 KiB (the go-sdk queues
//     them: the tool may end before they are all read).
//
// Every tool call reports how it ended on ended.
type failingLegacy struct {
	url      string
	srv      *http.Server
	server   *mcp.Server
	release  chan struct{}
	parked   chan struct{} // releases chatter's notifications
	ended    chan string
	resumes  atomic.Int32 // GETs carrying Last-Event-ID
	requests atomic.Int32 // every HTTP request
	inflight atomic.Int32 // POSTs being answered

	// holdResume, when set, holds the next GET carrying Last-Event-ID
	// until its request ends, once it has signalled resumeHeld.
	holdResume atomic.Bool
	resumeHeld chan struct{}
}

// await waits until count() is 0, failing after notHang.
func (f *failingLegacy) await(t *testing.T, what string, count func() int) {
	t.Helper()
	waitForWithin(t, notHang, "no "+what+" left", func() bool { return count() == 0 })
}

func newFailingLegacy(t *testing.T) *failingLegacy {
	t.Helper()
	f := &failingLegacy{release: make(chan struct{}, 16), parked: make(chan struct{}, 16), ended: make(chan string, 64),
		resumeHeld: make(chan struct{}, 1)}
	f.server = mcp.NewServer(&mcp.Implementation{Name: "failing", Version: "1"}, nil)
	progress := func(ctx context.Context, req *mcp.CallToolRequest, n int, msg string) error {
		return req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: req.Params.GetProgressToken(), Progress: float64(n), Message: msg})
	}
	text := support.Text
	mcp.AddTool(f.server, &mcp.Tool{Name: "ask", Description: "Asks once."},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "Sure?",
				RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"answer": map[string]any{"type": "string"}}}})
			if err != nil {
				f.ended <- "ask: " + err.Error()
				return nil, nil, err
			}
			f.ended <- "ask: " + res.Action
			return text(fmt.Sprint("answer: ", res.Content["answer"])), nil, nil
		})
	mcp.AddTool(f.server, &mcp.Tool{Name: "hold", Description: "Holds until released."},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			if err := progress(ctx, req, 1, "holding"); err != nil {
				f.ended <- "hold: " + err.Error()
				return nil, nil, err
			}
			select {
			case <-f.release:
				f.ended <- "hold: released"
				return text("held"), nil, nil
			case <-ctx.Done():
				f.ended <- "hold: cancelled"
				return nil, nil, ctx.Err()
			}
		})
	mcp.AddTool(f.server, &mcp.Tool{Name: "drop", Description: "Drops its stream once."},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			_ = progress(ctx, req, 1, "before the drop")
			req.Extra.CloseSSEStream(mcp.CloseSSEStreamArgs{RetryAfter: 50 * time.Millisecond})
			time.Sleep(300 * time.Millisecond)
			_ = progress(ctx, req, 2, "after the drop")
			f.ended <- "drop: done"
			return text("survived"), nil, nil
		})
	report := func(s string) { f.ended <- s }
	support.AddMany(f.server, report)
	support.AddChatterReleased(f.server, "chatter", report, f.parked)
	mcp.AddTool(f.server, &mcp.Tool{Name: "flood", Description: "Sends n large progress notifications."},
		func(ctx context.Context, req *mcp.CallToolRequest, in struct {
			N int `json:"n"`
		}) (*mcp.CallToolResult, any, error) {
			big := strings.Repeat("x", 32<<10)
			for i := range in.N {
				if err := progress(ctx, req, i, big); err != nil {
					f.ended <- fmt.Sprintf("flood: stopped after %d", i)
					return nil, nil, err
				}
			}
			f.ended <- "flood: done"
			return text("flooded"), nil, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return f.server },
		&mcp.StreamableHTTPOptions{EventStore: mcp.NewMemoryEventStore(nil)})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.requests.Add(1)
		if r.Method == http.MethodPost {
			f.inflight.Add(1)
			defer f.inflight.Add(-1)
		}
		if r.Method == http.MethodGet && r.Header.Get("Last-Event-ID") != "" {
			f.resumes.Add(1)
			if f.holdResume.CompareAndSwap(true, false) {
				f.resumeHeld <- struct{}{}
				<-r.Context().Done()
				return
			}
		}
		h.ServeHTTP(w, r)
	})}
	go func() { _ = f.srv.Serve(ln) }()
	t.Cleanup(f.kill)
	f.url = "http://" + ln.Addr().String() + "/mcp"
	return f
}

// kill ends the server and every connection to it.
func (f *failingLegacy) kill() { _ = f.srv.Close() }

func countSessions(s *mcp.Server) int {
	n := 0
	for range s.Sessions() {
		n++
	}
	return n
}

// block configures the gateway in front of f with resume off: the tests
// using it are about calls parked holding their stream (their failures,
// their limits); tests/resume_test.go covers calls parked holding nothing.
func (f *failingLegacy) block() string {
	return "\t\tupstream " + f.url + " {\n\t\t\tera legacy\n\t\t\tresume off\n\t\t}"
}

// modernCall POSTs a modern tools/call with a progress token.
func modernCall(t *testing.T, url string, id int, tool string, args map[string]any, extra map[string]any) *http.Response {
	t.Helper()
	m := meta(modernVersion)
	m["progressToken"] = fmt.Sprint("progress-", id)
	m["io.modelcontextprotocol/clientCapabilities"] = map[string]any{"elicitation": map[string]any{}}
	params := map[string]any{"name": tool, "arguments": args, "_meta": m}
	for k, v := range extra {
		params[k] = v
	}
	return post(t, url, modernHeaders(modernVersion, "tools/call", tool), rpcBody(t, id, "tools/call", params))
}

// awaitResponse reads events until the JSON-RPC response to id and returns
// its data, or "" when the stream ends first. It fails after notHang.
func awaitResponse(t *testing.T, events <-chan sseMsg, id int) string {
	t.Helper()
	deadline := time.After(notHang)
	for {
		select {
		case m, ok := <-events:
			if !ok {
				return ""
			}
			if strings.Contains(m.data, fmt.Sprintf(`"id":%d`, id)) && (strings.Contains(m.data, `"result"`) || strings.Contains(m.data, `"error"`)) {
				return m.data
			}
		case <-deadline:
			t.Fatalf("no response to request %d within %v: a hang", id, notHang)
		}
	}
}

// settled waits until the gateway holds no parked call and no leased
// upstream session, and its goroutines are back near base.
func (g *gateway) settled(t *testing.T, base int) {
	t.Helper()
	deadline := time.Now().Add(notHang)
	for {
		var parked []map[string]any
		adminGET(t, g, "/mcp_gateway/parked", &parked)
		var sessions map[string]map[string]int
		adminGET(t, g, "/mcp_gateway/sessions", &sessions)
		leased := 0
		for _, st := range sessions {
			leased += st["open"] - st["idle"]
		}
		gr := g.goroutines(t)
		// Idle pooled sessions (a GET stream each) and keep-alive
		// connections may stay: a few goroutines each.
		if len(parked) == 0 && leased == 0 && gr <= base+15 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %d parked calls, %d leased upstream sessions, %d goroutines (baseline %d)", notHang, len(parked), leased, gr, base)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// modernUpstream is a modern-only go-sdk server (stateless) in the test
// process whose tool `confirm` asks one elicitation through input_required
// and reports the answer, whose tool `many` asks {n} at once, whose tool
// `hold` sends a progress notification and holds until released (or
// cancelled), and whose
// tool `flood` sends {n} progress notifications of 32 KiB, reporting on
// ended how they stopped. kill kills it.
type modernUpstream struct {
	url     string
	srv     *http.Server
	ended   chan string
	release chan struct{}
}

func newModernUpstream(t *testing.T) *modernUpstream {
	t.Helper()
	m := &modernUpstream{ended: make(chan string, 16), release: make(chan struct{}, 16)}
	server := mcp.NewServer(&mcp.Implementation{Name: "modern-failing", Version: "1"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "confirm", Description: "Asks once."},
		func(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			if e, ok := req.Params.InputResponses["confirm"].(*mcp.ElicitResult); ok {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprint("confirmed: ", e.Content["answer"])}}}, nil, nil
			}
			return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"confirm": &mcp.ElicitParams{Message: "Sure?",
				RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"answer": map[string]any{"type": "string"}}}}}}, nil, nil
		})
	mcp.AddTool(server, &mcp.Tool{Name: "many", Description: "Asks n questions at once."},
		func(_ context.Context, req *mcp.CallToolRequest, in struct {
			N int `json:"n"`
		}) (*mcp.CallToolResult, any, error) {
			reqs := mcp.InputRequestMap{}
			for i := range in.N {
				reqs[fmt.Sprint("q", i)] = &mcp.ElicitParams{Message: "?", RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{}}}
			}
			return &mcp.CallToolResult{InputRequests: reqs}, nil, nil
		})
	mcp.AddTool(server, &mcp.Tool{Name: "hold", Description: "Sends progress, then holds until released."},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: req.Params.GetProgressToken(), Progress: 1, Message: "holding"}); err != nil {
				return nil, nil, err
			}
			select {
			case <-m.release:
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "held"}}}, nil, nil
			case <-ctx.Done():
				m.ended <- "hold: cancelled"
				return nil, nil, ctx.Err()
			}
		})
	mcp.AddTool(server, &mcp.Tool{Name: "flood", Description: "Sends n large progress notifications."},
		func(ctx context.Context, req *mcp.CallToolRequest, in struct {
			N int `json:"n"`
		}) (*mcp.CallToolResult, any, error) {
			big := strings.Repeat("x", 32<<10)
			for i := range in.N {
				if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: req.Params.GetProgressToken(), Progress: float64(i), Message: big}); err != nil {
					m.ended <- fmt.Sprintf("flood: stopped after %d", i)
					return nil, nil, err
				}
			}
			m.ended <- "flood: done"
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "flooded"}}}, nil, nil
		})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m.url = "http://" + ln.Addr().String() + "/mcp"
	m.srv = &http.Server{Handler: mcp.NewStreamableHTTPHandler(
		func(*http.Request) *mcp.Server { return server }, &mcp.StreamableHTTPOptions{Stateless: true})}
	go func() { _ = m.srv.Serve(ln) }()
	t.Cleanup(m.kill)
	return m
}

func (m *modernUpstream) kill() { _ = m.srv.Close() }

func (m *modernUpstream) block() string {
	return "\t\tupstream " + m.url + " {\n\t\t\tera modern\n\t\t}"
}
