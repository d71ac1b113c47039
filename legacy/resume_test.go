package legacy

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// resumableServer is a go-sdk server with an event store (its streams'
// events carry ids and replay after Last-Event-ID), whose tool `ask`
// elicits once and answers with what it got. A question still unanswered
// after toolPatience ends the tool: a failed test that leaves it waiting
// would otherwise hang in its cleanup (the session's DELETE, and the test
// server's Close, wait for the tool to return).
func resumableServer(t *testing.T) *httptest.Server {
	t.Helper()
	server := mcp.NewServer(&mcp.Implementation{Name: "resume-test", Version: "1"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "ask"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		ctx, cancel := context.WithTimeout(ctx, toolPatience)
		defer cancel()
		res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "name?",
			RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"a": map[string]any{"type": "string"}}}})
		if err != nil {
			return nil, nil, err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: res.Action + ":" + res.Content["a"].(string)}}}, nil, nil
	})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server },
		&mcp.StreamableHTTPOptions{EventStore: mcp.NewMemoryEventStore(nil)}))
	t.Cleanup(ts.Close)
	return ts
}

// toolPatience is how long resumableServer's tool waits for its answer.
const toolPatience = 30 * time.Second

func nextWithin(t *testing.T, c *Call) jsonrpc.Message {
	t.Helper()
	select {
	case m, ok := <-c.Messages():
		if !ok {
			t.Fatalf("the stream ended: %v", c.Err())
		}
		return m
	case <-time.After(10 * time.Second):
		t.Fatal("no message within 10s")
	}
	return jsonrpc.Message{}
}

// TestReopenGoSDK: a call's stream closed right after the upstream's
// question, the answer posted, and the stream reopened after the event
// before the question, on a session attached by id (as another instance
// would): the question comes again, then the result. A second reopen
// replays the result again (go-sdk does not refuse it), and the upstream
// takes a second answer to the same question without complaint.
func TestReopenGoSDK(t *testing.T) {
	ts := resumableServer(t)
	ctx := t.Context()
	s, err := Open(ctx, ts.Client(), ts.URL, nil, []byte(`{"elicitation":{}}`), nil, false)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	c, err := s.Call(ctx, "tools/call", []byte(`{"name":"ask","arguments":{}}`))
	if err != nil {
		t.Fatal(err)
	}
	q := nextWithin(t, c)
	if q.Kind != jsonrpc.KindRequest || q.Method != "elicitation/create" || q.After == "" {
		t.Fatalf("want an elicitation after a numbered event, got %s (after %q)", q.Raw, q.After)
	}
	c.Close()

	other := Attach(ts.Client(), ts.URL, nil, s.ID, s.Version)
	if err := other.Respond(ctx, q.ID, []byte(`{"action":"accept","content":{"a":"ada"}}`), nil); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		r, err := other.Reopen(ctx, c.ID, q.After)
		if err != nil {
			t.Fatalf("reopen %d: %v", i, err)
		}
		if m := nextWithin(t, r); m.Kind != jsonrpc.KindRequest || string(m.ID) != string(q.ID) || m.After != q.After {
			t.Fatalf("reopen %d: want the question again, got %s (after %q)", i, m.Raw, m.After)
		}
		m := nextWithin(t, r)
		if m.Kind != jsonrpc.KindResponse || string(m.ID) != string(c.ID) {
			t.Fatalf("reopen %d: want the result, got %s", i, m.Raw)
		}
		if want := `"text":"accept:ada"`; !contains(m.Raw, want) {
			t.Fatalf("reopen %d: result %s lacks %s", i, m.Raw, want)
		}
		r.Close()
		if i == 0 {
			// A replayed answer: taken (202), and dropped.
			if err := other.Respond(ctx, q.ID, []byte(`{"action":"accept","content":{"a":"eve"}}`), nil); err != nil {
				t.Fatalf("second answer: %v", err)
			}
		}
	}
}

// TestReopenSessionGone: an upstream that lost the session (restarted,
// or the session ended) answers the reopening with ErrSessionGone.
func TestReopenSessionGone(t *testing.T) {
	ts := resumableServer(t)
	ctx := t.Context()
	s, err := Open(ctx, ts.Client(), ts.URL, nil, nil, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	gone := Attach(ts.Client(), ts.URL, nil, "no-such-session", s.Version)
	if _, err := gone.Reopen(ctx, []byte(`"gw-1"`), "abc_1"); !errors.Is(err, ErrSessionGone) {
		t.Fatalf("unknown session: %v", err)
	}
	s.Close(ctx)
	ended := Attach(ts.Client(), ts.URL, nil, s.ID, s.Version)
	if _, err := ended.Reopen(ctx, []byte(`"gw-1"`), "abc_1"); !errors.Is(err, ErrSessionGone) {
		t.Fatalf("ended session: %v", err)
	}
	if _, err := ended.Reopen(ctx, []byte(`"gw-1"`), ""); err == nil {
		t.Fatal("reopened with no event id")
	}
}

func contains(b []byte, s string) bool { return strings.Contains(string(b), s) }

// TestRelisten: a session whose GET stream Detach stopped opens it again
// (Relisten), as often as it is detached, without the old stream's
// goroutine touching the new one.
func TestRelisten(t *testing.T) {
	ts := resumableServer(t)
	s, err := Open(t.Context(), ts.Client(), ts.URL, nil, nil, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	for i := range 3 {
		select {
		case <-s.Listening():
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: the GET stream was not requested", i)
		}
		s.Detach()
		if !s.Relisten() {
			t.Fatalf("round %d: the old GET stream did not end", i)
		}
	}
	if _, err := s.Call(t.Context(), "tools/list", nil); err != nil {
		t.Fatal(err)
	}
}

// TestDetachDropsInbox: through the gateway's own client (whose GET stream
// reader hands the stream to a waiting goroutine), Detach lets go of the
// stream's inbox once its last reader returned, and Relisten gives the
// session a new one that the reopened stream's messages reach (a go-sdk
// server's tools/list_changed, sent on the standalone stream).
func TestDetachDropsInbox(t *testing.T) {
	server := mcp.NewServer(&mcp.Implementation{Name: "detach-test", Version: "1"}, nil)
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server },
		&mcp.StreamableHTTPOptions{EventStore: mcp.NewMemoryEventStore(nil)}))
	t.Cleanup(ts.Close)
	client := NewConnClient(ConnOptions{})
	defer client.CloseIdleConnections()
	s, err := Open(t.Context(), client, ts.URL, nil, nil, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	tools := 0
	for round := range 3 {
		select {
		case <-s.Listening():
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: the GET stream was not requested", round)
		}
		// A message on the stream proves it is read (the GET request may
		// reach the server a little after it was written: add tools
		// until one is announced).
		got := false
		for deadline := time.Now().Add(10 * time.Second); !got && time.Now().Before(deadline); {
			tools++
			mcp.AddTool(server, &mcp.Tool{Name: fmt.Sprint("t", tools)}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
				return &mcp.CallToolResult{}, nil, nil
			})
			select {
			case m := <-s.Inbox():
				got = m.Method == "notifications/tools/list_changed"
			case <-time.After(200 * time.Millisecond):
			}
		}
		if !got {
			t.Fatalf("round %d: no tools/list_changed on the GET stream within 10s", round)
		}
		s.Detach()
		if s.inbox != nil || s.stopListen != nil || s.listenDone != nil || !s.relisten {
			t.Fatalf("round %d: Detach kept the stream's inbox or context", round)
		}
		if !s.Relisten() {
			t.Fatalf("round %d: Relisten failed", round)
		}
		if s.inbox == nil {
			t.Fatalf("round %d: Relisten gave no inbox", round)
		}
	}
}
