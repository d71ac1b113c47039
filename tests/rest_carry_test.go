package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/tests/support"
)

// countingServer is a legacy server made with the go-sdk and its event
// store (a real SDK's resumable streams; the tools are ours, written for
// the test, as server-everything counts nothing): `work` {n} counts its
// executions of n, works until the test closes release, then answers
// "done n"; `ask` {n} counts the same, asks one question (a form
// {answer}) and answers "got X".
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
	mcp.AddTool(server, &mcp.Tool{Name: "ask", Description: "Asks once."},
		func(ctx context.Context, req *mcp.CallToolRequest, in struct {
			N int `json:"n"`
		}) (*mcp.CallToolResult, any, error) {
			cs.mu.Lock()
			cs.ran[in.N]++
			cs.mu.Unlock()
			res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "Answer?", RequestedSchema: support.Form(map[string]any{"answer": map[string]any{"type": "string"}})})
			if err != nil {
				return nil, nil, err
			}
			return support.Text(fmt.Sprint("got ", res.Content["answer"])), nil, nil
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

// carryFleet is two instances of one fleet sharing state_key and Caddy's
// storage, in front of up (legacy), serving the REST face at /api with
// rest_wait 1s and task_lease lease; launch(i) starts instance i (again).
func carryFleet(t *testing.T, up, lease string) (launch func(i int) *gateway, base func(i int, tool string) string) {
	t.Helper()
	globals := "\tstorage file_system " + t.TempDir()
	ports := []int{freePort(t), freePort(t)}
	launch = func(i int) *gateway {
		block := fleetBlock(t, "\t\tupstream "+up+" {\n\t\t\tera legacy\n\t\t}", "peer", ports, i) +
			"\n\t\trest /api\n\t\trest_wait 1s\n\t\ttask_lease " + lease + "\n"
		site := "\troute /api/* {\n\t\tmcp_gateway {\n" + block + "\n\t\t}\n\t}"
		g := launchGateway(t, ports[i], globals, site, block)
		// Built with GOFLAGS=-race, a race in the instance fails the test.
		t.Cleanup(func() {
			if strings.Contains(g.Log(), "DATA RACE") {
				t.Errorf("a data race in instance %d:\n%s", i, g.Log())
			}
		})
		return g
	}
	base = func(i int, tool string) string {
		return fmt.Sprintf("http://127.0.0.1:%d/api/tools/%s/calls/", ports[i], tool)
	}
	return launch, base
}

// ended polls the call at url until it no longer runs, and returns it.
func ended(t *testing.T, url string) restCall {
	t.Helper()
	var c restCall
	waitForWithin(t, 30*time.Second, url+" ended", func() bool {
		r := restDo(t, "GET", url, nil, "")
		if r.Status != http.StatusOK || json.Unmarshal(r.Body, &c) != nil {
			t.Fatalf("GET %s: %s", url, r)
		}
		return c.Status != "running"
	})
	return c
}

// TestRESTCarriedOver: REST calls outlive their instance, as tasks do.
// Two instances share state_key and Caddy's storage, in front of a
// resumable legacy server (countingServer). Five calls run on instance 0
// (their tools working, holding the upstream's streams) when it is
//
//   - SIGKILLed (task_lease 1s): instance 1 adopts each call once its
//     lease lapsed, and the task machinery takes its task over;
//   - SIGKILLed and started again with the same instance_id (task_lease
//     1h): the new process adopts its own calls at once;
//   - stopped gracefully (caddy stop, task_lease 1h): it hands the calls
//     over, and instance 1 adopts them at once;
//
// the tools are then released. Each call, polled on an instance up, ends
// success with its own tool's result, and the upstream ran each tool
// once: the call's stream was reopened after its last event, not the call
// made again. In front of a server without an event store, a call whose
// instance stops reads failed at once on the other, saying why (a lease of
// 1h). A call waiting for an answer when its instance is SIGKILLed
// is advanced on the other instance (its tasks/update waits out the dead
// owner's lease) and ends with the answer, its tool run once.
func TestRESTCarriedOver(t *testing.T) {
	t.Parallel()
	for _, sc := range []struct{ how, lease string }{{"killed", "1s"}, {"restarted", "1h"}, {"stopped", "1h"}} {
		t.Run(sc.how, func(t *testing.T) {
			t.Parallel()
			release := make(chan struct{})
			up := newCountingServer(t, release)
			launch, base := carryFleet(t, up.url, sc.lease)
			fleet := []*gateway{launch(0), launch(1)}
			const n = 5
			for i := range n {
				r := restDo(t, "PUT", base(0, "work")+fmt.Sprint("c", i), map[string]string{"Idempotency-Key": "k"}, fmt.Sprintf(`{"arguments":{"n":%d}}`, i))
				wantCall(t, r, http.StatusCreated, "running")
			}
			waitFor(t, "the five tools running upstream", func() bool { all, _ := up.runs(0); return all == n })

			poll := 1 // the instance the calls are polled on
			switch sc.how {
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
				c := ended(t, base(poll, "work")+fmt.Sprint("c", i))
				if c.Status != "success" || !strings.Contains(string(c.Result), fmt.Sprintf(`"text":"done %d"`, i)) {
					t.Fatalf("call %d after its instance %s: %+v (error %s)", i, sc.how, c, c.Error)
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
	t.Run("not resumable, stopped", func(t *testing.T) {
		t.Parallel()
		var slept atomic.Int32
		launch, base := carryFleet(t, restLegacyServer(t, &slept), "1h")
		fleet := []*gateway{launch(0), launch(1)}
		wantCall(t, restDo(t, "PUT", base(0, "slow")+"s", map[string]string{"Idempotency-Key": "k"}, `{"arguments":{"ms":30000}}`),
			http.StatusCreated, "running")
		fleet[0].stop(t)
		c := ended(t, base(1, "slow")+"s")
		if c.Status != "failed" || !strings.Contains(string(c.Error), "could not be resumed") {
			t.Fatalf("the call after its instance stopped: %+v (error %s)", c, c.Error)
		}
	})
	t.Run("asking, killed", func(t *testing.T) {
		t.Parallel()
		up := newCountingServer(t, nil)
		launch, base := carryFleet(t, up.url, "1s")
		fleet := []*gateway{launch(0), launch(1)}
		asked := wantCall(t, restDo(t, "PUT", base(0, "ask")+"q", map[string]string{"Idempotency-Key": "k"}, `{"arguments":{"n":7}}`),
			http.StatusCreated, "awaitingElicitationResult")
		fleet[0].kill(t)
		r := restDo(t, "POST", base(1, "ask")+"q/advance", map[string]string{"If-Match": `"` + asked.ETag + `"`},
			`{"action":"accept","content":{"answer":"yes"}}`)
		if r.Status != http.StatusOK {
			t.Fatalf("advance on the other instance: %s", r)
		}
		c := ended(t, base(1, "ask")+"q")
		if c.Status != "success" || !strings.Contains(string(c.Result), `"text":"got yes"`) {
			t.Fatalf("the call after its instance was killed: %+v (error %s)", c, c.Error)
		}
		if _, ran := up.runs(7); ran != 1 {
			t.Fatalf("the tool ran %d times", ran)
		}
	})
}
