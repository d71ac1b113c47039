package tests

// A federated block in a fleet, with a server down, and over servers whose
// listings take several pages: tasks created on one instance are polled on
// another by their namespaced taskId, an input_required retry lands on the
// other instance, a stopped server is left out of the merged catalog and
// named in the error of a call to it, and a merged list is followed page
// by page.

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/tests/support"
)

// fedTaskServers is the server blocks of a federated block over
// tests/legacyfixture as `lx` (legacy; the gateway hosts tasks for its
// tools, under the block's task policy; resume off: a call asking in-line
// parks holding its stream, so a retry elsewhere is relayed to it) and a ModernTasksServer as `mt`
// (modern; tasks of its own), with the task policy; it returns them and
// the modern server.
func fedTaskServers(t *testing.T) (string, *support.ModernTasksServer) {
	t.Helper()
	bin := buildGoBinary(t, "./tests/legacyfixture")
	port := freePort(t)
	lx := fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
	startPeer(t, "legacyfixture", exec.Command(bin, "-addr", fmt.Sprintf("127.0.0.1:%d", port))).waitUp(t, lx)
	mt := support.NewModernTasksServer(t)
	return `		server lx {
			upstream ` + lx + ` {
				era legacy
				resume off
			}
		}
		server mt {
			upstream ` + mt.URL + ` {
				era modern
			}
		}
		task slow_compute optional 200ms
		task confirm_delete optional 0
		task test_tool_with_task required 300ms
`, mt
}

// TestFederationFleetTasks: on a fleet of two instances (peers, one
// state_key, one storage) of a block over a legacy and a modern server, a
// task the gateway hosts for the legacy server's tool and a task of the
// modern server, both created through instance A, are polled through
// instance B by their namespaced taskIds until completed; a hosted task
// that asks is answered with tasks/update through B; a modern
// input_required round of the legacy server's elicitation, asked through
// A, is answered through B (relayed to A, which holds the call) and
// completes; a hosted task running on A is cancelled through B; and once A
// is gone, B answers a task of A's from its record in the shared storage,
// under the same taskId.
func TestFederationFleetTasks(t *testing.T) {
	t.Parallel()
	block, _ := fedTaskServers(t)
	ports := []int{freePort(t), freePort(t)}
	globals := "\tstorage file_system " + t.TempDir()
	fleet := make([]*gateway, len(ports))
	for i, port := range ports {
		fleet[i] = launchGateway(t, port, globals, "", fleetBlock(t, block, "peer", ports, i))
	}
	a, b := fleet[0].URL, fleet[1].URL
	c := &taskClient{t: t, auth: "Bearer alice"}

	var hosted string // the hosted task's id, answered from its record once A is gone
	for _, tc := range []struct {
		tool, ns, want string
		args           map[string]any
	}{
		{"lx__slow_compute", "lx:", "computed x in 1s", map[string]any{"seconds": 1, "label": "x"}},
		{"mt__slow_task", "mt:", "slow done after 300ms", map[string]any{"ms": 300}},
	} {
		v := parseTask(t, c.callTool(a, tc.tool, tc.args))
		if !strings.HasPrefix(v.TaskID, tc.ns) {
			t.Fatalf("%s: taskId %q, want it in the block's namespace %q", tc.tool, v.TaskID, tc.ns)
		}
		done := c.until(b, v.TaskID, func(v taskView) bool { return v.Status == "completed" }, "completed through B")
		if done.TaskID != v.TaskID {
			t.Errorf("%s: tasks/get of %s through B answered the taskId %s", tc.tool, v.TaskID, done.TaskID)
		}
		if done.Result == nil || len(done.Result.Content) == 0 || done.Result.Content[0].Text != tc.want {
			t.Errorf("%s: completed task %+v, want the text %q", tc.tool, done, tc.want)
		}
		if tc.ns == "lx:" {
			hosted = v.TaskID
		}
	}

	// A hosted task that asks (made at once: window 0), created on A,
	// answered with tasks/update on B.
	v := parseTask(t, c.callTool(a, "lx__confirm_delete", map[string]any{"filename": "g.txt"}))
	asked := c.until(b, v.TaskID, func(v taskView) bool { return v.Status == "input_required" }, "input_required through B")
	if asked.TaskID != v.TaskID {
		t.Errorf("tasks/get of %s through B answered the taskId %s", v.TaskID, asked.TaskID)
	}
	v.InputRequests = asked.InputRequests
	if x := c.task(b, "tasks/update", v.TaskID, map[string]any{"inputResponses": confirmAnswers(v.InputRequests)}); x.Resp == nil || x.Resp.Error != nil {
		t.Fatalf("tasks/update through B: %s", x)
	}
	v = c.until(b, v.TaskID, func(v taskView) bool { return v.Status == "completed" }, "completed through B")
	if v.Result == nil || len(v.Result.Content) == 0 || v.Result.Content[0].Text != "Deleted g.txt" {
		t.Errorf("the answered task: %+v, want Deleted g.txt", v)
	}

	alice := map[string]string{"Authorization": "Bearer alice"}
	args := map[string]any{"filename": "f.txt"}
	ir := parseInputRequired(t, elicitingCall(t, a, 1, "lx__confirm_delete", args, nil, alice))
	answers := confirmAnswers(ir.InputRequests)
	sent := `caddy_mcp_gateway_instance_forwards_total{direction="sent",outcome="ok"}`
	forwards := func() float64 { return max(0, metricValue(scrape(t, fleet[1]), sent)) }
	before := forwards()
	x := elicitingCall(t, b, 2, "lx__confirm_delete", args, map[string]any{"requestState": ir.RequestState, "inputResponses": answers}, alice)
	if got := checkToolResult(t, x, 2); got != "Deleted f.txt" {
		t.Errorf("the retry through B: %q, want Deleted f.txt", got)
	}
	if after := forwards(); after != before+1 {
		t.Errorf("B forwarded %v requests to the owner for the retry, want 1", after-before)
	}

	// A call that asks within its window (an input_required round), its
	// retry relayed from B to A, where it becomes a task.
	ir = parseInputRequired(t, c.callTool(a, "lx__test_tool_with_task", map[string]any{}))
	names := map[string]any{}
	for k := range ir.InputRequests {
		names[k] = map[string]any{"action": "accept", "content": map[string]any{"name": "Ada"}}
	}
	v = parseTask(t, c.send(b, "tools/call", "lx__test_tool_with_task", map[string]any{"name": "lx__test_tool_with_task",
		"arguments": map[string]any{}, "requestState": ir.RequestState, "inputResponses": names}, taskCaps()))
	if !strings.HasPrefix(v.TaskID, "lx:") || strings.HasPrefix(v.TaskID, "lx:lx:") {
		t.Errorf("the task a relayed retry became: taskId %s, want it in lx's namespace once", v.TaskID)
	}
	v = c.until(a, v.TaskID, func(v taskView) bool { return v.Status == "completed" }, "completed on A")
	if v.Result == nil || len(v.Result.Content) == 0 || v.Result.Content[0].Text != "Hello, Ada!" {
		t.Errorf("the task a relayed retry became: %+v, want Hello, Ada!", v)
	}

	// A hosted task running on A, cancelled through B.
	v = parseTask(t, c.callTool(a, "lx__slow_compute", map[string]any{"seconds": 30, "label": "long"}))
	if x := c.task(b, "tasks/cancel", v.TaskID, nil); x.Resp == nil || x.Resp.Error != nil {
		t.Fatalf("tasks/cancel through B: %s", x)
	}
	c.until(b, v.TaskID, func(v taskView) bool { return v.Status == "cancelled" }, "cancelled through B")

	// A gone: B answers a task of A's from its record, its taskId as it was.
	fleet[0].kill(t)
	if got := c.until(b, hosted, func(v taskView) bool { return v.Status == "completed" }, "completed from its record"); got.TaskID != hosted {
		t.Errorf("tasks/get of %s through B, A gone, answered the taskId %s", hosted, got.TaskID)
	}
}

// confirmAnswers accepts each of questions with {confirm: true}.
func confirmAnswers(questions map[string]json.RawMessage) map[string]any {
	answers := map[string]any{}
	for k := range questions {
		answers[k] = map[string]any{"action": "accept", "content": map[string]any{"confirm": true}}
	}
	return answers
}

// stoppablePeer is the demo server (tests/demoserver) run as a process on
// a fixed address, so that it can be killed and started again there.
type stoppablePeer struct {
	t    *testing.T
	bin  string
	addr string
	p    *peer
}

func newStoppablePeer(t *testing.T) *stoppablePeer {
	t.Helper()
	s := &stoppablePeer{t: t, bin: buildGoBinary(t, demoServerPkg), addr: fmt.Sprintf("127.0.0.1:%d", freePort(t))}
	s.start()
	return s
}

func (s *stoppablePeer) url() string { return "http://" + s.addr + "/mcp" }

func (s *stoppablePeer) start() {
	s.t.Helper()
	s.p = startPeer(s.t, "demoserver", exec.Command(s.bin, "-addr", s.addr))
	s.p.waitUp(s.t, s.url())
}

// kill SIGKILLs the process and waits until it has exited.
func (s *stoppablePeer) kill() {
	s.t.Helper()
	_ = syscall.Kill(-s.p.cmd.Process.Pid, syscall.SIGKILL)
	<-s.p.done
}

// listTools follows a merged tools/list on url to its end, as auth, and
// returns the names in the order seen (a name seen twice, twice) and the
// number of pages.
func listTools(t *testing.T, url, auth string) (names []string, pages int) {
	t.Helper()
	return listAll(t, url, auth, "tools/list")
}

// listAll is listTools for any list method: the names (of tools and
// prompts) or URIs (of resources) in the order seen.
func listAll(t *testing.T, url, auth, method string) (names []string, pages int) {
	t.Helper()
	return listAcross(t, []string{url}, auth, method)
}

// listAcross is listAll asking each page of the next of urls in turn
// (instances of one fleet).
func listAcross(t *testing.T, urls []string, auth, method string) (names []string, pages int) {
	t.Helper()
	cursor := ""
	for {
		url := urls[pages%len(urls)]
		params := map[string]any{"_meta": meta(modernVersion)}
		if cursor != "" {
			params["cursor"] = cursor
		}
		hdr := modernHeaders(modernVersion, method, "")
		hdr["Authorization"] = auth
		pages++
		x := postRPC(t, url, hdr, rpcBody(t, pages, method, params), pages)
		var res struct {
			Tools, Prompts, Resources []struct {
				Name string `json:"name"`
				URI  string `json:"uri"`
			}
			NextCursor string `json:"nextCursor"`
		}
		if x.Resp == nil || x.Resp.Error != nil || json.Unmarshal(x.Resp.Result, &res) != nil {
			t.Fatalf("%s page %d: %s", method, pages, x)
		}
		for _, e := range slices.Concat(res.Tools, res.Prompts) {
			names = append(names, e.Name)
		}
		for _, e := range res.Resources {
			names = append(names, e.URI)
		}
		if res.NextCursor == "" || pages > 100 {
			return names, pages
		}
		cursor = res.NextCursor
	}
}

// TestFederationServerDown: with one of three servers killed, the merged
// tools/list answers (list_timeout 1s) with the other two's tools; a call
// to the stopped server's tool gets an error naming the server and not its
// address; once the server is started again on the same address, its tools
// are listed again and a call to it succeeds. Then the modern server
// stopped is left out the same way, and named in the error a modern and a
// legacy client get.
func TestFederationServerDown(t *testing.T) {
	t.Parallel()
	demo := newStoppablePeer(t)
	one := newInProcessLegacy(t, "one")
	two := newInProcess(t, "two", &mcp.StreamableHTTPOptions{Stateless: true})
	g := startGateway(t, `		list_timeout 1s
		server one {
			upstream `+one.url()+`
		}
		server two {
			upstream `+two.url()+` {
				era modern
			}
		}
		server demo {
			upstream `+demo.url()+`
			prefix ""
		}
`)
	names, _ := listTools(t, g.URL, "Bearer alice")
	if !slices.Contains(names, "book_table") || !slices.Contains(names, "one__whoami") || !slices.Contains(names, "two__whoami") {
		t.Fatalf("tools/list before the stop: %v", names)
	}

	demo.kill()
	names, _ = listTools(t, g.URL, "Bearer alice")
	if !slices.Equal(names, []string{"one__whoami", "two__whoami"}) {
		t.Errorf("tools/list with demo stopped: %v, want one__whoami and two__whoami", names)
	}
	callStopped(t, g, "greet", "demo", demo.addr)

	demo.start()
	waitFor(t, "demo's tools listed again", func() bool {
		names, _ := listTools(t, g.URL, "Bearer alice")
		return slices.Contains(names, "book_table")
	})
	x := postRPC(t, g.URL, modernHeaders(modernVersion, "tools/call", "greet"),
		rpcBody(t, 8, "tools/call", map[string]any{"name": "greet", "arguments": map[string]any{"name": "x"}, "_meta": meta(modernVersion)}), 8)
	checkToolResult(t, x, 8)

	// The modern server stopped: the same, to a modern and a legacy client.
	two.stop()
	names, _ = listTools(t, g.URL, "Bearer alice")
	if !slices.Contains(names, "book_table") || slices.Contains(names, "two__whoami") {
		t.Errorf("tools/list with two stopped: %v, want demo's and one's tools only", names)
	}
	callStopped(t, g, "two__whoami", "two", two.addr)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := connectGo(t, g.URL, "2025-11-25", nil).CallTool(ctx, &mcp.CallToolParams{Name: "two__whoami", Arguments: map[string]any{}})
	if err == nil || !strings.Contains(err.Error(), `"two"`) || strings.Contains(err.Error(), "127.0.0.1") {
		t.Errorf("a legacy client's call to the stopped server: %v, want an error naming two and not its address", err)
	}
}

// callStopped calls tool, of the stopped server, on g and checks that the
// error names server and not its address addr.
func callStopped(t *testing.T, g *gateway, tool, server, addr string) {
	t.Helper()
	x := postRPC(t, g.URL, modernHeaders(modernVersion, "tools/call", tool),
		rpcBody(t, 7, "tools/call", map[string]any{"name": tool, "arguments": map[string]any{"name": "x"}, "_meta": meta(modernVersion)}), 7)
	if x.Resp == nil || x.Resp.Error == nil {
		t.Fatalf("a call to the stopped server %s: want an error, got %s", server, x)
	}
	if msg := x.Raw; !strings.Contains(msg, `\"`+server+`\"`) || strings.Contains(msg, addr) || strings.Contains(msg, "127.0.0.1") {
		t.Errorf("the error of a call to the stopped server must name it (%s) and not its address %s: %s", server, addr, msg)
	}
}

// TestFederationServerHung: a server that accepts connections and never
// answers is left out of the merged tools/list once list_timeout (1s) has
// passed, logged as late; the other server's tools are answered.
func TestFederationServerHung(t *testing.T) {
	t.Parallel()
	one := newInProcessLegacy(t, "one")
	hung, accepted := hungListener(t)
	g := startGateway(t, `		list_timeout 1s
		server one {
			upstream `+one.url()+`
		}
		server hung {
			upstream http://`+hung+`/mcp {
				era modern
			}
		}
`)
	names, _ := listTools(t, g.URL, "Bearer alice")
	if !slices.Equal(names, []string{"one__whoami"}) {
		t.Errorf("tools/list with hung not answering: %v, want one__whoami", names)
	}
	wait(t, signalled(accepted), 5*time.Second, "the hung server asked")
	for _, l := range waitLogLines(t, g, "a server was left out of a merged answer", 1) {
		if l["server"] != "hung" || l["why"] != "late" {
			t.Errorf("left out: %v, want the server hung, late", l)
		}
	}
}

// pagedServer is a go-sdk server with n tools t0…t(n-1), n prompts
// p0…p(n-1) and n resources paged://name/r0…, and a page size of 3: every
// listing of it takes several pages.
func pagedServer(t *testing.T, name string, n int, stateless bool) string {
	t.Helper()
	server := mcp.NewServer(&mcp.Implementation{Name: name, Version: "1"}, &mcp.ServerOptions{PageSize: 3})
	for i := range n {
		mcp.AddTool(server, &mcp.Tool{Name: fmt.Sprintf("t%d", i), Description: "A tool of a paged listing."},
			func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
				return support.Text(fmt.Sprintf("t%d", i)), nil, nil
			})
		server.AddPrompt(&mcp.Prompt{Name: fmt.Sprintf("p%d", i), Description: "A prompt of a paged listing."},
			func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
				return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "p"}}}}, nil
			})
		uri := fmt.Sprintf("paged://%s/r%d", name, i)
		server.AddResource(&mcp.Resource{URI: uri, Name: fmt.Sprintf("r%d", i)},
			func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
				return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, Text: "r"}}}, nil
			})
	}
	return support.ServeMCP(t, server, &mcp.StreamableHTTPOptions{Stateless: stateless})
}

// pagedBlock is a federated block over two paged servers: `p1` (legacy,
// 7 of each) and `p2` (modern, 5 of each).
func pagedBlock(t *testing.T) string {
	t.Helper()
	return `		server p1 {
			upstream ` + pagedServer(t, "p1", 7, false) + `
		}
		server p2 {
			upstream ` + pagedServer(t, "p2", 5, true) + ` {
				era modern
			}
		}
`
}

// pagedWant is what a merged listing of pagedBlock's servers shows: each
// name (or URI) of both, made by entry from the server's name and index.
func pagedWant(entry func(server string, i int) string) []string {
	var want []string
	for i := range 7 {
		want = append(want, entry("p1", i))
	}
	for i := range 5 {
		want = append(want, entry("p2", i))
	}
	slices.Sort(want)
	return want
}

// TestFederationPagination: following nextCursor through the merged
// tools/list, prompts/list and resources/list of two servers whose own
// listings take several pages (the go-sdk's page size, 3) shows every
// entry of both exactly once, to a modern client (raw HTTP) and to a
// legacy one (the go-sdk client at 2025-11-25, through the block's
// reverse bridge).
func TestFederationPagination(t *testing.T) {
	t.Parallel()
	g := startGateway(t, pagedBlock(t))
	lists := map[string][]string{
		"tools/list":     pagedWant(func(s string, i int) string { return fmt.Sprintf("%s__t%d", s, i) }),
		"prompts/list":   pagedWant(func(s string, i int) string { return fmt.Sprintf("%s__p%d", s, i) }),
		"resources/list": pagedWant(func(s string, i int) string { return fmt.Sprintf("paged://%s/r%d", s, i) }),
	}
	for method, want := range lists {
		names, pages := listAll(t, g.URL, "Bearer alice", method)
		got := slices.Sorted(slices.Values(names))
		if !slices.Equal(got, want) {
			t.Errorf("merged %s over %d pages: %v, want each of %v once", method, pages, names, want)
		}
		if pages < 3 {
			t.Errorf("merged %s took %d pages, want 3 or more (7 entries at 3 a page)", method, pages)
		}
	}

	cs := connectGo(t, g.URL, "2025-11-25", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	legacy := map[string][]string{}
	for tool, err := range cs.Tools(ctx, nil) {
		if err != nil {
			t.Fatalf("legacy tools/list: %v", err)
		}
		legacy["tools/list"] = append(legacy["tools/list"], tool.Name)
	}
	for prompt, err := range cs.Prompts(ctx, nil) {
		if err != nil {
			t.Fatalf("legacy prompts/list: %v", err)
		}
		legacy["prompts/list"] = append(legacy["prompts/list"], prompt.Name)
	}
	for res, err := range cs.Resources(ctx, nil) {
		if err != nil {
			t.Fatalf("legacy resources/list: %v", err)
		}
		legacy["resources/list"] = append(legacy["resources/list"], res.URI)
	}
	for method, want := range lists {
		if got := slices.Sorted(slices.Values(legacy[method])); !slices.Equal(got, want) {
			t.Errorf("a legacy client's %s: %v, want each of %v once", method, legacy[method], want)
		}
	}
}

// TestFederationFleetClients: the go-sdk client runs the demo server's
// two-round tool through a federated block on a fleet of two, every
// request of the call on the other instance than the one before (a
// balancer without affinity), as a modern client (its retries relayed to
// the instance holding the call) and as a legacy one (2025-11-25: its
// in-line answers relayed to the instance holding its stream); both
// complete.
func TestFederationFleetClients(t *testing.T) {
	t.Parallel()
	one := newInProcessLegacy(t, "one")
	block := `		server one {
			upstream ` + one.url() + `
		}
		server demo {
			upstream ` + startDemoServer(t) + ` {
				resume off
			}
			prefix ""
		}
`
	fleet := startFleetOf(t, 2, block, "peer")
	for _, version := range []string{"", "2025-11-25"} {
		rr := newRoundRobin(fleet)
		var elicitations atomic.Int32
		cs := connectThrough(t, rr, version, &mcp.ClientOptions{
			ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				elicitations.Add(1)
				return &mcp.ElicitResult{Action: "accept", Content: map[string]any{
					"destination": "Porto", "startDate": "2027-05-01", "endDate": "2027-05-08",
				}}, nil
			},
		})
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "plan_trip", Arguments: map[string]any{}})
		cancel()
		if err != nil {
			t.Fatalf("version %q: plan_trip: %v", version, err)
		}
		if got := toolText(res); got != "Trip to Porto from 2027-05-01 to 2027-05-08." || elicitations.Load() != 2 {
			t.Errorf("version %q: plan_trip %q after %d elicitations", version, got, elicitations.Load())
		}
		if got := whoamiOf(t, cs, "one__whoami"); got != "one" {
			t.Errorf("version %q: one__whoami answered %q", version, got)
		}
		// A modern client's call and retries, a legacy client's call and
		// in-line answers (never on the instance of the call's stream).
		if got := slices.Concat(rr.instancesOf("tools/call"), rr.instancesOf("answer")); !slices.Contains(got, 0) || !slices.Contains(got, 1) {
			t.Errorf("version %q: the call's requests went to instances %v, want both", version, got)
		}
	}
}

// whoamiOf calls tool (a whoami) on cs and returns its text.
func whoamiOf(t *testing.T, cs *mcp.ClientSession, tool string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: map[string]any{}})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	return toolText(res)
}

// TestFederationFleetPagination: on a fleet of two instances (one
// state_key), a merged listing followed with each page asked of the other
// instance than the one before shows every entry once: a cursor one
// instance sealed opens on the other.
func TestFederationFleetPagination(t *testing.T) {
	t.Parallel()
	fleet := startFleetOf(t, 2, pagedBlock(t), "peer")
	want := pagedWant(func(s string, i int) string { return fmt.Sprintf("%s__t%d", s, i) })
	names, pages := listAcross(t, []string{fleet[0].URL, fleet[1].URL}, "Bearer alice", "tools/list")
	if got := slices.Sorted(slices.Values(names)); !slices.Equal(got, want) || pages < 3 {
		t.Errorf("merged tools/list across the fleet over %d pages: %v, want each of %v once over 3 or more", pages, names, want)
	}
}
