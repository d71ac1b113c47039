package tests

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// inProcessLegacy is a go-sdk legacy (sessionful) MCP server in the test
// process whose tool `whoami` names it. It can be stopped and started again
// on the same address.
type inProcessLegacy struct {
	addr    string
	server  *mcp.Server
	handler http.Handler
	srv     *http.Server
}

func newInProcessLegacy(t *testing.T, name string) *inProcessLegacy {
	t.Helper()
	return newInProcess(t, name, nil)
}

// newInProcess is newInProcessLegacy with handler options (Stateless: true
// makes a modern-only server).
func newInProcess(t *testing.T, name string, opts *mcp.StreamableHTTPOptions) *inProcessLegacy {
	t.Helper()
	server := mcp.NewServer(&mcp.Implementation{Name: name, Version: "1"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "whoami", Description: "Names the server."},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: name}}}, nil, nil
		})
	p := &inProcessLegacy{addr: fmt.Sprintf("127.0.0.1:%d", freePort(t)), server: server}
	p.handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, opts)
	p.start(t)
	t.Cleanup(p.stop)
	return p
}

func (p *inProcessLegacy) url() string { return "http://" + p.addr + "/mcp" }

func (p *inProcessLegacy) start(t *testing.T) {
	t.Helper()
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		t.Fatal(err)
	}
	p.srv = &http.Server{Handler: p.handler}
	go func() { _ = p.srv.Serve(ln) }()
}

func (p *inProcessLegacy) stop() {
	if p.srv != nil {
		_ = p.srv.Close()
	}
}

// connectGo opens a go-sdk client session through url with opts. With
// version "" the client negotiates (the modern era); otherwise it asks for
// version. It fails the test unless the negotiated version is the expected
// one.
func connectGo(t *testing.T, url, version string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "go-test-client", Version: "1"}, opts).
		Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	want := version
	if want == "" {
		want = modernVersion
	}
	if got := cs.InitializeResult().ProtocolVersion; got != want {
		t.Fatalf("negotiated %q, want %q", got, want)
	}
	return cs
}

func whoami(t *testing.T, cs *mcp.ClientSession) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "whoami", Arguments: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	return toolText(res)
}

// TestSelectionAndPassiveHealth: new sessions are spread by the selection
// policy and stay on their upstream; an upstream that refuses connections is
// skipped (no client sees an error) until it is back.
func TestSelectionAndPassiveHealth(t *testing.T) {
	t.Parallel()
	a, b := newInProcessLegacy(t, "a"), newInProcessLegacy(t, "b")
	// Both eras configured: with `era auto` a session opened while one
	// probe is done and the other still in flight goes to the probed
	// upstream (by design, candidates), which is not what this test counts.
	g := startGateway(t, fmt.Sprintf("\t\tupstream %s {\n\t\t\tera legacy\n\t\t}\n\t\tupstream %s {\n\t\t\tera legacy\n\t\t}\n\t\tlb_policy round_robin\n\t\tfail_duration 500ms", a.url(), b.url()))

	seen := map[string]int{}
	for range 4 {
		cs := connectGo(t, g.URL, "2025-11-25", nil)
		name := whoami(t, cs)
		seen[name]++
		for range 3 { // pinned: the same upstream every time
			if again := whoami(t, cs); again != name {
				t.Fatalf("session moved from %s to %s", name, again)
			}
		}
	}
	if seen["a"] != 2 || seen["b"] != 2 {
		t.Fatalf("round_robin spread sessions as %v, want 2 and 2", seen)
	}

	b.stop()
	for i := range 4 {
		if name := whoami(t, connectGo(t, g.URL, "2025-11-25", nil)); name != "a" {
			t.Fatalf("session %d went to %q while b is down", i, name)
		}
	}

	b.start(t)
	deadline := time.Now().Add(10 * time.Second)
	for whoami(t, connectGo(t, g.URL, "2025-11-25", nil)) != "b" {
		if time.Now().After(deadline) {
			t.Fatal("b never received a session again after it came back")
		}
		time.Sleep(100 * time.Millisecond)
	}
}
