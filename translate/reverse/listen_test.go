package reverse

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
	"github.com/tidwall/gjson"
)

// listenFake is a modern upstream offering resource subscriptions: each
// subscriptions/listen is acknowledged and held until the gateway closes
// it; push sends a resource update on every open one.
type listenFake struct {
	mu      sync.Mutex
	listens int
	last    []string
	open    map[http.ResponseWriter]chan string
}

func newListenFake(t *testing.T) (*listenFake, string) {
	t.Helper()
	f := &listenFake{open: map[http.ResponseWriter]chan string{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		id := gjson.GetBytes(body, "id").Raw
		switch gjson.GetBytes(body, "method").Str {
		case "server/discover":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{"resources":{"subscribe":true}},"ttlMs":60000}}`, id)
		case "subscriptions/listen":
			var uris []string
			_ = json.Unmarshal([]byte(gjson.GetBytes(body, "params.notifications.resourceSubscriptions").Raw), &uris)
			out := make(chan string, 8)
			f.mu.Lock()
			f.listens++
			f.last = uris
			f.open[w] = out
			f.mu.Unlock()
			defer func() {
				f.mu.Lock()
				delete(f.open, w)
				f.mu.Unlock()
			}()
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/subscriptions/acknowledged\",\"params\":{\"_meta\":{%q:%s}}}\n\n", translate.MetaSubscriptionID, id)
			w.(http.Flusher).Flush()
			for {
				select {
				case uri := <-out:
					fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/resources/updated\",\"params\":{\"uri\":%q}}\n\n", uri)
					w.(http.Flusher).Flush()
				case <-r.Context().Done():
					return
				}
			}
		}
	}))
	t.Cleanup(srv.Close)
	return f, srv.URL
}

func (f *listenFake) state() (open, listens int, last []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.open), f.listens, slices.Sorted(slices.Values(f.last))
}

func (f *listenFake) push(uri string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, out := range f.open {
		out <- uri
	}
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waited 5s for %s", what)
		}
	}
}

// TestReverseListenFollowsSubscribes: subscribes made in a burst while the
// GET stream is open are coalesced, the last filter carries them all, an
// unsubscribed URI's updates are dropped, and DELETE ends the stream and
// its upstream subscription.
func TestReverseListenFollowsSubscribes(t *testing.T) {
	fake, url := newListenFake(t)
	rv := newTestReverse(t)
	s := heldSession(t, "p")
	s.Upstream, s.Capabilities = url, []byte(`{}`)
	notes := make(chan string, 16)
	ended := make(chan error, 1)
	go func() {
		ended <- rv.Listen(context.Background(), s, http.Header{}, func() {}, func(msg []byte) error {
			notes <- gjson.GetBytes(msg, "params.uri").Str
			return nil
		})
	}()
	eventually(t, "the first subscription", func() bool { open, _, _ := fake.state(); return open == 1 })
	var want []string
	for i := range 20 {
		u := fmt.Sprintf("test://%02d", i)
		want = append(want, u)
		if rerr := rv.subscribe(s, u, true, 100); rerr != nil {
			t.Fatal(rerr)
		}
	}
	eventually(t, "a filter of every URI", func() bool { _, _, last := fake.state(); return slices.Equal(last, want) })
	eventually(t, "one subscription open", func() bool { open, _, _ := fake.state(); return open == 1 })
	if _, listens, _ := fake.state(); listens > 11 {
		t.Errorf("%d subscriptions/listen for 20 subscribes, want them coalesced", listens)
	}
	if rerr := rv.subscribe(s, want[0], false, 100); rerr != nil {
		t.Fatal(rerr)
	}
	fake.push(want[0])
	fake.push(want[1])
	if got := <-notes; got != want[1] {
		t.Errorf("notified of %s, want only %s", got, want[1])
	}
	if rerr := rv.Delete(s); rerr != nil {
		t.Fatal(rerr)
	}
	select {
	case <-ended:
	case <-time.After(5 * time.Second):
		t.Fatal("the GET stream outlived DELETE")
	}
	eventually(t, "no subscription open", func() bool { open, _, _ := fake.state(); return open == 0 })
}
