package forward

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/tidwall/gjson"
)

// TestBridgeNoGetStream: with NoGetStream, the sessions the bridge leases
// for calls open no standalone GET stream, and a call that asks in-line
// (on its own stream, as the go-sdk server does) still completes its rounds.
func TestBridgeNoGetStream(t *testing.T) {
	for _, noGet := range []bool{false, true} {
		t.Run(fmt.Sprint("NoGetStream ", noGet), func(t *testing.T) {
			_, server := legacyUpstream(t)
			var gets atomic.Int32
			h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method == http.MethodGet {
					gets.Add(1)
				}
				h.ServeHTTP(w, r)
			}))
			t.Cleanup(ts.Close) // after the bridge's cleanup, which ends its sessions
			b := newTestBridge(t, time.Minute)
			r := askRequest(t, ts.URL, 1, 2, "")
			r.NoGetStream = noGet
			a := serve(b, r)
			for round := 1; round <= 2; round++ {
				keys := inputKeys(t, a)
				extra := fmt.Sprintf(`,"inputResponses":{%q:{"action":"accept","content":{"a":"x%d"}}},"requestState":%q`,
					keys[0], round, gjson.GetBytes(a.final, "result.requestState").String())
				r := askRequest(t, ts.URL, 1+round, 2, extra)
				r.NoGetStream = noGet
				a = serve(b, r)
			}
			if got := gjson.GetBytes(a.final, "result.content.0.text").String(); got != "accept:x1,accept:x2" {
				t.Fatalf("final: %s", a.final)
			}
			if !noGet {
				// The session requests its GET stream on its own: wait for it.
				for deadline := time.Now().Add(10 * time.Second); gets.Load() == 0; time.Sleep(5 * time.Millisecond) {
					if time.Now().After(deadline) {
						t.Fatal("no GET request upstream within 10s without NoGetStream")
					}
				}
				return
			}
			// Once the bridge has ended its sessions and the server has
			// answered every request it got, nothing more can come: count.
			b.Close()
			b.pool.Close()
			ts.Close()
			if n := gets.Load(); n != 0 {
				t.Fatalf("%d GET requests upstream with NoGetStream", n)
			}
		})
	}
}
