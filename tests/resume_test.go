package tests

// Parking without holding: in front of a legacy server whose
// streams are resumable (go-sdk with an event store), a call parks with
// nothing held, and its retry is served by any instance sharing
// state_key — no peer, no advertise — even once the instance that parked
// it is gone.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// resumableServer is a go-sdk v1.8 server with a MemoryEventStore (events
// carry ids, a GET with Last-Event-ID replays what followed) behind a
// handler that restart swaps for a fresh one (same address, no sessions),
// as an upstream restarted. Its tool ask elicits twice and answers with
// both answers; a tool call cancelled while it waits for an answer is
// reported on cancelled, deletes counts DELETE requests (sessions ended by
// the gateway) and reopens GET requests with Last-Event-ID (call streams
// reopened by an instance resuming a call).
type resumableServer struct {
	url       string
	current   atomic.Pointer[http.Handler]
	server    atomic.Pointer[mcp.Server]
	cancelled chan struct{}
	deletes   atomic.Int32
	reopens   atomic.Int32
	runs      atomic.Int32
}

func newResumableServer(t *testing.T) *resumableServer {
	t.Helper()
	rs := &resumableServer{cancelled: make(chan struct{}, 64)}
	rs.restart()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodDelete:
			rs.deletes.Add(1)
		case r.Method == http.MethodGet && r.Header.Get("Last-Event-ID") != "":
			rs.reopens.Add(1)
		}
		(*rs.current.Load()).ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	rs.url = ts.URL
	return rs
}

func (rs *resumableServer) restart() {
	server := mcp.NewServer(&mcp.Implementation{Name: "resumable", Version: "1"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "ask", Description: "Asks twice."},
		func(ctx context.Context, req *mcp.CallToolRequest, in struct {
			Topic string `json:"topic"`
		}) (*mcp.CallToolResult, any, error) {
			rs.runs.Add(1)
			got, err := elicitTwice(ctx, req, in.Topic)
			if err != nil {
				if ctx.Err() != nil {
					select {
					case rs.cancelled <- struct{}{}:
					default:
					}
				}
				return nil, nil, err
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Join(got, ",")}}}, nil, nil
		})
	h := http.Handler(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server },
		&mcp.StreamableHTTPOptions{EventStore: mcp.NewMemoryEventStore(nil)}))
	rs.server.Store(server)
	rs.current.Store(&h)
}

// answerSchema is the schema of the test servers' questions: one string,
// answer.
var answerSchema = map[string]any{"type": "object", "properties": map[string]any{"answer": map[string]any{"type": "string"}}}

// elicitTwice asks the client "About <topic>?", then "Sure?", as the test
// servers' ask tools do, and returns the answers as action:answer.
func elicitTwice(ctx context.Context, req *mcp.CallToolRequest, topic string) ([]string, error) {
	var got []string
	for _, q := range []string{"About " + topic + "?", "Sure?"} {
		res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: q, RequestedSchema: answerSchema})
		if err != nil {
			return nil, err
		}
		a, _ := res.Content["answer"].(string)
		got = append(got, res.Action+":"+a)
	}
	return got, nil
}

// sessions is how many sessions the server holds now.
func (rs *resumableServer) sessions() int {
	n := 0
	for range rs.server.Load().Sessions() {
		n++
	}
	return n
}

// kill ends g at once (SIGKILL to its process group), as a crash would.
func (g *gateway) kill(t *testing.T) {
	t.Helper()
	_ = syscall.Kill(-g.cmd.Process.Pid, syscall.SIGKILL)
	select {
	case <-g.done:
	case <-time.After(10 * time.Second):
		t.Fatal("caddy did not exit within 10s of SIGKILL")
	}
}

// answerWith is the extra params of a retry answering ir's one question.
func answerWith(t *testing.T, ir inputRequired, answer string) map[string]any {
	t.Helper()
	if len(ir.InputRequests) != 1 {
		t.Fatalf("want one question, got %v", ir.InputRequests)
	}
	var key string
	for k := range ir.InputRequests {
		key = k
	}
	return map[string]any{"requestState": ir.RequestState,
		"inputResponses": map[string]any{key: map[string]any{"action": "accept", "content": map[string]any{"answer": answer}}}}
}

// TestResumeAfterInstanceLoss: two instances sharing only state_key; the
// call parks on the first, which is killed; the second serves both rounds
// of the call to its result. A requestState replayed on the instance that
// used it is refused with 400; replayed on a third instance after the call
// ended, the upstream no longer knows the call (502). No address leaks.
func TestResumeAfterInstanceLoss(t *testing.T) {
	t.Parallel()
	up := newResumableServer(t)
	block := "\t\tupstream " + up.url + " {\n\t\t\tera legacy\n\t\t}\n\t\tstate_key " + testKey(0x33)
	g0, g1 := startGateway(t, block), startGateway(t, block)
	alice := map[string]string{"Authorization": "Bearer alice"}

	first := parseInputRequired(t, askCall(t, g0.URL, 1, "tea", nil, alice))
	g0.kill(t)
	second := parseInputRequired(t, askCall(t, g1.URL, 2, "tea", answerWith(t, first, "yes"), alice))
	x := askCall(t, g1.URL, 3, "tea", answerWith(t, second, "sure"), alice)
	if x.Resp == nil || x.Resp.Error != nil || !strings.Contains(string(x.Resp.Result), `"accept:yes,accept:sure"`) {
		t.Fatalf("final: %s", x)
	}
	// g1 resumed both rounds and parked the second: the resumable calls'
	// counter says so (the parked list never held them).
	for event, want := range map[string]float64{"resumed": 2, "parked": 1} {
		series := `caddy_mcp_gateway_resumable_calls_total{event="` + event + `"}`
		if got := fleetMetric(t, []*gateway{g1}, series, want); got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}
	// Replayed where it was used.
	again := askCall(t, g1.URL, 4, "tea", answerWith(t, first, "no"), alice)
	if again.Status != http.StatusBadRequest || again.Resp == nil || again.Resp.Error == nil || again.Resp.Error.Code != -32602 {
		t.Fatalf("replay on the instance that used it: %s", again)
	}
	// Replayed on an instance that never saw it, after the call ended.
	g2 := startGateway(t, block)
	late := askCall(t, g2.URL, 5, "tea", answerWith(t, second, "no"), alice)
	if late.Status != http.StatusBadGateway || late.Resp == nil || late.Resp.Error == nil || late.Resp.Error.Code != -32603 ||
		!strings.Contains(late.Resp.Error.Message, "no longer knows the call") {
		t.Fatalf("replay elsewhere after the end: %s", late)
	}
	for _, ex := range []rpcExchange{again, late} {
		if strings.Contains(ex.Raw, "127.0.0.1") {
			t.Fatalf("an address in %s", ex.Raw)
		}
	}
	// Another principal cannot use a state, even unused.
	third := parseInputRequired(t, askCall(t, g1.URL, 6, "tea", nil, alice))
	mallory := askCall(t, g2.URL, 7, "tea", answerWith(t, third, "x"), map[string]string{"Authorization": "Bearer mallory"})
	if mallory.Status != http.StatusBadRequest || mallory.Resp == nil || mallory.Resp.Error == nil {
		t.Fatalf("another principal's retry: %s", mallory)
	}
}

// TestResumeUpstreamRestarted: an upstream restarted while a call is
// parked (it knows no session now): the retry gets a clear 502 at once,
// on any instance, and nothing hangs.
func TestResumeUpstreamRestarted(t *testing.T) {
	t.Parallel()
	up := newResumableServer(t)
	block := "\t\tupstream " + up.url + " {\n\t\t\tera legacy\n\t\t}\n\t\tstate_key " + testKey(0x34)
	g0, g1 := startGateway(t, block), startGateway(t, block)
	alice := map[string]string{"Authorization": "Bearer alice"}
	ir := parseInputRequired(t, askCall(t, g0.URL, 1, "tea", nil, alice))
	up.restart()
	x := askCall(t, g1.URL, 2, "tea", answerWith(t, ir, "yes"), alice)
	if x.Status != http.StatusBadGateway || x.Resp == nil || x.Resp.Error == nil || x.Resp.Error.Code != -32603 ||
		!strings.Contains(x.Resp.Error.Message, "no longer knows the call") || strings.Contains(x.Raw, "127.0.0.1") {
		t.Fatalf("retry after the upstream restarted: %s", x)
	}
	series := `caddy_mcp_gateway_resumable_calls_total{event="gone"}`
	if got := fleetMetric(t, []*gateway{g1}, series, 1); got != 1 {
		t.Errorf("%s = %v, want 1", series, got)
	}
	// The gateway goes on: a new call parks and completes.
	ir = parseInputRequired(t, askCall(t, g1.URL, 3, "tea", nil, alice))
	ir = parseInputRequired(t, askCall(t, g0.URL, 4, "tea", answerWith(t, ir, "a"), alice))
	x = askCall(t, g1.URL, 5, "tea", answerWith(t, ir, "b"), alice)
	if x.Resp == nil || x.Resp.Error != nil || !strings.Contains(string(x.Resp.Result), `"accept:a,accept:b"`) {
		t.Fatalf("a call after the restart: %s", x)
	}
}

// tsCall POSTs a modern tools/call of tool to a TypeScript SDK server
// through the gateway, with extra params merged.
func tsCall(t *testing.T, url string, id int, tool string, extra map[string]any) rpcExchange {
	t.Helper()
	return elicitingCall(t, url, id, tool, map[string]any{}, extra, nil)
}

// tsCallAcross makes a call of server-everything's
// trigger-elicitation-request parked by park and answered with name through
// retry (its id and the next), and fails unless the result carries the
// name.
func tsCallAcross(t *testing.T, park, retry *gateway, id int, name string) {
	t.Helper()
	ir := parseInputRequired(t, tsCall(t, park.URL, id, "trigger-elicitation-request", nil))
	var key string
	for key = range ir.InputRequests {
	}
	x := tsCall(t, retry.URL, id+1, "trigger-elicitation-request", map[string]any{"requestState": ir.RequestState,
		"inputResponses": map[string]any{key: map[string]any{"action": "accept", "content": map[string]any{"name": name}}}})
	if x.Resp == nil || x.Resp.Error != nil || !strings.Contains(string(x.Resp.Result), name) {
		t.Fatalf("call %d answered %q: %s", id, name, x)
	}
}

// TestResumeTSServer: in front of the TypeScript SDK 1.x server
// (server-everything, whose streamable HTTP transport keeps an
// InMemoryEventStore), a call parks holding nothing — the parking
// instance lists it as such ("holding": "nothing", "resumable": true, no
// principal nor requestState) — and is finished on
// another instance sharing only state_key after the first was killed.
func TestResumeTSServer(t *testing.T) {
	t.Parallel()
	up := startServerEverything(t)
	block := "\t\tupstream " + up + " {\n\t\t\tera legacy\n\t\t}\n\t\tstate_key " + testKey(0x35)
	g0, g1 := startGateway(t, block), startGateway(t, block)
	ir := parseInputRequired(t, tsCall(t, g0.URL, 1, "trigger-elicitation-request", nil))
	var parked []map[string]any
	adminGET(t, g0, "/mcp_gateway/parked", &parked)
	if len(parked) != 1 || parked[0]["holding"] != "nothing" || parked[0]["resumable"] != true ||
		parked[0]["upstream"] != up || parked[0]["name"] != "trigger-elicitation-request" || parked[0]["round"] != float64(1) {
		t.Fatalf("parked = %v, want the call parked holding nothing, in round 1", parked)
	}
	if raw, _ := json.Marshal(parked); strings.Contains(string(raw), ir.RequestState) || strings.Contains(string(raw), "principal") {
		t.Fatalf("the parked list shows a requestState or a principal: %s", raw)
	}
	g0.kill(t)
	var key string
	for k := range ir.InputRequests {
		key = k
	}
	x := tsCall(t, g1.URL, 2, "trigger-elicitation-request", map[string]any{"requestState": ir.RequestState,
		"inputResponses": map[string]any{key: map[string]any{"action": "accept", "content": map[string]any{"name": "Ada Resumed"}}}})
	if x.Resp == nil || x.Resp.Error != nil || !strings.Contains(string(x.Resp.Result), "Ada Resumed") {
		t.Fatalf("retry on the other instance: %s", x)
	}
}

// TestResumeLingerElsewhere: resume_linger 1s. A first retry that comes
// back at once to the instance that parked the call teaches it that the
// tool is quick; from then on its calls linger (a retry there reads on
// from the open stream: the lingered counter). Then each retry reaches
// the other instance at once, while the parking instance still holds the
// call's streams. In front of the go-sdk server, which lets one connection
// hold a stream, the answer the other instance posts makes the tool ask
// again on the stream the first still holds: the first lets go at that,
// and the other's GET gets the stream (its first tries refused with 409).
// In front of the TypeScript SDK 1.x server, a GET with Last-Event-ID
// takes the stream over, and the instance that lingered must not take it
// back. Every call completes with its answers.
func TestResumeLingerElsewhere(t *testing.T) {
	// Not in parallel: each retry must come within resume_linger (1s).
	lingered := `caddy_mcp_gateway_resumable_calls_total{event="lingered"}`
	t.Run("go-sdk", func(t *testing.T) {
		up := newResumableServer(t)
		block := "\t\tupstream " + up.url + " {\n\t\t\tera legacy\n\t\t}\n\t\tresume_linger 1s\n\t\tstate_key " + testKey(0x3a)
		g0, g1 := startGateway(t, block), startGateway(t, block)
		// Round 1 back to g0 (it learns), round 2 lingers and comes back.
		ir := parseInputRequired(t, askCall(t, g0.URL, 1, "tea", nil, nil))
		ir = parseInputRequired(t, askCall(t, g0.URL, 2, "tea", answerWith(t, ir, "a"), nil))
		x := askCall(t, g0.URL, 3, "tea", answerWith(t, ir, "b"), nil)
		if x.Resp == nil || x.Resp.Error != nil || !strings.Contains(string(x.Resp.Result), `"accept:a,accept:b"`) {
			t.Fatalf("first call: %s", x)
		}
		if got := fleetMetric(t, []*gateway{g0}, lingered, 1); got != 1 {
			t.Fatalf("%s = %v on the parking instance, want 1", lingered, got)
		}
		// Round 1 lingers on g0 and goes on through g1.
		first := parseInputRequired(t, askCall(t, g0.URL, 4, "tea", nil, nil))
		second := parseInputRequired(t, askCall(t, g1.URL, 5, "tea", answerWith(t, first, "yes"), nil))
		x = askCall(t, g0.URL, 6, "tea", answerWith(t, second, "sure"), nil)
		if x.Resp == nil || x.Resp.Error != nil || !strings.Contains(string(x.Resp.Result), `"accept:yes,accept:sure"`) {
			t.Fatalf("second call: %s", x)
		}
	})
	t.Run("typescript-sdk", func(t *testing.T) {
		up := startServerEverything(t)
		block := "\t\tupstream " + up + " {\n\t\t\tera legacy\n\t\t}\n\t\tresume_linger 1s\n\t\tstate_key " + testKey(0x3b)
		g0, g1 := startGateway(t, block), startGateway(t, block)
		for i, retry := range []*gateway{g0, g0, g1, g1} {
			tsCallAcross(t, g0, retry, 10*i+1, fmt.Sprintf("Ada Lingered %d", i))
			if i == 1 {
				if got := fleetMetric(t, []*gateway{g0}, lingered, 1); got != 1 {
					t.Fatalf("%s = %v on the parking instance, want 1", lingered, got)
				}
			}
		}
	})
}

// TestResumeAbandonedEnded: a call parked holding no stream and never
// retried is ended upstream by the instance that parked it, once its
// requestState expired (park_ttl 1s, then the 10s grace): the upstream's
// tool sees its request cancelled, and the session is DELETEd.
func TestResumeAbandonedEnded(t *testing.T) {
	t.Parallel()
	up := newResumableServer(t)
	g := startGateway(t, "\t\tupstream "+up.url+" {\n\t\t\tera legacy\n\t\t}\n\t\tpark_ttl 1s\n\t\tstate_key "+testKey(0x35))
	alice := map[string]string{"Authorization": "Bearer alice"}
	parseInputRequired(t, askCall(t, g.URL, 1, "tea", nil, alice))
	select {
	case <-up.cancelled:
	case <-time.After(30 * time.Second):
		t.Fatal("the abandoned call was not cancelled upstream within 30s")
	}
	waitMetric(t, g, `caddy_mcp_gateway_resumable_calls_total{event="ended"}`, 1)
	if n := up.deletes.Load(); n != 1 {
		t.Fatalf("%d DELETEs, want 1", n)
	}
	waitMetric(t, g, `caddy_mcp_gateway_resumable_parked_calls`, 0)
}

// TestResumeAbandonedResumedElsewhere: a call parked on the first instance
// (park_ttl 3s) and retried on the second before its state expired, which
// parks it again, is not ended by the first at its state's expiry (the
// replay shows the upstream went on): it completes on the second. (3s, not
// 1s: the retry must come before the expiry, also with the tests running
// in parallel on a busy machine.)
func TestResumeAbandonedResumedElsewhere(t *testing.T) {
	t.Parallel()
	up := newResumableServer(t)
	key := "\t\tstate_key " + testKey(0x36)
	upstream := "\t\tupstream " + up.url + " {\n\t\t\tera legacy\n\t\t}\n"
	g0 := startGateway(t, upstream+"\t\tpark_ttl 3s\n"+key)
	g1 := startGateway(t, upstream+key)
	alice := map[string]string{"Authorization": "Bearer alice"}
	first := parseInputRequired(t, askCall(t, g0.URL, 1, "tea", nil, alice))
	second := parseInputRequired(t, askCall(t, g1.URL, 2, "tea", answerWith(t, first, "yes"), alice))
	waitMetric(t, g0, `caddy_mcp_gateway_resumable_calls_total{event="left"}`, 1)
	if n := up.deletes.Load(); n != 0 {
		t.Fatalf("%d DELETEs before the call ended", n)
	}
	x := askCall(t, g1.URL, 3, "tea", answerWith(t, second, "sure"), alice)
	if x.Resp == nil || x.Resp.Error != nil || !strings.Contains(string(x.Resp.Result), `"accept:yes,accept:sure"`) {
		t.Fatalf("final: %s", x)
	}
	select {
	case <-up.cancelled:
		t.Fatal("the call was cancelled upstream")
	default:
	}
}

// TestResumeAbandonedTSServer: in front of server-everything (TypeScript
// SDK 1.x, InMemoryEventStore), a call parked holding no stream and never
// retried is ended by the instance that parked it once its state expired:
// the TypeScript server's replay holds exactly what the gateway had seen
// (the probe ends the call: event "ended", not "left"). Then a call
// answered on another instance before the first's expiry completes there,
// and the first, checking its place, finds its session gone
// (finished_elsewhere) and never probes it. The checks of the first call's
// place, while it waits, must not look like progress to the probe: the
// TypeScript server's event store replays every event after Last-Event-ID,
// whatever its stream.
func TestResumeAbandonedTSServer(t *testing.T) {
	t.Parallel()
	up := startServerEverything(t)
	key := "\t\tstate_key " + testKey(0x39)
	upstream := "\t\tupstream " + up + " {\n\t\t\tera legacy\n\t\t}\n"
	g0 := startGateway(t, upstream+"\t\tpark_ttl 3s\n"+key)
	g1 := startGateway(t, upstream+key)
	parseInputRequired(t, tsCall(t, g0.URL, 1, "trigger-elicitation-request", nil))
	waitMetric(t, g0, `caddy_mcp_gateway_resumable_calls_total{event="ended"}`, 1)

	ir := parseInputRequired(t, tsCall(t, g0.URL, 2, "trigger-elicitation-request", nil))
	var k string
	for k = range ir.InputRequests {
	}
	x := tsCall(t, g1.URL, 3, "trigger-elicitation-request", map[string]any{"requestState": ir.RequestState,
		"inputResponses": map[string]any{k: map[string]any{"action": "accept", "content": map[string]any{"name": "Ada Resumed"}}}})
	if x.Resp == nil || x.Resp.Error != nil || !strings.Contains(string(x.Resp.Result), "Ada Resumed") {
		t.Fatalf("retry on the other instance: %s", x)
	}
	waitMetric(t, g0, `caddy_mcp_gateway_resumable_calls_total{event="finished_elsewhere"}`, 1)
	if got := fleetMetric(t, []*gateway{g0}, `caddy_mcp_gateway_resumable_calls_total{event="ended"}`, 1); got != 1 {
		t.Fatalf("ended = %v, want 1", got)
	}
}
