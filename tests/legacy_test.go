package tests

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const legacyInit = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25",` +
	`"capabilities":{"elicitation":{}},"clientInfo":{"name":"raw-test","version":"1"}}}`

// legacyHeaders are what a legacy client sends after initialize.
func legacyHeaders(sid string) map[string]string {
	return map[string]string{"Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"}
}

// openLegacySession initializes through the gateway with raw HTTP and
// returns the gateway session id.
func openLegacySession(t *testing.T, url string) string {
	t.Helper()
	resp := post(t, url, nil, legacyInit)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("initialize: status %d", resp.StatusCode)
	}
	sid := resp.Header.Get("Mcp-Session-Id")
	if sid == "" {
		t.Fatal("initialize: no Mcp-Session-Id")
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	if r := post(t, url, legacyHeaders(sid), `{"jsonrpc":"2.0","method":"notifications/initialized"}`); r.StatusCode != http.StatusAccepted {
		t.Fatalf("notifications/initialized: status %d", r.StatusCode)
	}
	return sid
}

// sseMessages reads SSE events from body and sends each data payload (and
// the event id) on the returned channel, closed at the end of the stream.
type sseMsg struct {
	id   string
	data string
}

func readSSE(body io.Reader) <-chan sseMsg {
	ch := make(chan sseMsg, 16)
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		var m sseMsg
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if m.data != "" || m.id != "" {
					ch <- m
				}
				m = sseMsg{}
			case strings.HasPrefix(line, "id:"):
				m.id = strings.TrimSpace(line[3:])
			case strings.HasPrefix(line, "data:"):
				m.data += strings.TrimPrefix(line[5:], " ")
			}
		}
	}()
	return ch
}

// nextData waits for the next event with data on ch.
func nextData(t *testing.T, ch <-chan sseMsg) sseMsg {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case m, ok := <-ch:
			if !ok {
				t.Fatal("stream ended")
			}
			if m.data != "" {
				return m
			}
		case <-timeout:
			t.Fatal("no event within 10s")
		}
	}
}

// TestLegacySDKClientElicitation: the TypeScript SDK 1.x client completes
// server-everything's in-line elicitation and sampling through the gateway.
func TestLegacySDKClientElicitation(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("needs node")
	}
	g := startGateway(t, "\t\tupstream "+startServerEverything(t))
	for _, c := range []struct{ tool, args, field, want string }{
		{"trigger-elicitation-request", "{}", "elicitations", "Test User"},
		{"trigger-sampling-request", `{"prompt":"Say hi"}`, "samplings", "sampled by legacy-client"},
	} {
		t.Run(c.tool, func(t *testing.T) {
			out, err := runNodeScript(t, "legacy-client.mjs", g.URL, c.tool, c.args, "terminate")
			if err != nil {
				t.Fatalf("legacy client: %v", err)
			}
			var got map[string]any
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatalf("output %q: %v", out, err)
			}
			if got["protocolVersion"] != "2025-11-25" || got[c.field] != float64(1) {
				t.Fatalf("protocolVersion %v, %s %v; want 2025-11-25 and 1", got["protocolVersion"], c.field, got[c.field])
			}
			if res, _ := json.Marshal(got["result"]); !strings.Contains(string(res), c.want) {
				t.Fatalf("result %s does not contain %q", res, c.want)
			}
		})
	}
}

// TestLegacyGoClientThroughGateway: the go-sdk client, in the legacy era,
// completes two elicitations in a row and a sampling request in-line.
func TestLegacyGoClientThroughGateway(t *testing.T) {
	t.Parallel()
	g := startGateway(t, "\t\tupstream "+startDemoServer(t)+" {\n\t\t\tera legacy\n\t\t}")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var asked []string
	cs := connectGo(t, g.URL, "2025-11-25", &mcp.ClientOptions{
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			asked = append(asked, req.Params.Message)
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{
				"destination": "Lisbon", "startDate": "2027-05-01", "endDate": "2027-05-09",
			}}, nil
		},
		CreateMessageHandler: func(_ context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			return &mcp.CreateMessageResult{Role: "assistant", Model: "test-model", Content: &mcp.TextContent{Text: "short"}}, nil
		},
	})
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "plan_trip", Arguments: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	if got := toolText(res); got != "Trip to Lisbon from 2027-05-01 to 2027-05-09." || len(asked) != 2 {
		t.Fatalf("plan_trip: %q after %d questions", got, len(asked))
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "summarize", Arguments: map[string]any{"text": "a long text"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := toolText(res); got != "Summary (test-model): short" {
		t.Fatalf("summarize: %q", got)
	}
}

func toolText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// TestLegacySessionErrors: missing, unknown, forged and ended sessions.
func TestLegacySessionErrors(t *testing.T) {
	t.Parallel()
	g := startGateway(t, "\t\tupstream "+startDemoServer(t))
	sid := openLegacySession(t, g.URL)
	list := `{"jsonrpc":"2.0","id":7,"method":"tools/list"}`

	expect := func(t *testing.T, resp *http.Response, status, code int) {
		t.Helper()
		if resp.StatusCode != status {
			t.Fatalf("status %d, want %d", resp.StatusCode, status)
		}
		if code == 0 {
			return
		}
		var msg struct {
			ID    json.RawMessage    `json:"id"`
			Error struct{ Code int } `json:"error"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&msg); err != nil {
			t.Fatal(err)
		}
		if msg.Error.Code != code || string(msg.ID) != "7" {
			t.Fatalf("error %d id %s, want %d and 7", msg.Error.Code, msg.ID, code)
		}
	}
	t.Run("missing", func(t *testing.T) {
		expect(t, post(t, g.URL, map[string]string{"MCP-Protocol-Version": "2025-11-25"}, list), 400, -32000)
	})
	t.Run("garbage", func(t *testing.T) {
		expect(t, post(t, g.URL, legacyHeaders("not-a-session"), list), 404, -32001)
	})
	t.Run("tampered", func(t *testing.T) {
		b := []byte(sid)
		b[len(b)/2] ^= 1
		if b[len(b)/2] == '-' || b[len(b)/2] == '_' {
			b[len(b)/2] = 'A'
		}
		expect(t, post(t, g.URL, legacyHeaders(string(b)), list), 404, -32001)
	})
	t.Run("other key", func(t *testing.T) {
		other := startGateway(t, "\t\tupstream "+startDemoServer(t)+"\n\t\tstate_key "+testKey(2))
		expect(t, post(t, g.URL, legacyHeaders(openLegacySession(t, other.URL)), list), 404, -32001)
	})
	t.Run("valid", func(t *testing.T) {
		expect(t, post(t, g.URL, legacyHeaders(sid), list), 200, 0)
	})
	t.Run("deleted", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodDelete, g.URL, nil)
		req.Header.Set("Mcp-Session-Id", sid)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			t.Fatalf("DELETE: status %d", resp.StatusCode)
		}
		if r := post(t, g.URL, legacyHeaders(sid), list); r.StatusCode != http.StatusNotFound {
			t.Fatalf("request on a deleted session: status %d, want 404", r.StatusCode)
		}
	})
}

// testKey returns a fixed base64 state key.
func testKey(b byte) string {
	k := make([]byte, 32)
	for i := range k {
		k[i] = b
	}
	return base64Std(k)
}

// TestLegacyResumeWithLastEventID: a client whose tools/call stream breaks
// answers the in-line question and resumes the stream through the gateway
// with Last-Event-ID; the result arrives on the resumed stream.
func TestLegacyResumeWithLastEventID(t *testing.T) {
	t.Parallel()
	g := startGateway(t, "\t\tupstream "+startDemoServer(t))
	sid := openLegacySession(t, g.URL)
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, g.URL, strings.NewReader(
		`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"book_table","arguments":{"restaurant":"Resume"}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range legacyHeaders(sid) {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("tools/call answered %q, want an event stream", ct)
	}
	ev := nextData(t, readSSE(resp.Body))
	var q struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	if err := json.Unmarshal([]byte(ev.data), &q); err != nil || q.Method != "elicitation/create" {
		t.Fatalf("first message %s, want elicitation/create", ev.data)
	}
	if ev.id == "" {
		t.Fatal("the in-line request carries no event id: cannot resume")
	}
	cancel() // the stream breaks
	resp.Body.Close()

	answer := fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"action":"accept","content":{"partySize":4,"date":"2027-01-02"}}}`, q.ID)
	if r := post(t, g.URL, legacyHeaders(sid), answer); r.StatusCode != http.StatusAccepted {
		t.Fatalf("answer: status %d", r.StatusCode)
	}
	// The server may not have seen the broken stream's connection end yet:
	// it answers 409 Conflict until then, and a client resumes again.
	var resumed *http.Response
	waitFor(t, "the upstream to let the stream be resumed", func() bool {
		get, _ := http.NewRequest(http.MethodGet, g.URL, nil)
		get.Header.Set("Accept", "text/event-stream")
		get.Header.Set("Last-Event-ID", ev.id)
		for k, v := range legacyHeaders(sid) {
			get.Header.Set(k, v)
		}
		var err error
		if resumed, err = http.DefaultClient.Do(get); err != nil {
			t.Fatal(err)
		}
		if resumed.StatusCode == http.StatusConflict {
			resumed.Body.Close()
			return false
		}
		return true
	})
	defer resumed.Body.Close()
	if resumed.StatusCode != http.StatusOK {
		t.Fatalf("resume: status %d", resumed.StatusCode)
	}
	msg := nextData(t, readSSE(resumed.Body))
	if !strings.Contains(msg.data, `"id":5`) || !strings.Contains(msg.data, "Booked Resume for 4 on 2027-01-02.") {
		t.Fatalf("resumed stream gave %s, want the tools/call result", msg.data)
	}
}
