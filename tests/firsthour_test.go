package tests

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// The mistakes of a newcomer's first hour, each named where it
// is made. The parse-time ones are in build_test.go (TestAdaptAndValidate).

// TestWrongUpstreamPath: an upstream URL without the MCP endpoint's path
// (http://host:port instead of http://host:port/mcp) answers both era
// probes 404. The client gets 503 as before; the log now says the status
// and to check the path.
func TestWrongUpstreamPath(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/mcp" {
			http.NotFound(w, r)
			return
		}
		http.Error(w, "not used", http.StatusTeapot)
	}))
	defer up.Close()
	g := startGateway(t, "upstream "+up.URL)

	resp := send(t, http.MethodPost, g.URL, nil, legacyInit)
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("initialize through a wrong upstream path: %d, want 503", resp.StatusCode)
	}
	lines := waitLogLines(t, g, "probing upstream era failed", 1)
	got, _ := lines[0]["error"].(string)
	want := "the upstream answered neither server/discover nor initialize (HTTP 404 to both): check the MCP endpoint's path in the upstream URL (such as /mcp)"
	if got != want {
		t.Fatalf("logged error %q, want %q", got, want)
	}
	if u, _ := lines[0]["upstream"].(string); !strings.HasPrefix(u, up.URL) {
		t.Fatalf("logged upstream %q, want %s", u, up.URL)
	}
}

// TestWrongUpstreamPathExplicitEra: with the era declared there is no
// probe; the forward bridge's initialize meets the 404 itself, and the log
// line of the failure names the status and the path to check.
func TestWrongUpstreamPathExplicitEra(t *testing.T) {
	up := httptest.NewServer(http.NotFoundHandler())
	defer up.Close()
	t.Run("modern", func(t *testing.T) {
		g := startGateway(t, "upstream "+up.URL+" {\n\t\t\tera modern\n\t\t}")
		resp := send(t, http.MethodPost, g.URL, nil, legacyInit)
		resp.Body.Close()
		if resp.StatusCode < 500 {
			t.Fatalf("initialize through a wrong upstream path: HTTP %d, want 5xx", resp.StatusCode)
		}
		lines := waitLogLines(t, g, "upstream failed", 1)
		const want = "the upstream answered HTTP 404 without a JSON-RPC message: no MCP endpoint at this URL: check the MCP endpoint's path in the upstream URL (such as /mcp)"
		if got, _ := lines[0]["error"].(string); !strings.Contains(got, want) {
			t.Fatalf("logged error %q, want it to contain %q", got, want)
		}
	})
	g := startGateway(t, "upstream "+up.URL+" {\n\t\t\tera legacy\n\t\t}")

	resp := modernCall(t, g.URL, 1, "echo", map[string]any{}, nil)
	resp.Body.Close()
	if resp.StatusCode < 500 {
		t.Fatalf("a call through a wrong upstream path: HTTP %d, want 5xx", resp.StatusCode)
	}
	lines := waitLogLines(t, g, "upstream failed", 1)
	const want = "initializing upstream session: upstream answered 404 Not Found: no MCP endpoint at this URL: check the MCP endpoint's path in the upstream URL (such as /mcp)"
	if got, _ := lines[0]["error"].(string); got != want {
		t.Fatalf("logged error %q, want %q", got, want)
	}
}

// TestForeignStateKeyLogged: two instances that do not share state_key.
// A session id and a requestState made by one are refused by the other as
// any invalid one is (404 Session not found; 400 with the one requestState
// refusal), and the other now logs at warn, once per kind however many
// arrive within 10 s, naming state_key and the fleet. A session id that is
// not one of the gateway's at all is refused without that line.
func TestForeignStateKeyLogged(t *testing.T) {
	for _, resume := range []string{"on", "off"} {
		t.Run("resume "+resume, func(t *testing.T) {
			up := newFailingLegacy(t)
			block := "\t\tupstream " + up.url + " {\n\t\t\tera legacy\n\t\t\tresume " + resume + "\n\t\t}"
			a := startGateway(t, block+"\n\t\tstate_key "+testKey(1))
			b := startGateway(t, block+"\n\t\tstate_key "+testKey(2))
			const warned = "sealed under a key this instance lacks was refused: every instance of a fleet must share state_key"
			list := `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`

			if r := post(t, b.URL, legacyHeaders("not-a-gateway-session-id"), list); r.StatusCode != http.StatusNotFound {
				t.Fatalf("a made-up session id: HTTP %d, want 404", r.StatusCode)
			}
			sid := openLegacySession(t, a.URL)
			for range 3 {
				r := post(t, b.URL, legacyHeaders(sid), list)
				if _, msg := rpcErrorOf(t, r); r.StatusCode != http.StatusNotFound || msg != "Session not found" {
					t.Fatalf("another instance's session id: HTTP %d %q, want 404 Session not found", r.StatusCode, msg)
				}
			}

			ir := parseInputRequired(t, readRPC(t, modernCall(t, a.URL, 1, "ask", map[string]any{}, nil), 1))
			retry := map[string]any{"inputResponses": map[string]any{"elicitation-1": acceptAnswer}, "requestState": ir.RequestState}
			for i := range 2 {
				r := modernCall(t, b.URL, 3+i, "ask", map[string]any{}, retry)
				if _, msg := rpcErrorOf(t, r); r.StatusCode != http.StatusBadRequest || msg != stateRefused {
					t.Fatalf("another instance's requestState: HTTP %d %q, want 400 %q", r.StatusCode, msg, stateRefused)
				}
			}

			lines := waitLogLines(t, b, "a requestState "+warned+" (and one with no state_key opens nothing sealed before it restarted)", 1)
			if k, _ := lines[0]["kind"].(string); k != "request_state" {
				t.Errorf("kind %q, want request_state", k)
			}
			sessionLines := logLines(b, "a session id "+warned+" (and one with no state_key opens nothing sealed before it restarted)")
			if len(sessionLines) != 1 {
				t.Fatalf("%d session id lines for three foreign ids and one made up within 10s, want 1", len(sessionLines))
			}
			if k, _ := sessionLines[0]["kind"].(string); k != "session_id" {
				t.Errorf("kind %q, want session_id", k)
			}
			if n := len(logLines(b, lines[0]["msg"].(string))); n != 1 {
				t.Errorf("%d requestState lines for two refusals within 10s, want 1", n)
			}
			if log := b.Log(); strings.Contains(log, sid) || strings.Contains(log, ir.RequestState) {
				t.Error("the log carries a token")
			}
			if strings.Contains(a.Log(), warned) {
				t.Error("the instance that sealed the tokens warned")
			}
		})
	}
}

// TestForeignTaskIDLogged: a taskId made by an instance that does not
// share state_key with this one is refused as any unknown taskId is (400,
// -32602, the same message), nothing reaches the upstream, and this
// instance logs at warn, once however many arrive within 10 s, naming
// state_key and the fleet.
func TestForeignTaskIDLogged(t *testing.T) {
	up := newRecordedTaskServer(t)
	a := startGateway(t, up.block("\n\t\tstate_key "+testKey(1)))
	b := startGateway(t, up.block("\n\t\tstate_key "+testKey(2)))
	alice := &taskClient{t: t, auth: "Bearer alice"}
	created := parseTask(t, alice.call(a.URL, "slow"))
	wait(t, up.started, 5*time.Second, "the slow call upstream")
	before := up.postCount()
	for range 3 {
		x := alice.task(b.URL, "tasks/get", created.TaskID, nil)
		if x.Resp == nil || x.Resp.Error == nil || x.Resp.Error.Code != -32602 || x.Status != http.StatusBadRequest {
			t.Fatalf("another instance's taskId: %s, want 400 -32602", x)
		}
	}
	if sent := up.postsSince(before); len(sent) != 0 {
		t.Fatalf("a foreign taskId sent %q upstream", sent)
	}
	const warned = "a taskId sealed under a key this instance lacks was refused: every instance of a fleet must share state_key"
	lines := waitLogLines(t, b, warned+" (and one with no state_key opens nothing sealed before it restarted)", 1)
	if k, _ := lines[0]["kind"].(string); k != "task_id" {
		t.Errorf("kind %q, want task_id", k)
	}
	if n := len(logLines(b, lines[0]["msg"].(string))); n != 1 {
		t.Errorf("%d taskId lines for three refusals within 10s, want 1", n)
	}
	if strings.Contains(b.Log(), created.TaskID) {
		t.Error("the log carries the taskId")
	}
	close(up.release)
}
