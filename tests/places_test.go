package tests

// Places of calls finished on another instance: a call parked
// holding no stream counts toward max_parked on the instance that parked
// it while the upstream holds its session; when its retry finishes it on
// another instance, which ends the session, the parking instance gives
// the place back (it checks the session with a notification on it: 404
// once it ended).

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestPlacesFinishedElsewhere: two instances with max_parked 3 and
// max_parked_per_principal 2. In front of the go-sdk server (two questions
// a call) and of the TypeScript SDK 1.x server (server-everything, one),
// four times max_parked calls park on the first instance, each from a new
// principal, and finish on the second: the first keeps taking new calls,
// gives their places back (finished_elsewhere) and, in front of the go-sdk
// server, whose sessions the test can count, the upstream keeps none of
// them. Then a principal parks two calls and never retries: its third is
// refused with 429 (their places still count: their sessions live), while
// another principal's call parks.
func TestPlacesFinishedElsewhere(t *testing.T) {
	t.Parallel()
	limits := "\t\tmax_parked 3\n\t\tmax_parked_per_principal 2\n"
	finished := `caddy_mcp_gateway_resumable_calls_total{event="finished_elsewhere"}`
	t.Run("go-sdk", func(t *testing.T) {
		up := newResumableServer(t)
		block := "\t\tupstream " + up.url + " {\n\t\t\tera legacy\n\t\t}\n" + limits + "\t\tstate_key " + testKey(0x3c)
		g0, g1 := startGateway(t, block), startGateway(t, block)
		for i := range 12 {
			who := map[string]string{"Authorization": fmt.Sprintf("Bearer user%d", i)}
			x := askCall(t, g0.URL, 10*i+1, "tea", nil, who)
			if x.Status != http.StatusOK {
				t.Fatalf("call %d refused by the parking instance: %s", i, x)
			}
			second := parseInputRequired(t, askCall(t, g1.URL, 10*i+2, "tea", answerWith(t, parseInputRequired(t, x), "yes"), who))
			x = askCall(t, g1.URL, 10*i+3, "tea", answerWith(t, second, "sure"), who)
			if x.Resp == nil || x.Resp.Error != nil || !strings.Contains(string(x.Resp.Result), `"accept:yes,accept:sure"`) {
				t.Fatalf("call %d on the other instance: %s", i, x)
			}
		}
		deadline := time.Now().Add(10 * time.Second)
		for up.sessions() != 0 {
			if time.Now().After(deadline) {
				t.Fatalf("%d upstream sessions left after every call ended", up.sessions())
			}
			time.Sleep(10 * time.Millisecond)
		}
		if got := fleetMetric(t, []*gateway{g0}, finished, 9); got < 9 {
			t.Fatalf("%s = %v on the parking instance, want at least 9", finished, got)
		}
		stillParked(t, g0, func(id int, who map[string]string) rpcExchange { return askCall(t, g0.URL, id, "tea", nil, who) })
		// mallory parked before: the instance, whose calls finish
		// elsewhere, keeps a session ready for its next call.
		if n := up.sessions(); n != 3 && n != 4 {
			t.Fatalf("%d upstream sessions, want the 3 parked calls' (and one primed)", n)
		}
	})
	t.Run("typescript-sdk", func(t *testing.T) {
		up := startServerEverything(t)
		block := "\t\tupstream " + up + " {\n\t\t\tera legacy\n\t\t}\n" + limits + "\t\tstate_key " + testKey(0x3d)
		g0, g1 := startGateway(t, block), startGateway(t, block)
		call := func(url string, id int, extra map[string]any, who map[string]string) rpcExchange {
			return elicitingCall(t, url, id, "trigger-elicitation-request", map[string]any{}, extra, who)
		}
		for i := range 12 {
			who := map[string]string{"Authorization": fmt.Sprintf("Bearer user%d", i)}
			x := call(g0.URL, 10*i+1, nil, who)
			if x.Status != http.StatusOK {
				t.Fatalf("call %d refused by the parking instance: %s", i, x)
			}
			ir := parseInputRequired(t, x)
			var key string
			for k := range ir.InputRequests {
				key = k
			}
			name := fmt.Sprintf("Ada Elsewhere %d", i)
			x = call(g1.URL, 10*i+2, map[string]any{"requestState": ir.RequestState,
				"inputResponses": map[string]any{key: map[string]any{"action": "accept", "content": map[string]any{"name": name}}}}, who)
			if x.Resp == nil || x.Resp.Error != nil || !strings.Contains(string(x.Resp.Result), name) {
				t.Fatalf("call %d on the other instance: %s", i, x)
			}
		}
		if got := fleetMetric(t, []*gateway{g0}, finished, 9); got < 9 {
			t.Fatalf("%s = %v on the parking instance, want at least 9", finished, got)
		}
		stillParked(t, g0, func(id int, who map[string]string) rpcExchange { return call(g0.URL, id, nil, who) })
	})
}

// stillParked checks that g, with max_parked_per_principal 2, refuses a
// principal's third call while its first two are parked (never retried),
// and parks another principal's call.
func stillParked(t *testing.T, g *gateway, first func(id int, who map[string]string) rpcExchange) {
	t.Helper()
	mallory := map[string]string{"Authorization": "Bearer mallory"}
	for i := range 2 {
		parseInputRequired(t, first(1000+i, mallory))
	}
	x := first(1002, mallory)
	if x.Status != http.StatusTooManyRequests || x.Resp == nil || x.Resp.Error == nil || x.Resp.Error.Code != -32603 ||
		!strings.Contains(x.Resp.Error.Message, "max_parked_per_principal") {
		t.Fatalf("a third call of a principal with two parked: %s, want 429", x)
	}
	parseInputRequired(t, first(1003, map[string]string{"Authorization": "Bearer trent"}))
	if got := fleetMetric(t, []*gateway{g}, "caddy_mcp_gateway_resumable_parked_calls", 3); got != 3 {
		t.Fatalf("resumable_parked_calls = %v, want the 3 parked calls", got)
	}
}

// TestPlacesUnderLoad: two instances that know nothing of each other
// (state_key only: the second resumes a retry and ends the session),
// max_parked_per_principal 4, in front of the go-sdk server; one principal
// with 4 clients making calls back to back, each call parked on the first
// instance and finished on the second (every fourth call's first retry
// back to the first, which so learns that the tool's retries come back at
// once, and lingers its calls). At most 4 calls of the principal live at
// any time, so none may be refused: the places of calls finished on the
// second instance, lingering ones included, must make room for the next.
func TestPlacesUnderLoad(t *testing.T) {
	// Serial: a place freed elsewhere is waited for at most 2 s before the
	// call is refused, and among the parallel tests, on 2 cores, the
	// other instance's DELETE of a finished call's session took longer
	// (429 for four of eighty calls, once, at a load average of 10).
	up := newResumableServer(t)
	block := "\t\tupstream " + up.url + " {\n\t\t\tera legacy\n\t\t}\n\t\tmax_parked_per_principal 4\n\t\tstate_key " + testKey(0x3e)
	g0, g1 := startGateway(t, block), startGateway(t, block)
	alice := map[string]string{"Authorization": "Bearer alice"}
	// round reports what x is not: input_required (ir set) or, with
	// want, the result carrying it.
	round := func(x rpcExchange, want string) (inputRequired, string) {
		var ir inputRequired
		switch {
		case x.Resp == nil || x.Resp.Error != nil:
			return ir, x.String()
		case want != "":
			if !strings.Contains(string(x.Resp.Result), want) {
				return ir, "result " + string(x.Resp.Result) + ", want " + want
			}
		case json.Unmarshal(x.Resp.Result, &ir) != nil || ir.ResultType != "input_required" || len(ir.InputRequests) != 1:
			return ir, "want input_required: " + string(x.Resp.Result)
		}
		return ir, ""
	}
	var wg sync.WaitGroup
	for c := range 4 {
		wg.Go(func() {
			for i := range 20 {
				id := 1000*c + 10*i
				first := g1
				if i%4 == 0 {
					first = g0
				}
				ir, bad := round(askCall(t, g0.URL, id+1, "tea", nil, alice), "")
				if bad == "" {
					ir, bad = round(askCall(t, first.URL, id+2, "tea", answerWith(t, ir, "yes"), alice), "")
				}
				if bad == "" {
					_, bad = round(askCall(t, g1.URL, id+3, "tea", answerWith(t, ir, "sure"), alice), `"accept:yes,accept:sure"`)
				}
				if bad != "" {
					t.Errorf("client %d, call %d: %s", c, i, bad)
					return
				}
			}
		})
	}
	wg.Wait()
	lingered := `caddy_mcp_gateway_resumable_calls_total{event="lingered"}`
	if n := metricValue(scrape(t, g0), lingered); n < 1 {
		t.Errorf("%s = %v on the first instance: its calls never lingered", lingered, n)
	}
}
