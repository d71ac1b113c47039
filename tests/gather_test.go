package tests

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/tests/support"
)

// staggeredLegacy is a legacy go-sdk server (sessions) in the test process
// with support.AddStaggered's tools `pair` and `one`; late gets a value
// just before each delayed question is sent.
type staggeredLegacy struct {
	url  string
	late <-chan struct{}
}

func newStaggeredLegacy(t *testing.T) *staggeredLegacy {
	t.Helper()
	server := mcp.NewServer(&mcp.Implementation{Name: "staggered", Version: "1"}, nil)
	late := support.AddStaggered(server)
	return &staggeredLegacy{url: support.ServeMCP(t, server, nil), late: late}
}

func (s *staggeredLegacy) block() string {
	return "\t\tupstream " + s.url + " {\n\t\t\tera legacy\n\t\t}"
}

// answersTo answers every question of ir with "yes", for a retry's params.
func answersTo(ir inputRequired) map[string]any {
	responses := map[string]any{}
	for k := range ir.InputRequests {
		responses[k] = acceptAnswer
	}
	return map[string]any{"inputResponses": responses, "requestState": ir.RequestState}
}

func questionKeys(ir inputRequired) []string {
	var keys []string
	for k := range ir.InputRequests {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// TestGatherPolicy: through real Caddy, once a tool has asked one question
// at a time, the forward bridge's rounds no longer wait gather_window for
// it; a sibling question that misses its round (it arrives while the call
// is parked) is asked in the next round, and the tool's next call then
// waits the window and asks both questions in one round.
func TestGatherPolicy(t *testing.T) {
	t.Parallel()
	up := newStaggeredLegacy(t)
	g := startGateway(t, up.block()+"\n\t\tgather_window 100ms")
	client := &http.Client{Timeout: notHang}
	call := func(id int, tool string, args, extra map[string]any) rpcExchange {
		t.Helper()
		m := meta(modernVersion)
		m["io.modelcontextprotocol/clientCapabilities"] = map[string]any{"elicitation": map[string]any{}}
		params := map[string]any{"name": tool, "arguments": args, "_meta": m}
		for k, v := range extra {
			params[k] = v
		}
		req, err := http.NewRequest(http.MethodPost, g.URL, strings.NewReader(rpcBody(t, id, "tools/call", params)))
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range modernHeaders(modernVersion, "tools/call", tool) {
			req.Header.Set(k, v)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("call %d (%s): %v (a round waited gather_window?)", id, tool, err)
		}
		return readRPC(t, resp, id)
	}

	t.Run("one question at a time waits nothing", func(t *testing.T) {
		// The first round of a tool not seen yet waits the window.
		ir := parseInputRequired(t, call(1, "one", map[string]any{}, nil))
		if text := checkToolResult(t, call(2, "one", map[string]any{}, answersTo(ir)), 2); text != "accept:yes" {
			t.Fatalf("one: %q", text)
		}
		// A round that waited this window would outlast the client's
		// timeout (the learned set survives the reload).
		g.reload(t, up.block()+"\n\t\tgather_window 10m")
		client.CloseIdleConnections() // the reload closes them: a request on one would fail
		ir = parseInputRequired(t, call(3, "one", map[string]any{}, nil))
		if text := checkToolResult(t, call(4, "one", map[string]any{}, answersTo(ir)), 4); text != "accept:yes" {
			t.Fatalf("one: %q", text)
		}
	})

	g.reload(t, up.block()+"\n\t\tgather_window 1s")
	client.CloseIdleConnections()
	args := map[string]any{"n": 2000} // ms between the two questions, beyond the window
	t.Run("a late sibling is asked in the next round", func(t *testing.T) {
		first := parseInputRequired(t, call(3, "pair", args, nil))
		if len(first.InputRequests) != 1 {
			t.Fatalf("the first round of an unknown tool asked %v, want the one question there", questionKeys(first))
		}
		select {
		case <-up.late:
		case <-time.After(notHang):
			t.Fatal("the second question was never sent")
		}
		time.Sleep(500 * time.Millisecond) // it reaches the parked call
		second := parseInputRequired(t, call(4, "pair", args, answersTo(first)))
		if keys := questionKeys(second); len(keys) != 1 || keys[0] == questionKeys(first)[0] {
			t.Fatalf("round 2 asked %v after %v, want the sibling", keys, questionKeys(first))
		}
		if text := checkToolResult(t, call(5, "pair", args, answersTo(second)), 5); text != "accept:yes,accept:yes" {
			t.Fatalf("pair: %q", text)
		}
	})
	args = map[string]any{"n": 300} // within the window
	t.Run("the learned tool asks both in one round", func(t *testing.T) {
		both := parseInputRequired(t, call(6, "pair", args, nil))
		if len(both.InputRequests) != 2 {
			t.Fatalf("the learned tool's first round asked %v, want both questions", questionKeys(both))
		}
		if text := checkToolResult(t, call(7, "pair", args, answersTo(both)), 7); text != "accept:yes,accept:yes" {
			t.Fatalf("pair: %q", text)
		}
	})
}
