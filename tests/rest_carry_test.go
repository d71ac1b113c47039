package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/tests/support"
)

// countingServer is a legacy server made with the go-sdk and its event
// store (a real SDK's resumable streams; the tool is ours, written for the
// test, as server-everything counts nothing): `work` {n} counts its
// executions of n, works until the test closes release, then answers
// "done n".
type countingServer struct {
	url string
	mu  sync.Mutex
	ran map[int]int // executions by n
}

func newCountingServer(t *testing.T, release <-chan struct{}) *countingServer {
	t.Helper()
	cs := &countingServer{ran: map[int]int{}}
	server := mcp.NewServer(&mcp.Implementation{Name: "counting", Version: "1"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "work", Description: "Works until released."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in struct {
			N int `json:"n"`
		}) (*mcp.CallToolResult, any, error) {
			cs.mu.Lock()
			cs.ran[in.N]++
			cs.mu.Unlock()
			select {
			case <-release:
				return support.Text(fmt.Sprint("done ", in.N)), nil, nil
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			}
		})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server },
		&mcp.StreamableHTTPOptions{EventStore: mcp.NewMemoryEventStore(nil)}))
	t.Cleanup(ts.Close)
	cs.url = ts.URL
	return cs
}

// runs is how many times the tool ran, in all, and for n.
func (cs *countingServer) runs(n int) (all, of int) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	for _, k := range cs.ran {
		all += k
	}
	return all, cs.ran[n]
}

// TestRESTCarriedOver: REST calls outlive their instance, as tasks do.
// Two instances share state_key and Caddy's storage, in front of a
// resumable legacy server (countingServer). Five calls run on instance 0
// (their tools working, holding the upstream's streams) when it is
// SIGKILLed, SIGKILLed and started again with the same instance_id, or
// stopped gracefully (caddy stop); the tools are then released. Each
// call, polled on an instance still up (or on the restarted one), ends
// success with its own tool's result, and the upstream ran each tool
// once: the call's stream was reopened after its last event, not the call
// made again.
func TestRESTCarriedOver(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"killed", "restarted", "stopped"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			release := make(chan struct{})
			up := newCountingServer(t, release)
			globals := "\tstorage file_system " + t.TempDir()
			ports := []int{freePort(t), freePort(t)}
			launch := func(i int) *gateway {
				block := fleetBlock(t, "\t\tupstream "+up.url+" {\n\t\t\tera legacy\n\t\t}", "peer", ports, i) +
					"\n\t\trest /api\n\t\trest_wait 1s\n\t\ttask_lease 1s\n"
				site := "\troute /api/* {\n\t\tmcp_gateway {\n" + block + "\n\t\t}\n\t}"
				return launchGateway(t, ports[i], globals, site, block)
			}
			fleet := []*gateway{launch(0), launch(1)}
			base := func(i int) string { return fmt.Sprintf("http://127.0.0.1:%d/api/tools/work/calls/", ports[i]) }
			const n = 5
			for i := range n {
				r := restDo(t, "PUT", base(0)+fmt.Sprint("c", i), map[string]string{"Idempotency-Key": "k"}, fmt.Sprintf(`{"arguments":{"n":%d}}`, i))
				wantCall(t, r, http.StatusCreated, "running")
			}
			waitFor(t, "the five tools running upstream", func() bool { all, _ := up.runs(0); return all == n })

			poll := 1 // the instance the calls are polled on
			switch how {
			case "killed":
				fleet[0].kill(t)
			case "restarted":
				fleet[0].kill(t)
				fleet[0], poll = launch(0), 0
			case "stopped":
				fleet[0].stop(t)
			}
			close(release)
			for i := range n {
				var c restCall
				waitForWithin(t, 30*time.Second, fmt.Sprint("call ", i, " ended"), func() bool {
					r := restDo(t, "GET", base(poll)+fmt.Sprint("c", i), nil, "")
					if r.Status != http.StatusOK || json.Unmarshal(r.Body, &c) != nil {
						t.Fatalf("GET call %d: %s", i, r)
					}
					return c.Status != "running"
				})
				if c.Status != "success" || !strings.Contains(string(c.Result), fmt.Sprintf(`"text":"done %d"`, i)) {
					t.Fatalf("call %d after its instance %s: %+v (error %s)", i, how, c, c.Error)
				}
				if _, ran := up.runs(i); ran != 1 {
					t.Fatalf("the tool of call %d ran %d times", i, ran)
				}
			}
			if all, _ := up.runs(0); all != n {
				t.Fatalf("the tools ran %d times in all, want %d", all, n)
			}
		})
	}
}
