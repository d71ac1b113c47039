package legacy

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
)

// TestLingerStirs: a lingering call's stir runs once, when the upstream
// sends on its stream (the message is kept for Unpark), or when the stream
// breaks, which is then not resumed: the call ends and the upstream sees
// no GET reopening it.
func TestLingerStirs(t *testing.T) {
	up := resumableServer(t)
	var reopens atomic.Int32
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && r.Header.Get("Last-Event-ID") != "" {
			reopens.Add(1)
		}
		up.Config.Handler.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	ctx := t.Context()
	s, err := Open(ctx, ts.Client(), ts.URL, nil, []byte(`{"elicitation":{}}`), nil, false)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	stirs := make(chan struct{}, 2)
	stir := func() { stirs <- struct{}{} }
	waitStir := func(what string) {
		t.Helper()
		select {
		case <-stirs:
		case <-time.After(10 * time.Second):
			t.Fatalf("no stir within 10s after %s", what)
		}
	}

	c, err := s.Call(ctx, "tools/call", []byte(`{"name":"ask","arguments":{}}`))
	if err != nil {
		t.Fatal(err)
	}
	q := nextWithin(t, c)
	c.Linger(stir)
	if err := s.Respond(ctx, q.ID, []byte(`{"action":"accept","content":{"a":"ada"}}`), nil); err != nil {
		t.Fatal(err)
	}
	waitStir("the answer")
	held := c.Unpark()
	if len(held) != 1 || held[0].Kind != jsonrpc.KindResponse || string(held[0].ID) != string(c.ID) {
		t.Fatalf("kept while lingering: %v, want the call's result", held)
	}
	c.Close()

	c, err = s.Call(ctx, "tools/call", []byte(`{"name":"ask","arguments":{}}`))
	if err != nil {
		t.Fatal(err)
	}
	q = nextWithin(t, c)
	c.Linger(stir)
	ts.CloseClientConnections() // the stream breaks
	waitStir("the stream broke")
	c.Unpark()
	for range c.Messages() {
	}
	if c.Err() == nil {
		t.Fatal("the broken stream ended with no error")
	}
	if n := reopens.Load(); n != 0 {
		t.Fatalf("the lingering call reopened its stream %d times", n)
	}
	select {
	case <-stirs:
		t.Fatal("stir ran twice")
	default:
	}
	// The tool still waits for its answer: the session's DELETE would
	// wait for it (go-sdk). The server closed the client's idle
	// connections too: the answer, read EOF on one, is sent again.
	if err := s.Respond(ctx, q.ID, []byte(`{"action":"accept","content":{"a":"end"}}`), nil); err != nil {
		t.Fatal(err)
	}
}
