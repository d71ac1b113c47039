package tests

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/tests/support"
)

// holdingServer is a go-sdk server, with an event store if resumable,
// written for the tests (no published server lets a test hold a tool
// between its answer and its result): its tool `ask` asks one question (a
// form {answer}), says on answered that the answer arrived, waits for a
// token on release, and answers "got X". runs counts the tool's runs,
// finished those that answered.
type holdingServer struct {
	url      string
	answered chan string
	release  chan struct{}
	runs     atomic.Int32
	finished atomic.Int32
}

func newHoldingServer(t *testing.T, resumable bool) *holdingServer {
	t.Helper()
	s := &holdingServer{answered: make(chan string, 8), release: make(chan struct{}, 8)}
	server := mcp.NewServer(&mcp.Implementation{Name: "holding", Version: "1"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "ask", Description: "Asks once, then waits to be released."},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			s.runs.Add(1)
			res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "Answer?", RequestedSchema: support.Form(map[string]any{"answer": map[string]any{"type": "string"}})})
			if err != nil {
				return nil, nil, err
			}
			got := fmt.Sprint(res.Content["answer"])
			s.answered <- got
			select {
			case <-s.release:
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			}
			s.finished.Add(1)
			return support.Text("got " + got), nil, nil
		})
	opts := &mcp.StreamableHTTPOptions{}
	if resumable {
		opts.EventStore = mcp.NewMemoryEventStore(nil)
	}
	s.url = support.ServeMCP(t, server, opts)
	return s
}

// TestLingerHomeDies: two instances of one fleet in front of a go-sdk
// server with an event store. A first call, answered at once on the
// instance that parked it, teaches it that the tool's retries come back at
// once; the second call's retry, landing on the other instance while the
// call lingers, is relayed home. The home posts the answer upstream and is
// SIGKILLed before it answers; the tool then finishes. The client gets the
// call's result (resumed where the retry landed, from the upstream's
// event store), not "start the call again", and the tool ran once per call.
func TestLingerHomeDies(t *testing.T) {
	t.Parallel()
	up := newHoldingServer(t, true)
	pair := startFleetOf(t, 2, "\t\tupstream "+up.url+" {\n\t\t\tera legacy\n\t\t}\n\t\tresume_linger 1s\n", "advertise")
	home, other := pair[0], pair[1]
	alice := map[string]string{"Authorization": "Bearer alice"}
	call := func(url string, id int, extra map[string]any) rpcExchange {
		t.Helper()
		return elicitingCall(t, url, id, "ask", map[string]any{}, extra, alice)
	}

	// The first call teaches the home: its retry comes back at once.
	up.release <- struct{}{}
	ir := parseInputRequired(t, call(home.URL, 1, nil))
	if x := call(home.URL, 2, answerWith(t, ir, "first")); x.Resp == nil || x.Resp.Error != nil || !strings.Contains(string(x.Resp.Result), "got first") {
		t.Fatalf("the first call: %s", x)
	}
	wait(t, up.answered, 5*time.Second, "the first answer upstream")

	// The second call lingers at home; its retry lands on the other
	// instance, which relays it home.
	ir = parseInputRequired(t, call(home.URL, 3, nil))
	answer := make(chan rpcExchange, 1)
	go func() { answer <- call(other.URL, 4, answerWith(t, ir, "second")) }()
	if got := wait(t, up.answered, 10*time.Second, "the second answer upstream, posted by the home"); got != "second" {
		t.Fatalf("answer upstream %q", got)
	}
	home.kill(t)
	up.release <- struct{}{}
	var x rpcExchange
	select {
	case x = <-answer:
	case <-time.After(30 * time.Second):
		t.Fatal("no answer to the retry within 30s of the home's death")
	}
	if x.Resp == nil || x.Resp.Error != nil || !strings.Contains(string(x.Resp.Result), "got second") {
		t.Fatalf("the retry whose home died mid-request: want the call's result, got %s", x)
	}
	// The retry relayed home failed (and, maybe, the session's way back
	// to the dead home once the call ended).
	if got := metricValue(scrape(t, other), `caddy_mcp_gateway_instance_forwards_total{direction="sent",outcome="error"}`); got < 1 {
		t.Fatalf("forwards that failed = %v on the other instance, want the retry relayed home", got)
	}
	if runs, finished := up.runs.Load(), up.finished.Load(); runs != 2 || finished != 2 {
		t.Fatalf("the tool ran %d times and finished %d, want 2 and 2 (once per call)", runs, finished)
	}
}

// TestRelayOwnerDiesAfterReading: two instances of one fleet in front of
// a go-sdk server without resumable streams. A call parks holding its
// stream on the first instance; its retry lands on the other, which
// forwards it to the first; that one posts the answer upstream and is
// SIGKILLed before it answers. The client is told the truth: the call may
// have run, its answer is lost, and starting it again may run it twice —
// not "start the call again" as for an owner that never read the retry;
// the tool ran once.
func TestRelayOwnerDiesAfterReading(t *testing.T) {
	t.Parallel()
	up := newHoldingServer(t, false)
	pair := startFleetOf(t, 2, "\t\tupstream "+up.url+" {\n\t\t\tera legacy\n\t\t}\n", "advertise")
	owner, other := pair[0], pair[1]
	alice := map[string]string{"Authorization": "Bearer alice"}
	ir := parseInputRequired(t, elicitingCall(t, owner.URL, 1, "ask", map[string]any{}, nil, alice))
	answer := make(chan rpcExchange, 1)
	go func() {
		answer <- elicitingCall(t, other.URL, 2, "ask", map[string]any{}, answerWith(t, ir, "once"), alice)
	}()
	if got := wait(t, up.answered, 10*time.Second, "the answer upstream, posted by the owner"); got != "once" {
		t.Fatalf("answer upstream %q", got)
	}
	owner.kill(t)
	up.release <- struct{}{}
	var x rpcExchange
	select {
	case x = <-answer:
	case <-time.After(30 * time.Second):
		t.Fatal("no answer to the retry within 30s of the owner's death")
	}
	if x.Status != http.StatusBadGateway || x.Resp == nil || x.Resp.Error == nil || x.Resp.Error.Code != -32603 {
		t.Fatalf("the retry whose owner died after reading it: want HTTP 502 and -32603, got %s", x)
	}
	if msg := x.Resp.Error.Message; strings.Contains(msg, "start the call again") || !strings.Contains(msg, "may have run") {
		t.Fatalf("the retry whose owner died after reading it: untrue message %q", msg)
	}
	if runs := up.runs.Load(); runs != 1 {
		t.Fatalf("the tool ran %d times, want 1", runs)
	}
}
