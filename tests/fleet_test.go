package tests

// Several gateway instances sharing state_key and nothing else: a retry or
// an in-line answer that lands on another instance than the one owning the
// call is forwarded to the owner, signed; forged, replayed and expired
// forwarding headers are refused before anything reaches an upstream.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/tests/support"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/seal"
)

// fleetKeyByte makes the fleet's shared state_key (testKey).
const fleetKeyByte = 0x5a

// startFleet runs three gateway instances on loopback in front of the
// upstream block, sharing a state_key. form says how they find each other:
// "advertise" (each advertises its own address; ids are random) or "peer"
// (fixed ids gw-0, gw-1, gw-2, every instance listing all three).
func startFleet(t *testing.T, upstream, form string) []*gateway {
	t.Helper()
	return startFleetOf(t, 3, upstream, form)
}

// startFleetOf is startFleet with n instances.
func startFleetOf(t *testing.T, n int, upstream, form string) []*gateway {
	t.Helper()
	ports := make([]int, n)
	for i := range ports {
		ports[i] = freePort(t)
	}
	fleet := make([]*gateway, len(ports))
	for i, port := range ports {
		fleet[i] = startGatewayOn(t, port, fleetBlock(t, upstream, form, ports, i))
	}
	return fleet
}

// fleetBlock is the mcp_gateway block of instance i of a fleet listening
// on ports, in front of upstream, sharing a state_key; form says how the
// instances find each other (see startFleet).
func fleetBlock(t *testing.T, upstream, form string, ports []int, i int) string {
	t.Helper()
	block := upstream + "\n\t\tstate_key " + testKey(fleetKeyByte)
	switch form {
	case "advertise":
		block += fmt.Sprintf("\n\t\tadvertise http://127.0.0.1:%d", ports[i])
	case "peer":
		block += fmt.Sprintf("\n\t\tinstance_id gw-%d", i)
		for j, p := range ports {
			block += fmt.Sprintf("\n\t\tpeer gw-%d http://127.0.0.1:%d", j, p)
		}
	default:
		t.Fatalf("unknown fleet form %q", form)
	}
	return block
}

// hop is one request a roundRobin transport sent: to which instance, and
// what it was (the JSON-RPC method, "answer" for a client's response to an
// in-line request, or the HTTP method of a GET or DELETE).
type hop struct {
	instance int
	what     string
	status   string // the answer's HTTP status, or the error (balancer only)
}

// roundRobin is an http.RoundTripper that sends each request of a client to
// the next instance of a fleet, as a load balancer without affinity would,
// except that a legacy client's answer never goes to the instance holding
// the stream of its tools/call.
type roundRobin struct {
	hosts []string

	mu     sync.Mutex
	next   int
	callAt int // the instance that got the last tools/call
	hops   []hop
}

func newRoundRobin(fleet []*gateway) *roundRobin {
	rr := &roundRobin{callAt: -1}
	for _, g := range fleet {
		u, _ := url.Parse(g.URL)
		rr.hosts = append(rr.hosts, u.Host)
	}
	return rr
}

func (rr *roundRobin) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		var err error
		if body, err = io.ReadAll(req.Body); err != nil {
			return nil, err
		}
		req.Body.Close()
	}
	what := req.Method
	var msg struct {
		Method string          `json:"method"`
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	if json.Unmarshal(body, &msg) == nil {
		switch {
		case msg.Method != "":
			what = msg.Method
		case msg.Result != nil || msg.Error != nil:
			what = "answer"
		}
	}
	rr.mu.Lock()
	i := rr.next % len(rr.hosts)
	if what == "answer" && i == rr.callAt {
		i = (i + 1) % len(rr.hosts)
	}
	rr.next = i + 1
	if what == "tools/call" {
		rr.callAt = i
	}
	rr.hops = append(rr.hops, hop{instance: i, what: what})
	rr.mu.Unlock()
	out := req.Clone(req.Context())
	out.URL.Host = rr.hosts[i]
	out.Host = ""
	out.Body = io.NopCloser(bytes.NewReader(body))
	out.ContentLength = int64(len(body))
	return http.DefaultTransport.RoundTrip(out)
}

// instancesOf returns the instances the hops of kind what went to, in order.
func (rr *roundRobin) instancesOf(what string) []int {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	var out []int
	for _, h := range rr.hops {
		if h.what == what {
			out = append(out, h.instance)
		}
	}
	return out
}

// connectThrough connects a go-sdk client through rr (version "" for the
// modern era).
func connectThrough(t *testing.T, rr *roundRobin, version string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	tr := &mcp.StreamableClientTransport{Endpoint: "http://" + rr.hosts[0] + "/mcp", HTTPClient: &http.Client{Transport: rr}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "fleet-test-client", Version: "1"}, opts).
		Connect(ctx, tr, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// TestFleetForwardBridge: the go-sdk client, modern, runs the demo server's
// two-round tool with every request of the call on a different instance;
// the two retries are forwarded to the instance that parked the call.
func TestFleetForwardBridge(t *testing.T) {
	t.Parallel()
	// resume off: the calls park holding their stream, so their retries
	// go to their owner (tests/resume_test.go: calls that park holding
	// nothing, served by any instance).
	upstream := "\t\tupstream " + startDemoServer(t) + " {\n\t\t\tresume off\n\t\t}"
	for _, form := range []string{"advertise", "peer"} {
		t.Run(form, func(t *testing.T) {
			fleet := startFleet(t, upstream, form)
			rr := newRoundRobin(fleet)
			var elicitations atomic.Int32
			cs := connectThrough(t, rr, "", &mcp.ClientOptions{
				ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
					elicitations.Add(1)
					return &mcp.ElicitResult{Action: "accept", Content: map[string]any{
						"destination": "Porto", "startDate": "2027-05-01", "endDate": "2027-05-08",
					}}, nil
				},
			})
			if got := cs.InitializeResult().ProtocolVersion; got != modernVersion {
				t.Fatalf("negotiated %q, want %q", got, modernVersion)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "plan_trip", Arguments: map[string]any{}})
			if err != nil {
				t.Fatal(err)
			}
			if got := toolText(res); got != "Trip to Porto from 2027-05-01 to 2027-05-08." || elicitations.Load() != 2 {
				t.Fatalf("plan_trip: %q after %d elicitations", got, elicitations.Load())
			}
			calls := rr.instancesOf("tools/call")
			if len(calls) != 3 || calls[0] == calls[1] || calls[1] == calls[2] || calls[0] == calls[2] {
				t.Fatalf("the call and its two retries went to instances %v, want three different ones", calls)
			}
			// Both retries were forwarded to the owner: the fleet counts two
			// sent and two received.
			for _, dir := range []string{"sent", "received"} {
				series := `caddy_mcp_gateway_instance_forwards_total{direction="` + dir + `",outcome="ok"}`
				if got := fleetMetric(t, fleet, series, 2); got != 2 {
					t.Errorf("%s summed over the fleet = %v, want 2", series, got)
				}
			}
			// A retry is in its call's cell on the instance relaying it
			// too: three calls on their instances plus two relays, none
			// counted as refused ("none").
			cellOf := func(cell string) string {
				return `caddy_mcp_gateway_requests_total{cell="` + cell + `",method="tools/call",`
			}
			if got := fleetMetricPrefix(t, fleet, cellOf("modern-legacy"), 5); got != 5 {
				t.Errorf("tools/call requests in cell modern-legacy over the fleet = %v, want 5", got)
			}
			if got := fleetMetricPrefix(t, fleet, cellOf("none"), 0); got != 0 {
				t.Errorf("tools/call requests in cell none over the fleet = %v, want 0", got)
			}
		})
	}
}

// fleetMetricPrefix is fleetMetric summing every series starting with
// prefix (any values of the labels after it).
func fleetMetricPrefix(t *testing.T, fleet []*gateway, prefix string, want float64) float64 {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		sum := 0.0
		for _, g := range fleet {
			for _, line := range strings.Split(scrape(t, g), "\n") {
				if rest, ok := strings.CutPrefix(line, prefix); ok {
					if _, v, ok := strings.Cut(rest, "} "); ok {
						f, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
						sum += f
					}
				}
			}
		}
		if sum == want || time.Now().After(deadline) {
			return sum
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// fleetMetric sums series over the fleet's instances until it reaches want
// (a request is counted when its handler returns), for at most 10s.
func fleetMetric(t *testing.T, fleet []*gateway, series string, want float64) float64 {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		sum := 0.0
		for _, g := range fleet {
			if v := metricValue(scrape(t, g), series); v > 0 {
				sum += v
			}
		}
		if sum == want || time.Now().After(deadline) {
			return sum
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestFleetReverseBridge: the go-sdk client in 2025-11-25 mode runs the
// modern fixture's three-round tool (elicitation, sampling, elicitation)
// with every answer POSTed to another instance than the one holding the
// call's stream, in both fleet forms.
func TestFleetReverseBridge(t *testing.T) {
	t.Parallel()
	upstream := "\t\tupstream " + startModernFixture(t)
	for _, form := range []string{"advertise", "peer"} {
		t.Run(form, func(t *testing.T) {
			rr := newRoundRobin(startFleet(t, upstream, form))
			planParty(t, func(o *mcp.ClientOptions) *mcp.ClientSession { return connectThrough(t, rr, "2025-11-25", o) }).complete(t)
			call, answers := rr.instancesOf("tools/call"), rr.instancesOf("answer")
			if len(call) != 1 || len(answers) != 3 {
				t.Fatalf("%d tools/call and %d answers, want 1 and 3", len(call), len(answers))
			}
			others := map[int]bool{}
			for _, a := range answers {
				if a == call[0] {
					t.Fatalf("an answer went to instance %d, which holds the stream (answers went to %v)", a, answers)
				}
				others[a] = true
			}
			if len(others) != 2 {
				t.Fatalf("answers went to instances %v, want both instances other than %d", answers, call[0])
			}
		})
	}
}

// fleetAuth signs forwarding headers as a member of the test fleet would:
// the test knows the shared key.
func fleetAuth(t *testing.T, keyByte byte) *seal.ForwardAuth {
	t.Helper()
	kr, err := seal.NewKeyring(bytes.Repeat([]byte{keyByte}, seal.KeySize))
	if err != nil {
		t.Fatal(err)
	}
	return seal.NewForwardAuth(kr, "test-member", seal.NewReplayFilter(16))
}

// retryRequest is a retry of the recording server's ask tool, as sent to
// the gateway: its headers and body.
func retryRequest(t *testing.T, id int, topic string, ir inputRequired) (map[string]string, string) {
	t.Helper()
	m := meta(modernVersion)
	m["io.modelcontextprotocol/clientCapabilities"] = map[string]any{"elicitation": map[string]any{}}
	hdr := modernHeaders(modernVersion, "tools/call", "ask")
	hdr["Authorization"] = "Bearer alice"
	return hdr, rpcBody(t, id, "tools/call", map[string]any{
		"name": "ask", "arguments": map[string]any{"topic": topic}, "_meta": m,
		"inputResponses": map[string]any{"elicitation-1": acceptAnswer}, "requestState": ir.RequestState,
	})
}

// TestFleetForwardingHeader: a forwarding header sent straight to an
// instance is refused with 403 unless a fleet member signed it for this
// instance, for this very request, recently, and never presented it before;
// the upstream sees nothing of a refused one. Then the owner stops, and a
// retry on another instance gets a clear error promptly.
func TestFleetForwardingHeader(t *testing.T) {
	t.Parallel()
	rs := newRecordingServer(t)
	fleet := startFleet(t, "\t\tupstream "+rs.url+" {\n\t\t\tera legacy\n\t\t}", "peer")
	owner := fleet[0]
	alice := map[string]string{"Authorization": "Bearer alice"}
	ir := parseInputRequired(t, askCall(t, owner.URL, 1, "tea", nil, alice))
	hdr, body := retryRequest(t, 2, "tea", ir)
	member := fleetAuth(t, fleetKeyByte)
	sign := func(target, body string, at time.Time) string {
		return member.Sign(target, seal.ForwardedRequest{Method: "POST", URI: "/mcp", Body: []byte(body), Authorization: "Bearer alice",
			Principal: translate.PrincipalHash("Bearer alice")}, at)
	}
	with := func(forwarded string) map[string]string {
		h := map[string]string{seal.ForwardedHeader: forwarded}
		for k, v := range hdr {
			h[k] = v
		}
		return h
	}
	refused := func(t *testing.T, g *gateway, h map[string]string, body string, id any, wantMsg string) {
		t.Helper()
		before := rs.requests.Load()
		x := postRPC(t, g.URL, h, body, id)
		if r := checkRPCError(t, x, http.StatusForbidden, -32600, id); r != nil && !strings.Contains(r.Error.Message, wantMsg) {
			t.Errorf("message %q, want it to mention %q", r.Error.Message, wantMsg)
		}
		if after := rs.requests.Load(); after != before {
			t.Errorf("the upstream received %d requests for a refused forwarded request", after-before)
		}
	}

	now := time.Now()
	t.Run("forged", func(t *testing.T) {
		good := strings.Split(sign("gw-0", body, now), ";")
		good[6] = "s=" + strings.Repeat("A", 43)
		refused(t, owner, with(strings.Join(good, ";")), body, 2, "invalid forwarding header")
		refused(t, owner, with("v1;garbage"), body, 2, "invalid forwarding header")
		other := fleetAuth(t, fleetKeyByte+1).Sign("gw-0", seal.ForwardedRequest{Method: "POST", URI: "/mcp", Body: []byte(body), Authorization: "Bearer alice"}, now)
		refused(t, owner, with(other), body, 2, "unknown key (every instance of a fleet must share state_key)")
	})
	t.Run("another request", func(t *testing.T) {
		_, otherBody := retryRequest(t, 3, "tea", ir)
		refused(t, owner, with(sign("gw-0", otherBody, now)), body, 2, "signature mismatch")
		h := with(sign("gw-0", body, now))
		h["Authorization"] = "Bearer mallory"
		refused(t, owner, h, body, 2, "signature mismatch")
	})
	t.Run("another instance", func(t *testing.T) {
		refused(t, owner, with(sign("gw-1", body, now)), body, 2, "for another gateway instance")
	})
	t.Run("expired", func(t *testing.T) {
		refused(t, owner, with(sign("gw-0", body, now.Add(-time.Minute))), body, 2, "expired")
	})
	t.Run("on a request with nothing to forward", func(t *testing.T) {
		list := rpcBody(t, 9, "tools/list", map[string]any{"_meta": meta(modernVersion)})
		h := modernHeaders(modernVersion, "tools/list", "")
		h[seal.ForwardedHeader] = "v1;k=00000000;t=gw-1;e=1;n=x;s=y"
		refused(t, fleet[1], h, list, 9, "invalid forwarding header")
	})
	t.Run("genuine, then replayed", func(t *testing.T) {
		genuine := with(sign("gw-0", body, time.Now()))
		if text := checkToolResult(t, postRPC(t, owner.URL, genuine, body, 2), 2); text != "answer: yes" {
			t.Fatalf("a genuine forwarded retry: %q", text)
		}
		refused(t, owner, genuine, body, 2, "replayed")
	})
	t.Run("counted", func(t *testing.T) {
		// One genuine forwarded request; eight refused above, the replay included.
		waitMetrics(t, owner, map[string]float64{
			`caddy_mcp_gateway_instance_forwards_total{direction="received",outcome="ok"}`:    1,
			`caddy_mcp_gateway_instance_forwards_total{direction="received",outcome="error"}`: 8,
		})
	})

	t.Run("owner stopped", func(t *testing.T) {
		ir := parseInputRequired(t, askCall(t, owner.URL, 20, "coffee", nil, alice))
		owner.stop(t)
		hdr, body := retryRequest(t, 21, "coffee", ir)
		x := postRPC(t, fleet[1].URL, hdr, body, 21)
		if r := checkRPCError(t, x, http.StatusBadGateway, -32603, 21); r != nil &&
			(!strings.Contains(r.Error.Message, "gw-0") || !strings.Contains(r.Error.Message, "unreachable")) {
			t.Errorf("message %q, want it to name gw-0 as unreachable", r.Error.Message)
		}
		waitMetrics(t, fleet[1], map[string]float64{
			`caddy_mcp_gateway_instance_forwards_total{direction="sent",outcome="error"}`: 1,
			`caddy_mcp_gateway_instance_forwards_total{direction="sent",outcome="ok"}`:    -1, // never sent one that arrived
		})
	})
}

// TestFleetNoLoop: an instance whose peer list points the owner's id at
// itself forwards the retry once, to itself, which refuses it: the header
// names gw-0 as its target. The client gets an error naming the problem,
// nothing goes round, and the parked call is untouched.
func TestFleetNoLoop(t *testing.T) {
	t.Parallel()
	rs := newRecordingServer(t)
	upstream := "\t\tupstream " + rs.url + " {\n\t\t\tera legacy\n\t\t}\n\t\tstate_key " + testKey(fleetKeyByte)
	owner := startGateway(t, upstream+"\n\t\tinstance_id gw-0")
	port := freePort(t)
	confused := startGatewayOn(t, port, upstream+fmt.Sprintf("\n\t\tinstance_id gw-1\n\t\tpeer gw-0 http://127.0.0.1:%d", port))
	ir := parseInputRequired(t, askCall(t, owner.URL, 1, "tea", nil, map[string]string{"Authorization": "Bearer alice"}))
	hdr, body := retryRequest(t, 2, "tea", ir)
	before := rs.requests.Load()
	x := postRPC(t, confused.URL, hdr, body, 2)
	if r := checkRPCError(t, x, http.StatusForbidden, -32600, 2); r != nil && !strings.Contains(r.Error.Message, `signed for "gw-0", this is "gw-1"`) {
		t.Errorf("message %q, want it to name both instances", r.Error.Message)
	}
	// The log reaches the test through a pipe: give it a moment.
	refusals := func() int { return strings.Count(confused.Log(), `"msg":"refused a forwarded request"`) }
	for deadline := time.Now().Add(5 * time.Second); refusals() == 0 && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	if n := refusals(); n != 1 {
		t.Errorf("the confused instance refused %d forwarded requests, want exactly 1", n)
	}
	if after := rs.requests.Load(); after != before {
		t.Errorf("the upstream received %d requests", after-before)
	}
	if text := checkToolResult(t, postRPC(t, owner.URL, hdr, body, 2), 2); text != "answer: yes" {
		t.Fatalf("the retry at the owner afterwards: %q", text)
	}
}

// newWorkingServer is a legacy go-sdk server in the test process whose tool
// `ask_then_work` elicits once, then reports progress every 100ms for 10s
// unless cancelled; how it ended goes to the returned channel.
func newWorkingServer(t *testing.T) (string, <-chan string) {
	t.Helper()
	ended := make(chan string, 4)
	server := mcp.NewServer(&mcp.Implementation{Name: "working", Version: "1"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "ask_then_work", Description: "Asks once, then works for 10s."},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			if _, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "Start?", RequestedSchema: map[string]any{"type": "object"}}); err != nil {
				return nil, nil, err
			}
			for i := 1; i <= 100; i++ {
				_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: req.Params.GetProgressToken(), Progress: float64(i), Total: 100})
				select {
				case <-ctx.Done():
					ended <- "cancelled"
					return nil, nil, ctx.Err()
				case <-time.After(100 * time.Millisecond):
				}
			}
			ended <- "done"
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "worked"}}}, nil, nil
		})
	return support.ServeMCP(t, server, nil), ended
}

// TestFleetRelayStreams: the answer to a forwarded retry is relayed as it
// comes (progress events reach the client while the tool still works), and
// a client that leaves mid-stream cancels the call upstream, through both
// instances.
func TestFleetRelayStreams(t *testing.T) {
	t.Parallel()
	up, ended := newWorkingServer(t)
	fleet := startFleet(t, "\t\tupstream "+up+" {\n\t\t\tera legacy\n\t\t}", "peer")
	m := meta(modernVersion)
	m["io.modelcontextprotocol/clientCapabilities"] = map[string]any{"elicitation": map[string]any{}}
	m["progressToken"] = "p1"
	params := map[string]any{"name": "ask_then_work", "arguments": map[string]any{}, "_meta": m}
	hdr := modernHeaders(modernVersion, "tools/call", "ask_then_work")
	ir := parseInputRequired(t, postRPC(t, fleet[0].URL, hdr, rpcBody(t, 1, "tools/call", params), 1))

	params["inputResponses"] = map[string]any{"elicitation-1": map[string]any{"action": "accept", "content": map[string]any{}}}
	params["requestState"] = ir.RequestState
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp, err := tryPostContext(ctx, fleet[1].URL, hdr, rpcBody(t, 2, "tools/call", params))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("the forwarded retry: HTTP %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	events := readSSE(resp.Body)
	for range 2 {
		if ev := nextData(t, events); !strings.Contains(ev.data, "notifications/progress") {
			t.Fatalf("want progress while the tool works, got %s", ev.data)
		}
	}
	cancel()
	if got := wait(t, ended, 5*time.Second, "end of the tool call"); got != "cancelled" {
		t.Fatalf("tool call %s, want cancelled when the client left the instance relaying it", got)
	}
}

// balancer is a round-robin load balancer without affinity in front of a
// fleet (the standard library's reverse proxy, flushing as it goes). It
// records, per request, the instance it chose and what the request was.
type balancer struct {
	URL string

	mu   sync.Mutex
	next int
	hops []hop
}

func startBalancer(t *testing.T, fleet []*gateway) *balancer {
	t.Helper()
	b := &balancer{}
	targets := make([]*url.URL, len(fleet))
	for i, g := range fleet {
		targets[i], _ = url.Parse(g.URL)
	}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			what := pr.In.Method
			if pr.Out.Body == nil {
				// GET, DELETE
			} else if body, err := io.ReadAll(pr.Out.Body); err == nil {
				pr.Out.Body = io.NopCloser(bytes.NewReader(body))
				var msg struct {
					Method string `json:"method"`
					Params struct {
						RequestState string `json:"requestState"`
					} `json:"params"`
					Result json.RawMessage `json:"result"`
				}
				if json.Unmarshal(body, &msg) == nil {
					switch {
					case msg.Params.RequestState != "":
						what = msg.Method + " retry"
					case msg.Method != "":
						what = msg.Method
					case msg.Result != nil:
						what = "answer"
					}
				}
			}
			b.mu.Lock()
			i := b.next % len(targets)
			b.next++
			b.hops = append(b.hops, hop{instance: i, what: what})
			pr.Out.Header.Set("X-Test-Hop", strconv.Itoa(len(b.hops)-1))
			b.mu.Unlock()
			pr.SetURL(&url.URL{Scheme: targets[i].Scheme, Host: targets[i].Host})
		},
		FlushInterval: -1,
		ModifyResponse: func(resp *http.Response) error {
			b.setStatus(resp.Request, resp.Status)
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			b.setStatus(r, err.Error())
			w.WriteHeader(http.StatusBadGateway)
		},
	}
	b.URL = support.Serve(t, proxy)
	t.Cleanup(func() {
		if t.Failed() {
			b.mu.Lock()
			defer b.mu.Unlock()
			t.Logf("balancer hops (instance, request, answer): %+v", b.hops)
		}
	})
	return b
}

func (b *balancer) setStatus(r *http.Request, status string) {
	i, err := strconv.Atoi(r.Header.Get("X-Test-Hop"))
	b.mu.Lock()
	defer b.mu.Unlock()
	if err == nil && i < len(b.hops) {
		b.hops[i].status = status
	}
}

// instancesOf returns the instances the hops of kind what went to.
func (b *balancer) instancesOf(what string) []int {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []int
	for _, h := range b.hops {
		if h.what == what {
			out = append(out, h.instance)
		}
	}
	return out
}

// TestFleetBehindLoadBalancer: unmodified TypeScript SDK clients, the 2.x
// client in auto mode (modern) and the 1.x client (legacy), complete
// multi-round tools through a round-robin load balancer in front of three
// instances, the retries and answers landing wherever the balancer sends
// them.
func TestFleetBehindLoadBalancer(t *testing.T) {
	t.Parallel()
	nodeBin(t)
	t.Run("modern client, legacy server", func(t *testing.T) {
		lb := startBalancer(t, startFleet(t, "\t\tupstream "+startDemoServer(t), "advertise"))
		got := runClient(t, "modern-client.mjs", lb.URL, "plan_trip", "{}")
		if strOrNil(got.ProtocolVersion) != modernVersion || got.Elicitations != 2 {
			t.Fatalf("negotiated %s after %d elicitations, want %s after 2", strOrNil(got.ProtocolVersion), got.Elicitations, modernVersion)
		}
		if text := got.Result.text(); got.Result.IsError || !strings.Contains(text, "Trip to Lisbon") {
			t.Fatalf("result %q (isError %t)", text, got.Result.IsError)
		}
		call, retries := lb.instancesOf("tools/call"), lb.instancesOf("tools/call retry")
		if len(call) != 1 || len(retries) != 2 || retries[0] == call[0] || retries[1] == retries[0] {
			t.Fatalf("the call went to %v and its retries to %v: want each on another instance", call, retries)
		}
	})
	t.Run("legacy client, modern server", func(t *testing.T) {
		lb := startBalancer(t, startFleet(t, "\t\tupstream "+startModernFixture(t), "peer"))
		got := runClient(t, "legacy-client.mjs", lb.URL, "plan_party", `{"occasion":"birthday"}`, "terminate")
		want := `Party (birthday) hosted by Test User; toast: "sampled by legacy-client"; invitations sent: true`
		if text := got.Result.text(); got.Result.IsError || text != want || got.Elicitations != 2 || got.Samplings != 1 {
			t.Fatalf("result %q (isError %t) after %d elicitations and %d samplings", text, got.Result.IsError, got.Elicitations, got.Samplings)
		}
		call, answers := lb.instancesOf("tools/call"), lb.instancesOf("answer")
		forwarded := 0
		for _, a := range answers {
			if len(call) == 1 && a != call[0] {
				forwarded++
			}
		}
		if len(call) != 1 || len(answers) != 3 || forwarded == 0 {
			t.Fatalf("the call went to %v and its answers to %v: want some answers on other instances", call, answers)
		}
	})
}
