package tests

// Several mcp_gateway blocks in one Caddy keep their own bridge options:
// each block's limits, park_ttl and state_key apply to the calls it serves.

import (
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestOptionsPerBlock runs one Caddy with four mcp_gateway blocks: /a and
// /b in front of the same legacy upstream (go-sdk, in the test), /ra and
// /rb in front of the modern fixture (TypeScript SDK 2.x), with different
// max_rounds, park_ttl and state_key. With options shared by the process,
// whichever block was provisioned last would set them for all, and one of
// each pair of checks below would fail.
func TestOptionsPerBlock(t *testing.T) {
	t.Parallel()
	up := newFailingLegacy(t)
	fixture := startModernFixture(t)
	blockB := func(path, upstream, opts string) string {
		return "\tmcp_gateway " + path + " {\n\t\tupstream " + upstream + "\n" + opts + "\n\t}"
	}
	keyA, keyB := "\t\tstate_key "+testKey(0xa1), "\t\tstate_key "+testKey(0xb2)
	site := strings.Join([]string{
		blockB("/b", up.url+" {\n\t\t\tera legacy\n\t\t}", keyB+"\n\t\tmax_rounds 3\n\t\tpark_ttl 5m"),
		blockB("/ra", fixture+" {\n\t\t\tera modern\n\t\t}", keyA+"\n\t\tmax_rounds 1"),
		blockB("/rb", fixture+" {\n\t\t\tera modern\n\t\t}", keyB+"\n\t\tmax_rounds 3"),
	}, "\n")
	g := startGatewayWith(t, "", site, up.block()+"\n"+keyA+"\n\t\tmax_rounds 1\n\t\tpark_ttl 3s")
	urlA := g.URL
	urlOf := func(path string) string { return strings.TrimSuffix(g.URL, "/mcp") + path }
	urlB := urlOf("/b")

	answer := func(action string, ir inputRequired) map[string]any {
		return map[string]any{"inputResponses": map[string]any{"elicitation-1": map[string]any{"action": action, "content": map[string]any{"answer": "x"}}},
			"requestState": ir.RequestState}
	}
	ended := func(t *testing.T, want string) {
		t.Helper()
		got := wait(t, up.ended, notHang, "end of the tool call")
		if want == "ask: cancel" && !cancelled(got) || want != "ask: cancel" && got != want {
			t.Fatalf("the tool %s, want %s", got, want)
		}
	}

	t.Run("max_rounds", func(t *testing.T) {
		// A: an invalid answer would be asked again, in a second round.
		ir := parseInputRequired(t, readRPC(t, modernCall(t, urlA, 1, "ask", map[string]any{}, nil), 1))
		x := readRPC(t, modernCall(t, urlA, 2, "ask", map[string]any{}, answer("maybe", ir)), 2)
		if r := checkRPCError(t, x, http.StatusBadGateway, -32603, 2); r != nil && !strings.Contains(r.Error.Message, "max_rounds") {
			t.Fatalf("A: message %q, want it to name max_rounds", r.Error.Message)
		}
		ended(t, "ask: cancel")
		// B: two invalid answers, then a valid one: three rounds.
		ir = parseInputRequired(t, readRPC(t, modernCall(t, urlB, 3, "ask", map[string]any{}, nil), 3))
		for id := 4; id <= 5; id++ {
			ir = parseInputRequired(t, readRPC(t, modernCall(t, urlB, id, "ask", map[string]any{}, answer("maybe", ir)), id))
		}
		x = readRPC(t, modernCall(t, urlB, 6, "ask", map[string]any{}, answer("accept", ir)), 6)
		if x.Resp == nil || x.Resp.Error != nil || !strings.Contains(string(x.Resp.Result), "answer: x") {
			t.Fatalf("B's third round: %s", x)
		}
		ended(t, "ask: accept")
	})

	t.Run("state_key", func(t *testing.T) {
		ir := parseInputRequired(t, readRPC(t, modernCall(t, urlB, 10, "ask", map[string]any{}, nil), 10))
		before := up.requests.Load()
		x := readRPC(t, modernCall(t, urlA, 11, "ask", map[string]any{}, answer("accept", ir)), 11)
		checkRPCError(t, x, http.StatusBadRequest, -32602, 11)
		if n := up.requests.Load() - before; n != 0 {
			t.Fatalf("B's requestState refused by A sent %d requests upstream", n)
		}
		// B's call is still parked, for B.
		x = readRPC(t, modernCall(t, urlB, 12, "ask", map[string]any{}, answer("accept", ir)), 12)
		if x.Resp == nil || x.Resp.Error != nil || !strings.Contains(string(x.Resp.Result), "answer: x") {
			t.Fatalf("B's retry through B: %s", x)
		}
		ended(t, "ask: accept")

		// A gateway-held session of /ra is not one of /rb.
		sid, _ := initReverse(t, urlOf("/ra"), "2025-11-25", `{}`, nil)
		resp := post(t, urlOf("/rb"), legacyHeaders(sid), `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
		if resp.StatusCode != http.StatusNotFound {
			t.Fatalf("/ra's session at /rb: HTTP %d, want 404", resp.StatusCode)
		}
	})

	t.Run("park_ttl", func(t *testing.T) {
		parseInputRequired(t, readRPC(t, modernCall(t, urlA, 20, "ask", map[string]any{}, nil), 20))
		irB := parseInputRequired(t, readRPC(t, modernCall(t, urlB, 21, "ask", map[string]any{}, nil), 21))
		ended(t, "ask: cancel") // A's call, after its 3s
		x := readRPC(t, modernCall(t, urlB, 22, "ask", map[string]any{}, answer("accept", irB)), 22)
		if x.Resp == nil || x.Resp.Error != nil || !strings.Contains(string(x.Resp.Result), "answer: x") {
			t.Fatalf("B's retry after A's call expired: %s", x)
		}
		ended(t, "ask: accept")
	})

	t.Run("reverse max_rounds", func(t *testing.T) {
		// plan_party asks three rounds (two elicitations, one sampling).
		call := func(path string) partyOutcome {
			return planParty(t, func(o *mcp.ClientOptions) *mcp.ClientSession { return connectGo(t, urlOf(path), "2025-11-25", o) })
		}
		if p := call("/ra"); !p.res.IsError || p.asked() != 1 || !strings.Contains(toolText(p.res), "more than 1 times") {
			t.Fatalf("/ra: %q (isError %t) after %d questions, want max_rounds 1's error after 1", toolText(p.res), p.res.IsError, p.asked())
		}
		call("/rb").complete(t)
	})
}

// TestOptionsAcrossReload: a call parked before a reload keeps the options
// it started with (max_rounds 1 ends it at its second round although the
// new configuration allows 3), its retry is opened with the new
// configuration's key list, and it is counted in the new configuration's
// metrics, the ones /metrics serves; a call started after the reload has
// the new options.
func TestOptionsAcrossReload(t *testing.T) {
	t.Parallel()
	up := newFailingLegacy(t)
	keys := "\n\t\tstate_key " + testKey(0xc3)
	g := startGateway(t, up.block()+keys+"\n\t\tmax_rounds 1")
	maybe := func(ir inputRequired) map[string]any {
		return map[string]any{"inputResponses": map[string]any{"elicitation-1": map[string]any{"action": "maybe"}}, "requestState": ir.RequestState}
	}
	ir := parseInputRequired(t, readRPC(t, modernCall(t, g.URL, 1, "ask", map[string]any{}, nil), 1))

	g.reload(t, up.block()+"\n\t\tstate_key "+testKey(0xd4)+" "+testKey(0xc3)+"\n\t\tmax_rounds 3")
	x := readRPC(t, modernCall(t, g.URL, 2, "ask", map[string]any{}, maybe(ir)), 2)
	if r := checkRPCError(t, x, http.StatusBadGateway, -32603, 2); r != nil && !strings.Contains(r.Error.Message, "max_rounds") {
		t.Fatalf("message %q, want it to name max_rounds", r.Error.Message)
	}
	if got := wait(t, up.ended, notHang, "end of the tool call"); !cancelled(got) {
		t.Fatalf("the tool %s, want its question cancelled", got)
	}
	waitMetrics(t, g, map[string]float64{
		`caddy_mcp_gateway_bridged_calls_total{cell="modern-legacy",method="tools/call",outcome="error"}`: 1,
		`caddy_mcp_gateway_parked_calls_ended_total{reason="answered"}`:                                   1,
	})

	ir = parseInputRequired(t, readRPC(t, modernCall(t, g.URL, 3, "ask", map[string]any{}, nil), 3))
	parseInputRequired(t, readRPC(t, modernCall(t, g.URL, 4, "ask", map[string]any{}, maybe(ir)), 4))
}
