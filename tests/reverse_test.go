package tests

// The reverse bridge: legacy (2025-11-25) clients in front of modern-only
// (2026-07-28) servers. The gateway holds the legacy session and turns the
// servers' input_required rounds into in-line requests. Upstreams: the
// go-sdk everything-server in stateless mode (configured `era modern`: it
// also answers initialize statelessly, so era auto would pin legacy clients
// to it) and tests/modernfixture, a server on @modelcontextprotocol/server
// 2.x that refuses legacy requests.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// startModernFixture runs tests/modernfixture/server.mjs (modern only).
func startModernFixture(t *testing.T) string {
	t.Helper()
	node := nodeBin(t)
	port := freePort(t)
	u := fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
	cmd := exec.Command(node, filepath.Join(testsDir(t), "modernfixture", "server.mjs"), fmt.Sprint(port))
	cmd.Dir = testsDir(t)
	startPeer(t, "modernfixture", cmd).waitUp(t, u)
	return u
}

// reverseGateway starts a gateway whose only upstream is the stateless
// go-sdk everything-server, configured modern; extra lines go in the block.
func reverseGateway(t *testing.T, extra string) *gateway {
	t.Helper()
	return startGateway(t, "\t\tupstream "+startGoEverything(t, true)+" {\n\t\t\tera modern\n\t\t}\n"+extra)
}

// initReverse initializes a legacy session with raw HTTP and returns its
// id and InitializeResult.
func initReverse(t *testing.T, url, version, caps string, hdr map[string]string) (string, map[string]any) {
	t.Helper()
	resp := post(t, url, hdr, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"`+version+
		`","capabilities":`+caps+`,"clientInfo":{"name":"raw-legacy","version":"1"}}}`)
	x := readRPC(t, resp, 1)
	if x.Status != http.StatusOK || x.Resp == nil || x.Resp.Error != nil {
		t.Fatalf("initialize: %s", x)
	}
	sid := x.Header.Get("Mcp-Session-Id")
	if sid == "" {
		t.Fatalf("initialize: no Mcp-Session-Id; %s", x)
	}
	var res map[string]any
	if err := json.Unmarshal(x.Resp.Result, &res); err != nil {
		t.Fatal(err)
	}
	h := legacyHeaders(sid)
	maps.Copy(h, hdr)
	if r := post(t, url, h, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); r.StatusCode != http.StatusAccepted {
		t.Fatalf("notifications/initialized: status %d", r.StatusCode)
	}
	return sid, res
}

// inlineIDPattern is the shape of the ids the gateway gives in-line requests.
var inlineIDPattern = regexp.MustCompile(`^gw:[0-9a-f]{16}:[0-9]+$`)

// inlineRequest is a server-to-client request read from a legacy stream.
type inlineRequest struct {
	ID     string          `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

// readInline reads the next in-line request from a legacy call stream.
func readInline(t *testing.T, events <-chan sseMsg) inlineRequest {
	t.Helper()
	ev := nextData(t, events)
	var q inlineRequest
	if err := json.Unmarshal([]byte(ev.data), &q); err != nil || q.Method == "" {
		t.Fatalf("want an in-line request, got %s", ev.data)
	}
	if !inlineIDPattern.MatchString(q.ID) {
		t.Fatalf("in-line request id %q does not name the instance (gw:<instance>:<n>)", q.ID)
	}
	return q
}

// startCall POSTs a legacy tools/call and returns its event stream.
func startCall(t *testing.T, url, sid string, id int, tool string) (*http.Response, <-chan sseMsg) {
	t.Helper()
	resp := post(t, url, legacyHeaders(sid), fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":{}}}`, id, tool))
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("tools/call %s: HTTP %d %s: %s", tool, resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	return resp, readSSE(resp.Body)
}

// answerInline POSTs the client's answer to an in-line request.
func answerInline(t *testing.T, url, sid, id, result string) *http.Response {
	t.Helper()
	return post(t, url, legacyHeaders(sid), fmt.Sprintf(`{"jsonrpc":"2.0","id":%q,"result":%s}`, id, result))
}

// rpcErrorOf decodes a JSON-RPC error response body.
func rpcErrorOf(t *testing.T, resp *http.Response) (code int, message string) {
	t.Helper()
	var msg struct {
		Error struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&msg); err != nil {
		t.Fatalf("HTTP %d: not a JSON-RPC error: %v", resp.StatusCode, err)
	}
	return msg.Error.Code, msg.Error.Message
}

// TestReverseSessions: initialize is answered by the gateway from the
// modern upstream's server/discover; the session id is sealed, bound to the
// principal, refused once deleted; ping and logging/setLevel are local; the
// GET stream carries notifications from an upstream subscriptions/listen.
func TestReverseSessions(t *testing.T) {
	t.Parallel()
	g := reverseGateway(t, "")
	alice := map[string]string{"Authorization": "Bearer alice"}
	sid, res := initReverse(t, g.URL, "2025-06-18", `{"elicitation":{}}`, alice)
	if res["protocolVersion"] != "2025-06-18" {
		t.Errorf("negotiated %v, want the client's 2025-06-18", res["protocolVersion"])
	}
	if info, _ := res["serverInfo"].(map[string]any); info["name"] != "mcp-conformance-test-server" {
		t.Errorf("serverInfo %v, want the upstream's (from server/discover _meta)", res["serverInfo"])
	}
	caps, _ := res["capabilities"].(map[string]any)
	if _, ok := caps["tools"]; !ok {
		t.Errorf("capabilities %v lack the upstream's tools", caps)
	}
	if r, _ := caps["resources"].(map[string]any); r["subscribe"] != true || r["listChanged"] != true {
		t.Errorf("resources capability %v lacks the upstream's subscribe and listChanged", r)
	}
	if _, res := initReverse(t, g.URL, "2024-01-01", `{}`, nil); res["protocolVersion"] != "2025-11-25" {
		t.Errorf("an unknown version negotiated %v, want 2025-11-25", res["protocolVersion"])
	}
	if len(sid) > 1024 {
		t.Errorf("session id of %d bytes", len(sid))
	}

	h := legacyHeaders(sid)
	maps.Copy(h, alice)
	t.Run("ping", func(t *testing.T) {
		x := postRPC(t, g.URL, h, `{"jsonrpc":"2.0","id":2,"method":"ping"}`, 2)
		if x.Status != http.StatusOK || x.Resp == nil || string(x.Resp.Result) != "{}" {
			t.Fatalf("ping: %s", x)
		}
	})
	t.Run("logging/setLevel", func(t *testing.T) {
		if x := postRPC(t, g.URL, h, `{"jsonrpc":"2.0","id":3,"method":"logging/setLevel","params":{"level":"info"}}`, 3); x.Resp == nil || string(x.Resp.Result) != "{}" {
			t.Fatalf("setLevel info: %s", x)
		}
		checkRPCError(t, postRPC(t, g.URL, h, `{"jsonrpc":"2.0","id":4,"method":"logging/setLevel","params":{"level":"loud"}}`, 4), http.StatusOK, -32602, 4)
	})
	t.Run("tools/call", func(t *testing.T) {
		x := postRPC(t, g.URL, h, `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"test_simple_text","arguments":{}}}`, 5)
		if text := checkToolResult(t, x, 5); text != "This is a simple text response for testing." {
			t.Fatalf("result %q", text)
		}
		if strings.Contains(string(x.Resp.Result), "resultType") {
			t.Errorf("a legacy client got a resultType: %s", x.Resp.Result)
		}
	})
	t.Run("x-mcp-header arguments", func(t *testing.T) {
		// The modern server rejects a call whose annotated argument is not
		// mirrored in an Mcp-Param-* header; the gateway adds it.
		for id, region := range map[int]string{11: "eu-west", 12: "日本 "} {
			body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"test_x_mcp_header","arguments":{"region":%q,"level":2}}}`, id, region)
			if text := checkToolResult(t, postRPC(t, g.URL, h, body, id), id); text != "region="+region {
				t.Fatalf("result %q, want region=%s", text, region)
			}
		}
	})
	t.Run("resource not found is -32002", func(t *testing.T) {
		x := postRPC(t, g.URL, h, `{"jsonrpc":"2.0","id":6,"method":"resources/read","params":{"uri":"test://no-such-resource"}}`, 6)
		checkRPCError(t, x, http.StatusOK, -32002, 6)
	})
	t.Run("GET stream", func(t *testing.T) {
		get := func() *http.Response { return send(t, http.MethodGet, g.URL, h, "") }
		stream := get()
		if stream.StatusCode != http.StatusOK || !strings.HasPrefix(stream.Header.Get("Content-Type"), "text/event-stream") {
			t.Fatalf("GET: HTTP %d %s", stream.StatusCode, stream.Header.Get("Content-Type"))
		}
		if second := get(); second.StatusCode != http.StatusConflict {
			t.Fatalf("a second GET stream: status %d, want 409", second.StatusCode)
		}
		events := readSSE(stream.Body)
		if x := postRPC(t, g.URL, h, `{"jsonrpc":"2.0","id":8,"method":"resources/subscribe","params":{"uri":"test://watched-resource"}}`, 8); x.Resp == nil || string(x.Resp.Result) != "{}" {
			t.Fatalf("resources/subscribe: %s", x)
		}
		// The server changes its tool list; the watched resource changes
		// every few seconds by itself.
		checkToolResult(t, postRPC(t, g.URL, h, `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"test_trigger_tool_change","arguments":{}}}`, 9), 9)
		want := map[string]bool{"notifications/tools/list_changed": false, "notifications/resources/updated": false}
		deadline := time.After(15 * time.Second)
		for !want["notifications/tools/list_changed"] || !want["notifications/resources/updated"] {
			select {
			case m, ok := <-events:
				if !ok {
					t.Fatalf("the GET stream ended; got %v", want)
				}
				if m.data == "" {
					continue
				}
				var n struct {
					Method string         `json:"method"`
					Params map[string]any `json:"params"`
				}
				if err := json.Unmarshal([]byte(m.data), &n); err != nil {
					t.Fatalf("GET stream event %s: %v", m.data, err)
				}
				if strings.Contains(m.data, "subscriptionId") {
					t.Errorf("a legacy client got a subscriptionId: %s", m.data)
				}
				if n.Method == "notifications/resources/updated" && n.Params["uri"] != "test://watched-resource" {
					t.Errorf("update of %v", n.Params["uri"])
				}
				if _, ok := want[n.Method]; !ok {
					t.Fatalf("unexpected message on the GET stream: %s", m.data)
				}
				want[n.Method] = true
			case <-deadline:
				t.Fatalf("after 15s the GET stream delivered %v", want)
			}
		}
	})

	list := `{"jsonrpc":"2.0","id":7,"method":"tools/list"}`
	refused := func(t *testing.T, hdr map[string]string) {
		t.Helper()
		resp := post(t, g.URL, hdr, list)
		if resp.StatusCode != http.StatusNotFound {
			t.Fatalf("status %d, want 404", resp.StatusCode)
		}
		if code, _ := rpcErrorOf(t, resp); code != -32001 {
			t.Fatalf("code %d, want -32001", code)
		}
	}
	t.Run("forged", func(t *testing.T) {
		refused(t, map[string]string{"Mcp-Session-Id": "AQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "Authorization": "Bearer alice"})
	})
	t.Run("tampered", func(t *testing.T) {
		b := []byte(sid)
		i := len(b) / 2
		if b[i] == 'A' {
			b[i] = 'B'
		} else {
			b[i] = 'A'
		}
		refused(t, map[string]string{"Mcp-Session-Id": string(b), "Authorization": "Bearer alice"})
	})
	t.Run("other principal", func(t *testing.T) {
		refused(t, map[string]string{"Mcp-Session-Id": sid, "Authorization": "Bearer mallory"})
		refused(t, map[string]string{"Mcp-Session-Id": sid})
	})
	t.Run("other key", func(t *testing.T) {
		other := startGateway(t, "\t\tupstream "+startGoEverything(t, true)+" {\n\t\t\tera modern\n\t\t}\n\t\tstate_key "+testKey(3))
		foreign, _ := initReverse(t, other.URL, "2025-11-25", `{}`, alice)
		refused(t, map[string]string{"Mcp-Session-Id": foreign, "Authorization": "Bearer alice"})
	})
	t.Run("deleted", func(t *testing.T) {
		if x := postRPC(t, g.URL, h, list, 7); x.Status != http.StatusOK {
			t.Fatalf("before DELETE: %s", x)
		}
		req, _ := http.NewRequest(http.MethodDelete, g.URL, nil)
		for k, v := range h {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("DELETE: status %d", resp.StatusCode)
		}
		refused(t, h)
	})
}

// TestReverseInputRounds drives input rounds with raw HTTP: in-line
// requests with instance-naming ids, answers routed to the waiting round
// (202), unknown and foreign ids refused, cancellation and a closed stream
// abandoning the round, a missing capability, and the round limit.
func TestReverseInputRounds(t *testing.T) {
	t.Parallel()
	g := reverseGateway(t, "")
	sid, _ := initReverse(t, g.URL, "2025-11-25", `{"elicitation":{},"sampling":{}}`, nil)

	t.Run("two rounds", func(t *testing.T) {
		resp, events := startCall(t, g.URL, sid, 10, "test_input_required_result_multi_round")
		defer resp.Body.Close()
		q1 := readInline(t, events)
		if q1.Method != "elicitation/create" || !strings.Contains(string(q1.Params), "Step 1") {
			t.Fatalf("round 1 asked %s %s", q1.Method, q1.Params)
		}
		waitMetrics(t, g, map[string]float64{"caddy_mcp_gateway_inline_requests_waiting": 1})
		if r := answerInline(t, g.URL, sid, q1.ID, `{"action":"accept","content":{"name":"Ada"}}`); r.StatusCode != http.StatusAccepted {
			t.Fatalf("answer 1: status %d", r.StatusCode)
		}
		q2 := readInline(t, events)
		if q2.ID == q1.ID || !strings.Contains(string(q2.Params), "Step 2") {
			t.Fatalf("round 2 asked %s %s", q2.ID, q2.Params)
		}
		if r := answerInline(t, g.URL, sid, q2.ID, `{"action":"accept","content":{"color":"teal"}}`); r.StatusCode != http.StatusAccepted {
			t.Fatalf("answer 2: status %d", r.StatusCode)
		}
		final := nextData(t, events)
		if !strings.Contains(final.data, `"id":10`) || !strings.Contains(final.data, "Multi-round complete: Ada likes teal") {
			t.Fatalf("final message %s", final.data)
		}
		waitMetrics(t, g, map[string]float64{
			"caddy_mcp_gateway_inline_requests_waiting":                                                     0,
			`caddy_mcp_gateway_requests_total{cell="legacy-modern",method="response",outcome="ok"}`:         2,
			`caddy_mcp_gateway_requests_total{cell="legacy-modern",method="tools/call",outcome="complete"}`: 1,
		})
		// The answer was consumed: sending it again is refused.
		r := answerInline(t, g.URL, sid, q2.ID, `{"action":"accept","content":{"color":"teal"}}`)
		if code, msg := rpcErrorOf(t, r); r.StatusCode != http.StatusBadRequest || code != -32600 || !strings.Contains(msg, "no pending request") {
			t.Fatalf("a second answer: HTTP %d, %d %q", r.StatusCode, code, msg)
		}
	})
	t.Run("unknown and foreign ids", func(t *testing.T) {
		r := answerInline(t, g.URL, sid, "gw:0123456789abcdef:1", `{"action":"cancel"}`)
		code, msg := rpcErrorOf(t, r)
		if r.StatusCode != http.StatusMisdirectedRequest || code != -32600 || !strings.Contains(msg, "gateway instance 0123456789abcdef") {
			t.Fatalf("an id of another instance: HTTP %d, %d %q", r.StatusCode, code, msg)
		}
		r = post(t, g.URL, legacyHeaders(sid), `{"jsonrpc":"2.0","id":99,"result":{}}`)
		if code, msg := rpcErrorOf(t, r); r.StatusCode != http.StatusBadRequest || !strings.Contains(msg, "no pending request") {
			t.Fatalf("a numeric id: HTTP %d, %d %q", r.StatusCode, code, msg)
		}
	})
	t.Run("an answer from another session", func(t *testing.T) {
		other, _ := initReverse(t, g.URL, "2025-11-25", `{"elicitation":{}}`, nil)
		resp, events := startCall(t, g.URL, sid, 11, "test_input_required_result_elicitation")
		defer resp.Body.Close()
		q := readInline(t, events)
		r := answerInline(t, g.URL, other, q.ID, `{"action":"accept","content":{"name":"Eve"}}`)
		if r.StatusCode != http.StatusBadRequest {
			t.Fatalf("another session's answer: status %d, want 400", r.StatusCode)
		}
		answerInline(t, g.URL, sid, q.ID, `{"action":"accept","content":{"name":"Ada"}}`)
		if final := nextData(t, events); !strings.Contains(final.data, "Hello, Ada!") {
			t.Fatalf("final message %s", final.data)
		}
	})
	t.Run("notifications/cancelled abandons the round", func(t *testing.T) {
		resp, events := startCall(t, g.URL, sid, 12, "test_input_required_result_elicitation")
		defer resp.Body.Close()
		q := readInline(t, events)
		if r := post(t, g.URL, legacyHeaders(sid), `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":12,"reason":"user"}}`); r.StatusCode != http.StatusAccepted {
			t.Fatalf("cancelled: status %d", r.StatusCode)
		}
		ended := time.After(5 * time.Second)
	drain:
		for {
			select {
			case m, ok := <-events:
				if !ok {
					break drain
				}
				if m.data != "" {
					t.Fatalf("after cancellation the stream carried %s", m.data)
				}
			case <-ended:
				t.Fatal("the stream is still open 5s after notifications/cancelled")
			}
		}
		if r := answerInline(t, g.URL, sid, q.ID, `{"action":"accept","content":{"name":"Ada"}}`); r.StatusCode != http.StatusBadRequest {
			t.Fatalf("answer after cancellation: status %d, want 400", r.StatusCode)
		}
	})
	t.Run("a closed stream abandons the round", func(t *testing.T) {
		resp, events := startCall(t, g.URL, sid, 13, "test_input_required_result_elicitation")
		q := readInline(t, events)
		resp.Body.Close()
		deadline := time.Now().Add(5 * time.Second)
		for {
			r := answerInline(t, g.URL, sid, q.ID, `{"action":"accept","content":{"name":"Ada"}}`)
			if r.StatusCode == http.StatusBadRequest {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("an answer after the stream closed is still taken (status %d)", r.StatusCode)
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
	t.Run("missing capability", func(t *testing.T) {
		bare, _ := initReverse(t, g.URL, "2025-11-25", `{"sampling":{}}`, nil)
		x := postRPC(t, g.URL, legacyHeaders(bare), `{"jsonrpc":"2.0","id":14,"method":"tools/call","params":{"name":"test_input_required_result_elicitation","arguments":{}}}`, 14)
		var r toolResult
		if x.Resp == nil || json.Unmarshal(x.Resp.Result, &r) != nil || !r.IsError || !strings.Contains(r.text(), "did not declare the capability") {
			t.Fatalf("want an isError tool result naming the capability, got %s", x)
		}
	})
	t.Run("round limit", func(t *testing.T) {
		limited := reverseGateway(t, "\t\tmax_rounds 1")
		lsid, _ := initReverse(t, limited.URL, "2025-11-25", `{"elicitation":{}}`, nil)
		resp, events := startCall(t, limited.URL, lsid, 15, "test_input_required_result_multi_round")
		defer resp.Body.Close()
		q := readInline(t, events)
		answerInline(t, limited.URL, lsid, q.ID, `{"action":"accept","content":{"name":"Ada"}}`)
		final := nextData(t, events)
		var msg struct {
			Result toolResult `json:"result"`
		}
		if err := json.Unmarshal([]byte(final.data), &msg); err != nil || !msg.Result.IsError || !strings.Contains(msg.Result.text(), "more than 1 times") {
			t.Fatalf("want an isError result after one round, got %s", final.data)
		}
	})
}

// goLegacyHandlers answer elicitations by the fields they ask for and
// sampling with a fixed text, counting both.
func goLegacyHandlers(elicitations, samplings *atomic.Int32) *mcp.ClientOptions {
	return &mcp.ClientOptions{
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			elicitations.Add(1)
			content := map[string]any{}
			schema, _ := json.Marshal(req.Params.RequestedSchema)
			for field, value := range map[string]any{"name": "Ada", "color": "teal", "send": true, "ok": true} {
				if strings.Contains(string(schema), `"`+field+`"`) {
					content[field] = value
				}
			}
			return &mcp.ElicitResult{Action: "accept", Content: content}, nil
		},
		CreateMessageHandler: func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			samplings.Add(1)
			return &mcp.CreateMessageResult{Role: "assistant", Model: "go-model", Content: &mcp.TextContent{Text: "Cheers!"}}, nil
		},
	}
}

// partyOutcome is how the modern fixture's plan_party went for a go-sdk
// client with goLegacyHandlers.
type partyOutcome struct {
	res                     *mcp.CallToolResult
	elicitations, samplings int32
}

// planParty calls plan_party {occasion: launch} (elicitation, sampling,
// elicitation) on the session connect opens with goLegacyHandlers' options,
// failing on a protocol error.
func planParty(t *testing.T, connect func(*mcp.ClientOptions) *mcp.ClientSession) partyOutcome {
	t.Helper()
	var elicitations, samplings atomic.Int32
	cs := connect(goLegacyHandlers(&elicitations, &samplings))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "plan_party", Arguments: map[string]any{"occasion": "launch"}})
	if err != nil {
		t.Fatalf("plan_party: %v", err)
	}
	return partyOutcome{res: res, elicitations: elicitations.Load(), samplings: samplings.Load()}
}

// asked is how many questions the party asked.
func (p partyOutcome) asked() int32 { return p.elicitations + p.samplings }

// complete fails the test unless the party was planned in its three rounds
// with goLegacyHandlers' answers.
func (p partyOutcome) complete(t *testing.T) {
	t.Helper()
	want := `Party (launch) hosted by Ada; toast: "Cheers!"; invitations sent: true`
	if got := toolText(p.res); p.res.IsError || got != want || p.elicitations != 2 || p.samplings != 1 {
		t.Fatalf("%q (isError %t) after %d elicitations and %d samplings; want %q after 2 and 1",
			got, p.res.IsError, p.elicitations, p.samplings, want)
	}
}

// TestReverseGoClient: the go-sdk client in the legacy era completes the
// stateless go-sdk server's multi-round tool and a round asking for
// elicitation, sampling and roots at once, in-line.
func TestReverseGoClient(t *testing.T) {
	t.Parallel()
	g := reverseGateway(t, "")
	var elicitations, samplings atomic.Int32
	client := mcp.NewClient(&mcp.Implementation{Name: "go-legacy-client", Version: "1"}, goLegacyHandlers(&elicitations, &samplings))
	client.AddRoots(&mcp.Root{URI: "file:///tmp", Name: "tmp"})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: g.URL}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if v := cs.InitializeResult().ProtocolVersion; v != "2025-11-25" || cs.ID() == "" {
		t.Fatalf("negotiated %q with session %q, want 2025-11-25 and a session", v, cs.ID())
	}
	for _, c := range []struct{ tool, want string }{
		{"test_input_required_result_multi_round", "Multi-round complete: Ada likes teal"},
		{"test_input_required_result_multiple_inputs", "Cheers! Ada — 1 root(s) visible"},
		{"test_input_required_result_request_state", "state-ok: requestState received and confirmation accepted"},
	} {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: c.tool, Arguments: map[string]any{}})
		if err != nil {
			t.Fatalf("%s: %v", c.tool, err)
		}
		if got := toolText(res); res.IsError || got != c.want {
			t.Fatalf("%s: %q (isError %t), want %q", c.tool, got, res.IsError, c.want)
		}
	}
	if elicitations.Load() != 4 || samplings.Load() != 1 {
		t.Fatalf("%d elicitations and %d samplings, want 4 and 1", elicitations.Load(), samplings.Load())
	}
}

// TestReverseThreeRounds: unmodified legacy clients, the TypeScript SDK 1.x
// and the go-sdk, complete plan_party (elicitation, sampling, elicitation)
// against the modern fixture, which refuses legacy requests itself.
func TestReverseThreeRounds(t *testing.T) {
	t.Parallel()
	fixture := startModernFixture(t)
	// A direct legacy initialize is refused: only the gateway makes this work.
	if r := post(t, fixture, nil, legacyInit); r.StatusCode == http.StatusOK && r.Header.Get("Mcp-Session-Id") != "" {
		t.Fatal("the fixture accepted a legacy initialize")
	}
	g := startGateway(t, "\t\tupstream "+fixture) // era auto: probed as modern only

	t.Run("TypeScript SDK 1.x", func(t *testing.T) {
		got := runClient(t, "legacy-client.mjs", g.URL, "plan_party", `{"occasion":"birthday"}`, "terminate")
		if strOrNil(got.ProtocolVersion) != "2025-11-25" || strOrNil(got.SessionID) == "<null>" {
			t.Fatalf("negotiated %s with session %s", strOrNil(got.ProtocolVersion), strOrNil(got.SessionID))
		}
		if got.Elicitations != 2 || got.Samplings != 1 {
			t.Fatalf("%d elicitations and %d samplings, want 2 and 1", got.Elicitations, got.Samplings)
		}
		want := `Party (birthday) hosted by Test User; toast: "sampled by legacy-client"; invitations sent: true`
		if text := got.Result.text(); got.Result.IsError || text != want {
			t.Fatalf("result %q (isError %t), want %q", text, got.Result.IsError, want)
		}
	})
	t.Run("go-sdk", func(t *testing.T) {
		planParty(t, func(o *mcp.ClientOptions) *mcp.ClientSession { return connectGo(t, g.URL, "2025-11-25", o) }).complete(t)
	})

	// Each call is one bridged call of three rounds in the metrics and the log.
	waitMetrics(t, g, map[string]float64{
		`caddy_mcp_gateway_bridged_calls_total{cell="legacy-modern",method="tools/call",outcome="complete"}`: 2,
		`caddy_mcp_gateway_call_rounds_sum{cell="legacy-modern"}`:                                            6,
	})
	// The gateway writes a call's log line after it counted the call in
	// the metrics (caddymodule/observe.go), and the TypeScript client's
	// tools/list is a bridged call too: wait for the two tools/call lines
	// themselves, not for any two "bridged call" lines (under load, the
	// tools/list line and the first call's were there while the second
	// call's was still on its way).
	var calls []map[string]any
	poll(10*time.Second, func() bool {
		calls = slices.DeleteFunc(logLines(g, "bridged call"), func(l map[string]any) bool { return l["method"] != "tools/call" })
		return len(calls) >= 2
	})
	n := 0
	for _, l := range calls {
		if l["cell"] == "legacy-modern" && l["rounds"] == float64(3) && l["outcome"] == "complete" {
			n++
		}
	}
	if n != 2 || len(calls) != 2 {
		t.Fatalf("%d log lines of three-round tools/call calls among %d tools/call lines, want 2 of 2: %v", n, len(calls), calls)
	}
}

// inputScenarios are the 2025-11-25 scenarios whose tools ask the client
// for input: through the reverse bridge they need an upstream that asks the
// modern way (input_required).
var inputScenarios = []string{"tools-call-elicitation", "tools-call-sampling", "elicitation-sep1034-defaults", "elicitation-sep1330-enums"}

// TestReverseConformance runs the 2025-11-25 requirement set through the
// gateway in front of modern-only upstreams: all 30 scored scenarios must
// run, and exactly the listed ones fail.
//
// In front of tests/modernfixture, which offers only tools (the three-round
// one and the four input tools), the input scenarios and everything that
// needs no server feature pass. The rest fail only because the fixture has
// no such tool, resource or prompt (fixtureLacks).
//
// In front of the stateless go-sdk everything-server every scenario
// passes except the four input scenarios: that server's test_elicitation,
// test_sampling and the SEP-1034/1330 tools ask in-line (Session.Elicit /
// CreateMessage), which the go-sdk itself refuses while serving a
// 2026-07-28 request ("return an InputRequests map instead"), so they end
// with a tool error and never ask; directly, a legacy client cannot reach
// that server's stateless mode at all.
func TestReverseConformance(t *testing.T) {
	t.Parallel()
	nodeBin(t)
	requireLocalhostIPv4(t)
	run := func(t *testing.T, g *gateway, failing []string) {
		t.Helper()
		rep := conformance(t, localhostURL(t, g.URL), "2025-11-25", conformanceWant{Failing: failing, MinScored: scored20251125})
		t.Logf("%d scenarios in %v; failed: %v", len(rep.Scenarios), rep.Duration.Round(time.Millisecond), rep.Failed())
	}
	t.Run("modern fixture", func(t *testing.T) {
		g := startGateway(t, "\t\tupstream "+startModernFixture(t))
		run(t, g, fixtureLacks)
	})
	t.Run("go-sdk everything-server, stateless", func(t *testing.T) {
		run(t, reverseGateway(t, ""), inputScenarios)
	})
}

// fixtureLacks are the 2025-11-25 scenarios that need a tool, resource or
// prompt tests/modernfixture does not offer (json-schema-2020-12 is not
// scored).
var fixtureLacks = []string{
	"completion-complete", "json-schema-2020-12",
	"prompts-get-embedded-resource", "prompts-get-simple", "prompts-get-with-args", "prompts-get-with-image", "prompts-list",
	"resources-list", "resources-read-binary", "resources-read-text", "resources-templates-read",
	"tools-call-audio", "tools-call-embedded-resource", "tools-call-error", "tools-call-image", "tools-call-mixed-content",
	"tools-call-simple-text", "tools-call-with-logging", "tools-call-with-progress",
}

// TestReverseStop: a round waiting for the client's answer does not hold up
// `caddy stop`; the client's stream ends with an error for its request.
func TestReverseStop(t *testing.T) {
	t.Parallel()
	g := reverseGateway(t, "")
	sid, _ := initReverse(t, g.URL, "2025-11-25", `{"elicitation":{}}`, nil)
	resp, events := startCall(t, g.URL, sid, 20, "test_input_required_result_elicitation")
	defer resp.Body.Close()
	readInline(t, events)
	took := g.stop(t)
	if took > 5*time.Second {
		t.Fatalf("caddy stop took %v with a round open", took)
	}
	t.Logf("caddy stop took %v with a round open", took)
	final := nextData(t, events)
	var msg struct {
		ID    int `json:"id"`
		Error struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(final.data), &msg); err != nil || msg.ID != 20 || msg.Error.Code != -32603 || !strings.Contains(msg.Error.Message, "abandoned") {
		t.Fatalf("the stream ended with %s, want an error for request 20", final.data)
	}
}
