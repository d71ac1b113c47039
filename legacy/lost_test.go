package legacy

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestStreamLost: a session's StreamLost is closed when its open GET
// stream ends and cannot be opened again, whether the upstream (the
// go-sdk) forgot the session (404) or went away (connection refused); not
// when the upstream never had a stream for it (405), nor when the session
// is closed.
func TestStreamLost(t *testing.T) {
	open := func(t *testing.T, h http.Handler) (*Session, *httptest.Server) {
		t.Helper()
		ts := httptest.NewServer(h)
		t.Cleanup(ts.Close)
		client := NewConnClient(ConnOptions{})
		t.Cleanup(client.CloseIdleConnections)
		s, err := Open(t.Context(), client, ts.URL, nil, nil, nil, true)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close(context.Background()) })
		select {
		case <-s.Listening():
		case <-time.After(10 * time.Second):
			t.Fatal("the GET stream was not requested")
		}
		return s, ts
	}
	goSDK := func() (*mcp.Server, http.Handler) {
		server := mcp.NewServer(&mcp.Implementation{Name: "lost-test", Version: "1"}, nil)
		return server, mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
	}
	lost := func(t *testing.T, s *Session) {
		t.Helper()
		select {
		case <-s.StreamLost():
		case <-time.After(10 * time.Second):
			t.Fatal("StreamLost not closed 10s after the upstream let the stream go")
		}
	}
	notLost := func(t *testing.T, s *Session, done <-chan struct{}) {
		t.Helper()
		select {
		case <-done: // the stream's last reader returned: nothing more will happen
		case <-time.After(10 * time.Second):
			t.Fatal("the GET stream's reader still runs")
		}
		select {
		case <-s.StreamLost():
			t.Fatal("StreamLost closed")
		default:
		}
	}

	t.Run("session forgotten", func(t *testing.T) {
		server, h := goSDK()
		s, _ := open(t, h)
		for ss := range server.Sessions() {
			_ = ss.Close()
		}
		lost(t, s)
	})
	t.Run("upstream gone", func(t *testing.T) {
		_, h := goSDK()
		s, ts := open(t, h)
		ts.CloseClientConnections()
		ts.Close()
		lost(t, s)
	})
	t.Run("no stream", func(t *testing.T) {
		_, h := goSDK()
		s, _ := open(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodGet {
				w.WriteHeader(http.StatusMethodNotAllowed)
				return
			}
			h.ServeHTTP(w, r)
		}))
		notLost(t, s, s.listenDone)
	})
	t.Run("closed", func(t *testing.T) {
		_, h := goSDK()
		s, _ := open(t, h)
		done := s.listenDone
		s.Close(context.Background())
		notLost(t, s, done)
	})
}
