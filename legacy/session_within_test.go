package legacy

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// withinServer is a real legacy server (the go-sdk, sessionful) in the
// test process with a tool `now`, which answers at once, and `later`, which
// answers "later" once release is closed (or fails when its call is
// cancelled). refuse, once closed, makes the HTTP front answer every later
// POST with a plain-text 503 after release: no go-sdk server answers a
// call's POST late with an error.
func withinServer(t *testing.T, release, refuse <-chan struct{}) string {
	t.Helper()
	server := mcp.NewServer(&mcp.Implementation{Name: "within-test", Version: "1"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "now", Description: "Answers at once."},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "now"}}}, nil, nil
		})
	mcp.AddTool(server, &mcp.Tool{Name: "later", Description: "Answers once released."},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			select {
			case <-release:
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "later"}}}, nil, nil
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			}
		})
	sdk := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-refuse:
			<-release
			http.Error(w, "overloaded", http.StatusServiceUnavailable)
			return
		default:
		}
		sdk.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	return ts.URL
}

// finalText reads c's final message and returns the text of its result.
func finalText(t *testing.T, c *Call) string {
	t.Helper()
	type final struct {
		m   jsonrpc.Message
		err error
	}
	got := make(chan final, 1)
	go func() {
		m, err := c.Final()
		got <- final{m, err}
	}()
	select {
	case f := <-got:
		if f.err != nil {
			t.Fatalf("final: %v", f.err)
		}
		var res struct {
			Result struct {
				Content []struct {
					Text string `json:"text"`
				} `json:"content"`
			} `json:"result"`
		}
		if err := json.Unmarshal(f.m.Raw, &res); err != nil || len(res.Result.Content) == 0 {
			t.Fatalf("final message %s", f.m.Raw)
		}
		return res.Result.Content[0].Text
	case <-time.After(10 * time.Second):
		t.Fatal("no final message within 10s")
	}
	return ""
}

// TestCallWithin: a call answered within the wait returns with its answer
// under way (as CallWithID); one that is not returns once the wait passed,
// before the upstream answered, and its messages come when the answer
// does; a call whose POST fails after the wait ends its messages with the
// reason in Err; closing a call before its answer came ends it.
func TestCallWithin(t *testing.T) {
	ctx := t.Context()
	params := func(tool string) []byte { return []byte(`{"name":"` + tool + `","arguments":{}}`) }

	t.Run("answered within the wait", func(t *testing.T) {
		release := make(chan struct{})
		defer close(release)
		s, err := Open(ctx, http.DefaultClient, withinServer(t, release, nil), nil, nil, nil, false)
		if err != nil {
			t.Fatal(err)
		}
		c, err := s.CallWithin(ctx, json.RawMessage(`7`), "tools/call", params("now"), time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if c.resp == nil {
			t.Fatal("returned before the upstream's headers, which came within the wait")
		}
		if got := finalText(t, c); got != "now" {
			t.Fatalf("result %q, want now", got)
		}
	})

	t.Run("not answered within the wait", func(t *testing.T) {
		release := make(chan struct{})
		s, err := Open(ctx, http.DefaultClient, withinServer(t, release, nil), nil, nil, nil, false)
		if err != nil {
			t.Fatal(err)
		}
		c, err := s.CallWithin(ctx, json.RawMessage(`"x-1"`), "tools/call", params("later"), 20*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		// The tool cannot answer before release is closed: CallWithin
		// returned on its wait.
		select {
		case m, ok := <-c.Messages():
			t.Fatalf("a message before the upstream answered: %s %v", m.Raw, ok)
		default:
		}
		close(release)
		if got := finalText(t, c); got != "later" {
			t.Fatalf("result %q, want later", got)
		}
	})

	t.Run("refused after the wait", func(t *testing.T) {
		release, refuse := make(chan struct{}), make(chan struct{})
		s, err := Open(ctx, http.DefaultClient, withinServer(t, release, refuse), nil, nil, nil, false)
		if err != nil {
			t.Fatal(err)
		}
		close(refuse)
		c, err := s.CallWithin(ctx, json.RawMessage(`8`), "tools/call", params("later"), 20*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		close(release)
		if _, err := c.Final(); err == nil || !strings.Contains(err.Error(), "503") {
			t.Fatalf("final after a late 503: %v, want the upstream's status", err)
		}
		if c.Err() == nil {
			t.Fatal("Err is nil after a late refusal")
		}
	})

	t.Run("closed before the answer", func(t *testing.T) {
		release := make(chan struct{})
		defer close(release)
		s, err := Open(ctx, http.DefaultClient, withinServer(t, release, nil), nil, nil, nil, false)
		if err != nil {
			t.Fatal(err)
		}
		c, err := s.CallWithin(ctx, json.RawMessage(`9`), "tools/call", params("later"), 20*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
		select {
		case _, ok := <-drain(c.Messages()):
			if ok {
				t.Fatal("unreachable")
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the messages of a closed call did not end")
		}
		if err := c.Err(); err == nil || !errors.Is(err, context.Canceled) {
			t.Fatalf("Err of a call closed before its answer: %v, want context.Canceled", err)
		}
	})
}

// drain reads ch to its end and then closes the returned channel.
func drain(ch <-chan jsonrpc.Message) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		for range ch {
		}
		close(done)
	}()
	return done
}
