package tests

// The REST face (option `rest`): SEP-1597's HTTP REST transport
// in front of a legacy server (go-sdk, through the forward bridge) and a
// modern one (TypeScript SDK 2.x fixture, passed through), served by two
// Caddy instances sharing state_key and one file_system storage, with a
// plain net/http client.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/tests/support"
)

// restFleet starts two instances sharing state_key and a file_system
// storage, each serving the MCP endpoint at /mcp and the REST face at
// /api (the block's lines, plus `rest /api`, in both). It returns the
// instances' base URLs (http://127.0.0.1:PORT).
func restFleet(t *testing.T, upstream, extra string) []string {
	t.Helper()
	bases, _ := restFleetProcs(t, upstream, extra)
	return bases
}

// restFleetProcs is restFleet, with the instances' processes.
func restFleetProcs(t *testing.T, upstream, extra string) ([]string, []*gateway) {
	t.Helper()
	return restFleetIn(t, t.TempDir(), upstream, extra)
}

// restFleetIn is restFleetProcs with the file_system storage at store.
func restFleetIn(t *testing.T, store, upstream, extra string) ([]string, []*gateway) {
	t.Helper()
	return restFleetTraced(t, store, upstream, extra, nil)
}

// restFleetTraced is restFleetIn with Caddy's tracing directive on,
// exporting to rec, when rec is not nil.
func restFleetTraced(t *testing.T, store, upstream, extra string, rec *support.TraceReceiver) ([]string, []*gateway) {
	t.Helper()
	globals := "\tstorage file_system " + store
	ports := []int{freePort(t), freePort(t)}
	bases := make([]string, len(ports))
	procs := make([]*gateway, len(ports))
	for i, port := range ports {
		block := fleetBlock(t, upstream, "peer", ports, i) + "\n\t\trest /api\n" + extra
		site := "\troute /api/* {\n\t\tmcp_gateway {\n" + block + "\n\t\t}\n\t}"
		var env []string
		if rec != nil {
			site, env = "\ttracing\n"+site, rec.Env()
		}
		g := newGateway(t, port, fmt.Sprintf("127.0.0.1:%d", freePort(t)))
		g.globals, g.site = globals, site
		g.writeConfig(t, block)
		g.run(t, env...)
		// Built with GOFLAGS=-race, a race in the instance fails the test.
		t.Cleanup(func() {
			if strings.Contains(g.Log(), "DATA RACE") {
				t.Errorf("a data race in instance %d:\n%s", i, g.Log())
			}
		})
		procs[i], bases[i] = g, fmt.Sprintf("http://127.0.0.1:%d", g.Port)
	}
	return bases, procs
}

// restResp is a REST answer.
type restResp struct {
	Status int
	Header http.Header
	Body   []byte
}

func (r restResp) String() string {
	return fmt.Sprintf("HTTP %d %s: %s", r.Status, r.Header.Get("Content-Type"), r.Body)
}

// restCall is the call resource.
type restCall struct {
	ToolName           string          `json:"toolname"`
	ID                 string          `json:"id"`
	ETag               string          `json:"etag"`
	Status             string          `json:"status"`
	ElicitationRequest json.RawMessage `json:"elicitationRequest"`
	SamplingRequest    json.RawMessage `json:"samplingRequest"`
	InputKey           string          `json:"inputKey"`
	Result             json.RawMessage `json:"result"`
	Error              json.RawMessage `json:"error"`
}

// restDo makes one request; hdr may set Content-Type (default
// application/json when there is a body).
func restDo(t *testing.T, method, url string, hdr map[string]string, body string) restResp {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return restResp{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

// withHeaders is hdr with more headers.
func withHeaders(hdr map[string]string, kv ...string) map[string]string {
	out := map[string]string{}
	for k, v := range hdr {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i]] = kv[i+1]
	}
	return out
}

// wantCall checks a call answer of one of statuses (HTTP status code)
// and returns the call, its ETag header checked against its etag.
func wantCall(t *testing.T, r restResp, code int, status string) restCall {
	t.Helper()
	var c restCall
	if r.Status != code || json.Unmarshal(r.Body, &c) != nil || c.Status != status {
		t.Fatalf("want HTTP %d %s, got %s", code, status, r)
	}
	if r.Header.Get("ETag") != `"`+c.ETag+`"` || c.ETag == "" {
		t.Fatalf("ETag header %q, etag %q", r.Header.Get("ETag"), c.ETag)
	}
	return c
}

// wantProblem checks a problem+json answer of status.
func wantProblem(t *testing.T, r restResp, status int) {
	t.Helper()
	var p struct {
		Status int    `json:"status"`
		Title  string `json:"title"`
	}
	if r.Status != status || r.Header.Get("Content-Type") != "application/problem+json" ||
		json.Unmarshal(r.Body, &p) != nil || p.Status != status || p.Title == "" {
		t.Fatalf("want a problem of HTTP %d, got %s", status, r)
	}
	if strings.Contains(string(r.Body), "127.0.0.1") {
		t.Fatalf("a problem names an address: %s", r.Body)
	}
}

// restLegacyServer is a go-sdk legacy server (sessions, no event store:
// a parked call holds its stream on the instance that parked it, and a
// retry elsewhere is relayed there): hello answers at once, ask elicits
// twice, roots_ask lists the client's roots and elicits once, slow
// sleeps `ms` milliseconds (counting those it finished in done).
func restLegacyServer(t *testing.T, done *atomic.Int32) string {
	return restLegacyServerAnswers(t, done, nil)
}

// restLegacyServerAnswers is restLegacyServer whose ask tool also sends
// what it was answered, per topic, to answers (when not nil).
func restLegacyServerAnswers(t *testing.T, done *atomic.Int32, answers chan<- string) string {
	t.Helper()
	server := mcp.NewServer(&mcp.Implementation{Name: "rest-legacy", Version: "1"}, nil)
	text := func(s string) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
	}
	mcp.AddTool(server, &mcp.Tool{Name: "hello", Description: "Says hello."},
		func(_ context.Context, _ *mcp.CallToolRequest, in struct {
			Name string `json:"name"`
		}) (*mcp.CallToolResult, any, error) {
			return text("Hello, " + in.Name + "!"), nil, nil
		})
	mcp.AddTool(server, &mcp.Tool{Name: "ask", Description: "Asks twice."},
		func(ctx context.Context, req *mcp.CallToolRequest, in struct {
			Topic string `json:"topic"`
		}) (*mcp.CallToolResult, any, error) {
			got, err := elicitTwice(ctx, req, in.Topic)
			if err != nil {
				return nil, nil, err
			}
			select {
			case answers <- in.Topic + " " + strings.Join(got, ","):
			default: // nil, or nobody reads
			}
			return text(strings.Join(got, ",")), nil, nil
		})
	mcp.AddTool(server, &mcp.Tool{Name: "roots_ask", Description: "Lists roots, then asks."},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			roots, err := req.Session.ListRoots(ctx, nil)
			if err != nil {
				return nil, nil, err
			}
			res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "Go?", RequestedSchema: answerSchema})
			if err != nil {
				return nil, nil, err
			}
			a, _ := res.Content["answer"].(string)
			names := make([]string, 0, len(roots.Roots))
			for _, r := range roots.Roots {
				names = append(names, r.Name)
			}
			return text(fmt.Sprintf("roots:%s %s:%s", strings.Join(names, "+"), res.Action, a)), nil, nil
		})
	mcp.AddTool(server, &mcp.Tool{Name: "slow", Description: "Sleeps."},
		func(ctx context.Context, req *mcp.CallToolRequest, in struct {
			Ms int `json:"ms"`
		}) (*mcp.CallToolResult, any, error) {
			end := time.After(time.Duration(in.Ms) * time.Millisecond)
			tick := time.NewTicker(200 * time.Millisecond)
			defer tick.Stop()
			for slept := 200; ; slept += 200 {
				select {
				case <-end:
					done.Add(1)
					return text("slept"), nil, nil
				case <-tick.C:
					if tok := req.Params.GetProgressToken(); tok != nil {
						_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok,
							Progress: float64(slept), Total: float64(in.Ms), Message: "sleeping"})
					}
				case <-ctx.Done():
					return nil, nil, ctx.Err()
				}
			}
		})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil))
	t.Cleanup(ts.Close)
	return ts.URL
}

// TestRESTLegacy: the call lifecycle in front of a legacy server, over
// two instances: a fast call answered by its PUT; the idempotent PUT and
// the 409; an eliciting call advanced over two rounds, each on the other
// instance, with If-Match (a stale one gets 412) and If-None-Match (304);
// cancel; the caller's list and another principal's 404; roots; a long
// call answered running, then polled.
func TestRESTLegacy(t *testing.T) {
	t.Parallel()
	var slept atomic.Int32
	answers := make(chan string, 16)
	up := restLegacyServerAnswers(t, &slept, answers)
	gw := restFleet(t, "\t\tupstream "+up+" {\n\t\t\tera legacy\n\t\t}", "\t\trest_wait 2s\n")
	alice := map[string]string{"Authorization": "Bearer alice"}
	bob := map[string]string{"Authorization": "Bearer bob"}
	call := func(i int, tool, id string) string { return gw[i] + "/api/tools/" + tool + "/calls/" + id }

	// A fast call: success in the PUT's answer.
	put := restDo(t, "PUT", call(0, "hello", "c1"), withHeaders(alice, "Idempotency-Key", "k1"), `{"arguments":{"name":"Ada"}}`)
	c := wantCall(t, put, http.StatusCreated, "success")
	if !strings.Contains(string(c.Result), "Hello, Ada!") || c.ToolName != "hello" || c.ID != "c1" {
		t.Fatalf("fast call: %s", put)
	}
	// The same id and key again, on the other instance: the same call.
	again := wantCall(t, restDo(t, "PUT", call(1, "hello", "c1"), withHeaders(alice, "Idempotency-Key", "k1"), `{"arguments":{"name":"Bob"}}`), http.StatusOK, "success")
	if again.ETag != c.ETag || !strings.Contains(string(again.Result), "Hello, Ada!") {
		t.Fatalf("idempotent PUT: %+v", again)
	}
	wantProblem(t, restDo(t, "PUT", call(1, "hello", "c1"), withHeaders(alice, "Idempotency-Key", "k2"), `{"arguments":{"name":"Bob"}}`), http.StatusConflict)
	// A tool the server does not list: 404, and no call made of it; an
	// existing tool given invalid arguments: the go-sdk answers an
	// isError result (a tool error, as MCP has it), so a call that
	// succeeded with that result, and no error.
	wantProblem(t, restDo(t, "PUT", call(0, "nosuch", "n1"), withHeaders(alice, "Idempotency-Key", "k"), `{"arguments":{}}`), http.StatusNotFound)
	wantProblem(t, restDo(t, "GET", call(1, "nosuch", "n1"), alice, ""), http.StatusNotFound)
	bad := wantCall(t, restDo(t, "PUT", call(0, "hello", "bad-args"), withHeaders(alice, "Idempotency-Key", "k"), `{"arguments":{"name":5}}`),
		http.StatusCreated, "success")
	if len(bad.Error) != 0 || !strings.Contains(string(bad.Result), `"isError":true`) {
		t.Fatalf("invalid arguments: %+v", bad)
	}

	// Two rounds of elicitation, each answered on the other instance.
	first := wantCall(t, restDo(t, "PUT", call(0, "ask", "a1"), withHeaders(alice, "Idempotency-Key", "k"), `{"arguments":{"topic":"tea"}}`),
		http.StatusCreated, "awaitingElicitationResult")
	if !strings.Contains(string(first.ElicitationRequest), "About tea?") {
		t.Fatalf("first question: %s", first.ElicitationRequest)
	}
	got := wantCall(t, restDo(t, "GET", call(1, "ask", "a1"), alice, ""), http.StatusOK, "awaitingElicitationResult")
	if got.ETag != first.ETag {
		t.Fatalf("GET elsewhere: etag %q, want %q", got.ETag, first.ETag)
	}
	if r := restDo(t, "GET", call(1, "ask", "a1"), withHeaders(alice, "If-None-Match", `"`+first.ETag+`"`), ""); r.Status != http.StatusNotModified {
		t.Fatalf("If-None-Match: %s", r)
	}
	answer := func(a string) string { return `{"action":"accept","content":{"answer":"` + a + `"}}` }
	wantProblem(t, restDo(t, "POST", call(1, "ask", "a1")+"/advance", withHeaders(alice, "If-Match", `"stale"`), answer("yes")), http.StatusPreconditionFailed)
	second := wantCall(t, restDo(t, "POST", call(1, "ask", "a1")+"/advance", withHeaders(alice, "If-Match", `"`+first.ETag+`"`), answer("yes")),
		http.StatusOK, "awaitingElicitationResult")
	if !strings.Contains(string(second.ElicitationRequest), "Sure?") || second.ETag == first.ETag {
		t.Fatalf("second question: %+v", second)
	}
	// The first round's etag is stale now: a replayed advance gets 412.
	wantProblem(t, restDo(t, "POST", call(0, "ask", "a1")+"/advance", withHeaders(alice, "If-Match", `"`+first.ETag+`"`), answer("yes")), http.StatusPreconditionFailed)
	end := wantCall(t, restDo(t, "POST", call(0, "ask", "a1")+"/advance", withHeaders(alice, "If-Match", `"`+second.ETag+`"`), answer("sure")),
		http.StatusOK, "success")
	if !strings.Contains(string(end.Result), "accept:yes,accept:sure") {
		t.Fatalf("final: %s", end.Result)
	}
	wantProblem(t, restDo(t, "POST", call(1, "ask", "a1")+"/advance", withHeaders(alice, "If-Match", `"`+end.ETag+`"`), answer("x")), http.StatusConflict)

	// Cancel a call waiting for input, on the other instance.
	w := wantCall(t, restDo(t, "PUT", call(0, "ask", "a2"), withHeaders(alice, "Idempotency-Key", "k"), `{"arguments":{"topic":"jam"}}`),
		http.StatusCreated, "awaitingElicitationResult")
	wantCall(t, restDo(t, "POST", call(1, "ask", "a2")+"/cancel", alice, ""), http.StatusOK, "canceled")
	wantCall(t, restDo(t, "GET", call(0, "ask", "a2"), alice, ""), http.StatusOK, "canceled")
	wantProblem(t, restDo(t, "POST", call(0, "ask", "a2")+"/advance", alice, answer("late")), http.StatusConflict)
	// The parked upstream call was dismissed (both questions cancelled, as
	// by a user closing the dialog): the tool ended, not left to park_ttl.
	for got := ""; got != "jam cancel:,cancel:"; {
		select {
		case got = <-answers:
			if !strings.HasPrefix(got, "jam ") && !strings.HasPrefix(got, "tea ") {
				t.Fatalf("the ask tool ended with %q", got)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the cancelled call's upstream tool did not end within 10s")
		}
	}
	_ = w

	// The caller's list, newest first; filtered; another principal's.
	var list struct {
		Calls []restCall `json:"calls"`
	}
	lr := restDo(t, "GET", gw[1]+"/api/tools/ask/calls", alice, "")
	if lr.Status != http.StatusOK || json.Unmarshal(lr.Body, &list) != nil || len(list.Calls) != 2 ||
		list.Calls[0].ID != "a2" || list.Calls[1].ID != "a1" {
		t.Fatalf("list: %s", lr)
	}
	lr = restDo(t, "GET", gw[0]+"/api/tools/ask/calls?status=success", alice, "")
	if json.Unmarshal(lr.Body, &list) != nil || len(list.Calls) != 1 || list.Calls[0].ID != "a1" {
		t.Fatalf("list of successes: %s", lr)
	}
	wantProblem(t, restDo(t, "GET", gw[0]+"/api/tools/ask/calls?status=bogus", alice, ""), http.StatusBadRequest)
	wantProblem(t, restDo(t, "GET", gw[0]+"/api/tools/ask/calls?createdAfter=yesterday", alice, ""), http.StatusBadRequest)
	lr = restDo(t, "GET", gw[0]+"/api/tools/ask/calls?createdAfter="+time.Now().Add(time.Hour).UTC().Format(time.RFC3339), alice, "")
	if json.Unmarshal(lr.Body, &list) != nil || len(list.Calls) != 0 {
		t.Fatalf("calls created in an hour: %s", lr)
	}
	lr = restDo(t, "GET", gw[0]+"/api/tools/ask/calls?createdAfter=2020-01-01&limit=1", alice, "")
	if json.Unmarshal(lr.Body, &list) != nil || len(list.Calls) != 1 || list.Calls[0].ID != "a2" {
		t.Fatalf("the newest call since 2020: %s", lr)
	}
	lr = restDo(t, "GET", gw[0]+"/api/tools/ask/calls", bob, "")
	if json.Unmarshal(lr.Body, &list) != nil || len(list.Calls) != 0 {
		t.Fatalf("bob's list: %s", lr)
	}
	wantProblem(t, restDo(t, "GET", call(0, "ask", "a1"), bob, ""), http.StatusNotFound)
	wantProblem(t, restDo(t, "POST", call(1, "ask", "a1")+"/cancel", bob, ""), http.StatusNotFound)
	wantProblem(t, restDo(t, "POST", call(1, "ask", "a1")+"/advance", bob, answer("x")), http.StatusNotFound)
	// Bob may use the same id: his own call.
	wantCall(t, restDo(t, "PUT", call(1, "hello", "c1"), withHeaders(bob, "Idempotency-Key", "other"), `{"arguments":{"name":"Bob"}}`), http.StatusCreated, "success")

	// Roots: the principal's, answered by the gateway.
	if r := restDo(t, "PUT", gw[0]+"/api/roots", alice, `{"roots":[{"uri":"file:///srv/a","name":"a"},{"uri":"file:///srv/b","name":"b"}]}`); r.Status != http.StatusNoContent {
		t.Fatalf("PUT roots: %s", r)
	}
	ra := wantCall(t, restDo(t, "PUT", call(1, "roots_ask", "r1"), withHeaders(alice, "Idempotency-Key", "k"), `{}`), http.StatusCreated, "awaitingElicitationResult")
	end = wantCall(t, restDo(t, "POST", call(0, "roots_ask", "r1")+"/advance", withHeaders(alice, "If-Match", `"`+ra.ETag+`"`), answer("go")), http.StatusOK, "success")
	if !strings.Contains(string(end.Result), "roots:a+b accept:go") {
		t.Fatalf("roots: %s", end.Result)
	}
	rb := wantCall(t, restDo(t, "PUT", call(1, "roots_ask", "r1"), withHeaders(bob, "Idempotency-Key", "k"), `{}`), http.StatusCreated, "awaitingElicitationResult")
	end = wantCall(t, restDo(t, "POST", call(1, "roots_ask", "r1")+"/advance", withHeaders(bob, "If-Match", `"`+rb.ETag+`"`), answer("go")), http.StatusOK, "success")
	if !strings.Contains(string(end.Result), "roots: accept:go") {
		t.Fatalf("bob's roots (none): %s", end.Result)
	}

	// A long call: running (Retry-After) past rest_wait, then polled on
	// the other instance until it succeeds.
	slow := restDo(t, "PUT", call(0, "slow", "s1"), withHeaders(alice, "Idempotency-Key", "k"), `{"arguments":{"ms":3500}}`)
	wantCall(t, slow, http.StatusCreated, "running")
	if slow.Header.Get("Retry-After") == "" {
		t.Fatalf("running without Retry-After: %s", slow)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		r := restDo(t, "GET", call(1, "slow", "s1"), alice, "")
		var s restCall
		_ = json.Unmarshal(r.Body, &s)
		if s.Status == "success" {
			break
		}
		if s.Status != "running" || time.Now().After(deadline) {
			t.Fatalf("polling a long call: %s", r)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// A long call cancelled on the other instance while it runs: the
	// record says canceled, and stays so; the task the gateway runs the
	// call as is cancelled, which stops its upstream call.
	before := slept.Load() // s1 has ended
	slow = restDo(t, "PUT", call(0, "slow", "s2"), withHeaders(alice, "Idempotency-Key", "k"), `{"arguments":{"ms":3000}}`)
	wantCall(t, slow, http.StatusCreated, "running")
	wantCall(t, restDo(t, "POST", call(1, "slow", "s2")+"/cancel", alice, ""), http.StatusOK, "canceled")
	// Cancelled on the instance running it: its upstream call is stopped.
	s3 := time.Now()
	slow = restDo(t, "PUT", call(0, "slow", "s3"), withHeaders(alice, "Idempotency-Key", "k"), `{"arguments":{"ms":4000}}`)
	wantCall(t, slow, http.StatusCreated, "running")
	wantCall(t, restDo(t, "POST", call(0, "slow", "s3")+"/cancel", alice, ""), http.StatusOK, "canceled")
	// s2's and s3's upstream calls would have ended 3s and 4s after their
	// PUTs had they not been stopped: wait past that.
	time.Sleep(time.Until(s3.Add(4500 * time.Millisecond)))
	wantCall(t, restDo(t, "GET", call(0, "slow", "s2"), alice, ""), http.StatusOK, "canceled")
	wantCall(t, restDo(t, "GET", call(1, "slow", "s3"), alice, ""), http.StatusOK, "canceled")
	if got := slept.Load() - before; got != 0 {
		t.Fatalf("%d slow calls finished since s2 started, want none (s2 cancelled on another instance, s3 on its own: both stopped)", got)
	}
}

// TestRESTAttacks: names and ids outside the charset (path traversal,
// escaped slashes), bodies too large or of another type, a missing
// Idempotency-Key, unknown routes and methods: refused with problems
// before anything reaches storage or an upstream.
func TestRESTAttacks(t *testing.T) {
	t.Parallel()
	var slept atomic.Int32
	up := restLegacyServer(t, &slept)
	gw := restFleet(t, "\t\tupstream "+up+" {\n\t\t\tera legacy\n\t\t}", "\t\tmax_request_body 4KiB\n\t\trest_wait 2s\n\t\trest_max_calls_per_principal 1\n")
	key := map[string]string{"Idempotency-Key": "k"}
	for _, path := range []string{
		"/api/tools/x%2F..%2F..%2Fetc/calls/x", "/api/tools/hello/calls/..%2F..%2Fother", "/api/tools/hello/calls/..", "/api/tools/hello/calls/.hidden",
		"/api/tools/hello/calls/a%2Fb", "/api/tools/hel%00lo/calls/x", "/api/tools/hello/calls/" + strings.Repeat("x", 129),
		"/api/tools/h%C3%A9llo/calls/x",
	} {
		if r := restDo(t, "PUT", gw[0]+path, key, `{"arguments":{}}`); r.Status != http.StatusBadRequest {
			t.Errorf("%s: %s", path, r)
		}
	}
	wantProblem(t, restDo(t, "PUT", gw[0]+"/api/tools/hello/calls/x", key, `{"arguments":{"name":"`+strings.Repeat("a", 5000)+`"}}`), http.StatusRequestEntityTooLarge)
	wantProblem(t, restDo(t, "PUT", gw[0]+"/api/tools/hello/calls/x", withHeaders(key, "Content-Type", "text/plain"), `{"arguments":{}}`), http.StatusUnsupportedMediaType)
	wantProblem(t, restDo(t, "PUT", gw[0]+"/api/tools/hello/calls/x", nil, `{"arguments":{}}`), http.StatusBadRequest)
	wantProblem(t, restDo(t, "PUT", gw[0]+"/api/tools/hello/calls/x", key, `{"arguments":[1]}`), http.StatusBadRequest)
	wantProblem(t, restDo(t, "PUT", gw[0]+"/api/tools/hello/calls/x", key, `{"arguments":`), http.StatusBadRequest)
	wantProblem(t, restDo(t, "PUT", gw[0]+"/api/tools/hello/calls/x", key, strings.Repeat("[", 2000)+strings.Repeat("]", 2000)), http.StatusBadRequest)
	wantProblem(t, restDo(t, "GET", gw[0]+"/api/nothing", nil, ""), http.StatusNotFound)
	// One call running per principal and instance: a second is refused
	// (429) until the first ends; another principal is not.
	wantCall(t, restDo(t, "PUT", gw[0]+"/api/tools/slow/calls/s1", key, `{"arguments":{"ms":4500}}`), http.StatusCreated, "running")
	busy := restDo(t, "PUT", gw[0]+"/api/tools/slow/calls/s2", key, `{"arguments":{"ms":10}}`)
	wantProblem(t, busy, http.StatusTooManyRequests)
	if busy.Header.Get("Retry-After") == "" {
		t.Fatalf("429 without Retry-After: %s", busy)
	}
	wantCall(t, restDo(t, "PUT", gw[0]+"/api/tools/slow/calls/s2", withHeaders(key, "Authorization", "Bearer other"), `{"arguments":{"ms":10}}`), http.StatusCreated, "success")
	wantProblem(t, restDo(t, "GET", gw[0]+"/api/tools/slow/calls/s2", nil, ""), http.StatusNotFound) // refused: never made
	wantProblem(t, restDo(t, "PATCH", gw[0]+"/api/tools/hello/calls/x", nil, ""), http.StatusMethodNotAllowed)
	wantProblem(t, restDo(t, "GET", gw[0]+"/api/tools/hello/calls/never", nil, ""), http.StatusNotFound)
	// The MCP endpoint beside the face is unchanged.
	x := postRPC(t, gw[0]+"/mcp", nil, rpcBody(t, 1, "tools/call", map[string]any{"name": "hello"}), 1)
	if x.Status != http.StatusBadRequest {
		t.Fatalf("the MCP endpoint: %s", x)
	}
}

// TestRESTReadmeCurl runs the REST curl examples of docs/faces.md, as written
// (the demo's address replaced with the test gateway's), against the demo
// server behind two instances, and checks what they print.
func TestRESTReadmeCurl(t *testing.T) {
	t.Parallel()
	scripts, _ := readmeCurlScripts(t)
	script, ok := scripts["rest"]
	if !ok {
		t.Fatal("no <!-- curl: rest --> block in docs/faces.md")
	}
	const demo = "http://127.0.0.1:9100"
	if !strings.Contains(script, demo+"/api/") {
		t.Fatalf("the REST curl example of docs/faces.md does not use the demo's address %s/api", demo)
	}
	gw := restFleet(t, "\t\tupstream "+startDemoServer(t)+" {\n\t\t\tera auto\n\t\t}", "")
	out := runReadmeScript(t, strings.ReplaceAll(script, demo, gw[0]))
	for _, w := range []string{
		`"toolname":"greet","id":"hello-1"`, `"status":"success"`, `Hello, Caddy!`,
		`"toolname":"plan_trip","id":"trip-1"`, `"status":"awaitingElicitationResult"`, `"message":"Where do you want to go?"`,
		`"message":"When do you want to go to Lisbon?"`, `Trip to Lisbon from 2027-05-01 to 2027-05-08.`,
		`{"calls":[{"toolname":"plan_trip","id":"trip-1",`,
	} {
		if !strings.Contains(out, w) {
			t.Errorf("the output of the REST curl example of docs/faces.md lacks %s:\n%s", w, out)
		}
	}
}

// TestRESTLostInstance: a call running on an instance that dies, in front
// of a server whose streams are not resumable (no event store), reads as
// failed on the other once the dead instance's lease lapses (task_lease
// 1s), saying why, and can be cancelled there no more (it ended).
// TestRESTCarriedOver is the same in front of a resumable server.
func TestRESTLostInstance(t *testing.T) {
	t.Parallel()
	var slept atomic.Int32
	up := restLegacyServer(t, &slept)
	gw, procs := restFleetProcs(t, "\t\tupstream "+up+" {\n\t\t\tera legacy\n\t\t}", "\t\trest_wait 1s\n\t\ttask_lease 1s\n")
	url := "/api/tools/slow/calls/lost-1"
	wantCall(t, restDo(t, "PUT", gw[0]+url, map[string]string{"Idempotency-Key": "k"}, `{"arguments":{"ms":30000}}`), http.StatusCreated, "running")
	// Renewed while its instance lives: still running after two leases,
	// its progress in the record (and in its etag as seen: a poll with
	// the etag of an older progress gets the newer one).
	time.Sleep(2500 * time.Millisecond)
	r := restDo(t, "GET", gw[1]+url, nil, "")
	c := wantCall(t, r, http.StatusOK, "running")
	if !strings.Contains(string(r.Body), `"progress":{`) || !strings.Contains(string(r.Body), `"message":"sleeping"`) {
		t.Fatalf("running without progress: %s", r)
	}
	// The call reports progress every 200ms: a poll with this etag gets
	// the newer record (200) once the next progress is in.
	var r2 restResp
	if !poll(5*time.Second, func() bool {
		r2 = restDo(t, "GET", gw[0]+url, map[string]string{"If-None-Match": `"` + c.ETag + `"`}, "")
		return r2.Status == http.StatusOK
	}) {
		t.Fatalf("a poll with an older progress's etag, for 5s: %s", r2)
	}
	_ = syscall.Kill(-procs[0].cmd.Process.Pid, syscall.SIGKILL)
	<-procs[0].done
	deadline := time.Now().Add(5 * time.Second)
	for {
		r := restDo(t, "GET", gw[1]+url, nil, "")
		var c restCall
		_ = json.Unmarshal(r.Body, &c)
		if c.Status == "failed" {
			if !strings.Contains(string(c.Error), "the upstream call could not be resumed") {
				t.Fatalf("lost: %s", r)
			}
			break
		}
		if c.Status != "running" || time.Now().After(deadline) {
			t.Fatalf("after its instance died: %s", r)
		}
		time.Sleep(100 * time.Millisecond)
	}
	wantCall(t, restDo(t, "POST", gw[1]+url+"/cancel", nil, ""), http.StatusOK, "failed")
	if n := slept.Load(); n != 0 {
		t.Fatalf("%d slow calls finished", n)
	}
}
