package tests

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// scopeCaddyfile is a Caddyfile serving mcp_gateway at /mcp on port (its
// matcher letting a REST face at /api and the metadata reach it), with
// block's lines and an `auth` block for a's issuer, audience and
// require_scope mcp, then authLines (the rules); its admin API at admin.
func scopeCaddyfile(a *authServer, port int, admin, storage, audience, block, authLines string) string {
	return fmt.Sprintf(`{
	admin %s
	grace_period 10s
	persist_config off
	storage file_system %s
}

:%d {
	bind 127.0.0.1
	@mcp path /mcp /api /api/* /.well-known/oauth-protected-resource/mcp
	mcp_gateway @mcp {
%s
		auth {
			issuer %s
			audience %s
			require_scope mcp
%s
		}
	}
}
`, admin, storage, port, block, a.issuer, audience, authLines)
}

// toolNames are the names of a tools/list (or REST list) result's tools.
func toolNames(t *testing.T, result []byte) []string {
	t.Helper()
	var res struct{ Tools []struct{ Name string } }
	if err := json.Unmarshal(result, &res); err != nil {
		t.Fatalf("%s: %v", result, err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	return names
}

// withMeta is a modern request's params: params with its _meta.
func withMeta(params map[string]any) map[string]any {
	out := map[string]any{"_meta": meta(modernVersion)}
	for k, v := range params {
		out[k] = v
	}
	return out
}

// unknownTool checks the answer a server gives a tool it does not have:
// -32602 in-band (HTTP 200), "Unknown tool: <name>".
func unknownTool(t *testing.T, x rpcExchange, name, what string) {
	t.Helper()
	if x.Status != http.StatusOK || x.Resp == nil || x.Resp.Error == nil || x.Resp.Error.Code != -32602 || x.Resp.Error.Message != "Unknown tool: "+name {
		t.Errorf("%s: want -32602 Unknown tool: %s, got %s", what, name, x)
	}
}

// TestToolScopeAttacks: two instances with `tool_scope ask ops` in front
// of a legacy go-sdk server whose `ask` tool elicits (resume off: a call
// parks holding its stream on the instance it reached). A token without
// `ops` does not see `ask` in tools/list (cacheScope private), nor in the
// REST face's list and OpenAPI document; its call is refused as an
// unknown tool's and the upstream never hears of it, whatever Mcp-Name
// says, as a task, through REST, the saga and multi-turn SSE (a turn
// begun with `ops` too), or as the retry of a parked call sent to the
// other instance (the same subject's fresh token without `ops`, also once
// the owner is gone).
// The same subject's token with `ops` completes the retry, relayed to the
// owner, which authenticates it again.
func TestToolScopeAttacks(t *testing.T) {
	t.Parallel()
	a := startAuthServer(t)
	rs := newRecordingServer(t)
	ports := []int{freePort(t), freePort(t)}
	const audience = "https://mcp.example.test/mcp"
	storage := t.TempDir() // the fleet's shared storage (the saga's and REST's records)
	fleet := make([]*gateway, len(ports))
	for i, port := range ports {
		block := fleetBlock(t, "\t\tupstream "+rs.url+" {\n\t\t\tera legacy\n\t\t\tresume off\n\t\t}", "peer", ports, i) +
			"\n\t\trest /api\n\t\tsaga on\n\t\tmulti_turn_sse on"
		admin := fmt.Sprintf("127.0.0.1:%d", freePort(t))
		fleet[i] = launchCaddyfile(t, port, admin, scopeCaddyfile(a, port, admin, storage, audience, block, "\t\t\ttool_scope ask ops"))
	}
	owner, other := fleet[0], fleet[1]
	token := func(sub, scope, jti string) map[string]string {
		return map[string]string{"Authorization": "Bearer " + a.mint(t, map[string]any{"sub": sub, "aud": audience, "scope": scope, "jti": jti}, nil, 600)}
	}
	opsAlice, plainAlice, plainBob := token("alice", "mcp ops", "1"), token("alice", "mcp", "2"), token("bob", "mcp", "3")

	// tools/list: ask only for ops, and private either way.
	list := func(hdr map[string]string) ([]string, string) {
		h := modernHeaders(modernVersion, "tools/list", "")
		for k, v := range hdr {
			h[k] = v
		}
		x := postRPC(t, owner.URL, h, rpcBody(t, 1, "tools/list", map[string]any{"_meta": meta(modernVersion)}), 1)
		if x.Resp == nil || x.Resp.Result == nil {
			t.Fatalf("tools/list: %s", x)
		}
		var res struct{ CacheScope string }
		_ = json.Unmarshal(x.Resp.Result, &res)
		return toolNames(t, x.Resp.Result), res.CacheScope
	}
	if names, scope := list(plainBob); slices.Contains(names, "ask") || !slices.Contains(names, "slow") || scope != "private" {
		t.Errorf("bob's tools/list: %v, cacheScope %q", names, scope)
	}
	if names, scope := list(opsAlice); !slices.Contains(names, "ask") || scope != "private" {
		t.Errorf("alice's (ops) tools/list: %v, cacheScope %q", names, scope)
	}
	rest := restDo(t, "GET", fmt.Sprintf("http://127.0.0.1:%d/api/tools", owner.Port), plainBob, "")
	if names := toolNames(t, rest.Body); rest.Status != 200 || slices.Contains(names, "ask") || !slices.Contains(names, "slow") || !strings.HasPrefix(rest.Header.Get("Cache-Control"), "private") {
		t.Errorf("bob's REST tools: %d %q %v", rest.Status, rest.Header.Get("Cache-Control"), names)
	}
	openapi := restDo(t, "GET", fmt.Sprintf("http://127.0.0.1:%d/api/openapi.json", owner.Port), plainBob, "")
	if openapi.Status != 200 || strings.Contains(string(openapi.Body), "/tools/ask/") || !strings.Contains(string(openapi.Body), "/tools/slow/") {
		t.Errorf("bob's REST openapi.json: %d, /tools/ask/ in it: %v", openapi.Status, strings.Contains(string(openapi.Body), "/tools/ask/"))
	}

	// Calls to ask without ops, each refused before the upstream.
	before := rs.requests.Load()
	unknownTool(t, askCall(t, owner.URL, 2, "tea", nil, plainBob), "ask", "bob's call")
	// Mcp-Name names an allowed tool, the body the forbidden one.
	h := withHeaders(plainBob, "Mcp-Name", "slow")
	unknownTool(t, elicitingCall(t, owner.URL, 3, "ask", map[string]any{"topic": "tea"}, nil, h), "ask", "Mcp-Name slow over a body naming ask")
	// A task (the Tasks extension declared): none is created.
	m := meta(modernVersion)
	m["io.modelcontextprotocol/clientCapabilities"] = map[string]any{"extensions": map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}}
	unknownTool(t, postRPC(t, owner.URL, withHeaders(modernHeaders(modernVersion, "tools/call", "ask"), "Authorization", plainBob["Authorization"]),
		rpcBody(t, 4, "tools/call", map[string]any{"name": "ask", "arguments": map[string]any{"topic": "tea"}, "_meta": m, "task": map[string]any{}}), 4), "ask", "a task")
	// The saga face.
	saga := callSaga(t, owner.URL, plainBob, 5, "ask", map[string]any{"topic": "tea"})
	if saga.Resp == nil || saga.Resp.Error == nil || saga.Resp.Error.Code != -32602 || !strings.Contains(saga.Resp.Error.Message, "Unknown tool: ask") {
		t.Errorf("bob's saga: %s", saga)
	}
	if n := rs.requests.Load(); n != before {
		t.Errorf("the upstream got %d requests of calls out of scope", n-before)
	}
	// The REST face: an unknown tool (its check lists the tools, which the
	// upstream answers; the call itself never reaches it: no elicitation).
	wantProblem(t, restDo(t, "PUT", fmt.Sprintf("http://127.0.0.1:%d/api/tools/ask/calls/r1", owner.Port),
		withHeaders(plainBob, "Idempotency-Key", "k"), `{"arguments":{"topic":"tea"}}`), http.StatusNotFound)

	// Multi-turn SSE: a legacy session that opted in. Without ops its call
	// is refused; a turn started with ops and answered with a token of the
	// same subject without it ends as an unknown tool's call.
	init := readRPC(t, post(t, owner.URL, opsAlice, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25",`+
		`"capabilities":`+mtCaps+`,"clientInfo":{"name":"raw-sep1858","version":"1"}}}`), 1)
	sid := init.Header.Get("Mcp-Session-Id")
	if r := post(t, owner.URL, withHeaders(legacyHeaders(sid), "Authorization", opsAlice["Authorization"]), `{"jsonrpc":"2.0","method":"notifications/initialized"}`); sid == "" || r.StatusCode != http.StatusAccepted {
		t.Fatalf("multi-turn session %q: %d", sid, r.StatusCode)
	}
	mtCallAs := func(hdr map[string]string, id int) mtAnswer {
		return mtRead(t, post(t, owner.URL, withHeaders(legacyHeaders(sid), "Authorization", hdr["Authorization"]),
			rpcBody(t, id, "tools/call", map[string]any{"name": "ask", "arguments": map[string]any{"topic": "tea"}})))
	}
	before = rs.requests.Load()
	if a := mtCallAs(plainAlice, 20); a.final == nil || a.final.Error == nil || a.final.Error.Code != -32602 || a.final.Error.Message != "Unknown tool: ask" {
		t.Errorf("a multi-turn call without ops: %s", a)
	}
	if n := rs.requests.Load(); n != before {
		t.Errorf("the upstream got %d requests of the multi-turn call out of scope", n-before)
	}
	turn := mtTurn(t, mtCallAs(opsAlice, 21), "About tea", "elicitation/create")
	b, _ := json.Marshal([]map[string]any{mtAccept(turn.reqs[0], map[string]any{"answer": "yes"})})
	answered := mtRead(t, post(t, owner.URL, withHeaders(legacyHeaders(sid), "Authorization", plainAlice["Authorization"], "Last-Event-ID", turn.token), string(b)))
	if a := answered; a.final == nil || a.final.Error == nil || a.final.Error.Code != -32602 || a.final.Error.Message != "Unknown tool: ask" {
		t.Errorf("a multi-turn turn answered without ops: %s", a)
	}

	// A parked call's retry on the other instance: alice's token without
	// ops is refused there, before any relay; with ops it is relayed to
	// the owner and completes.
	ir := parseInputRequired(t, askCall(t, owner.URL, 6, "tea", nil, opsAlice))
	retry := func(id int, hdr map[string]string) rpcExchange {
		rh, body := retryRequest(t, id, "tea", ir)
		rh["Authorization"] = hdr["Authorization"]
		return postRPC(t, other.URL, rh, body, id)
	}
	before = rs.requests.Load()
	unknownTool(t, retry(7, plainAlice), "ask", "alice's retry without ops")
	if n := rs.requests.Load(); n != before {
		t.Errorf("the upstream got %d requests of the retry out of scope", n-before)
	}
	if text := checkToolResult(t, retry(8, opsAlice), 8); text != "answer: yes" {
		t.Fatalf("alice's retry with ops on the other instance: %q", text)
	}
	waitMetrics(t, other, map[string]float64{`caddy_mcp_gateway_instance_forwards_total{direction="sent",outcome="ok"}`: 1})
	waitMetrics(t, owner, map[string]float64{`caddy_mcp_gateway_instance_forwards_total{direction="received",outcome="ok"}`: 1})

	// Its owner gone, a parked call's retry without ops is refused the same.
	ir = parseInputRequired(t, askCall(t, owner.URL, 9, "tea", nil, opsAlice))
	owner.stop(t)
	unknownTool(t, retry(10, plainAlice), "ask", "alice's retry without ops, its owner gone")
}

// TestToolScopeClients: real SDK clients, each era's, through real go-sdk
// servers of each era and a federated block of both, with tokens of two
// scope sets: the TypeScript SDK 1.x client (legacy, its own OAuth flow:
// the pass-through and the reverse bridge) and the 2.x client (modern, a
// minted token: the pass-through and the forward bridge). Without `ops`,
// test_simple_text is absent from the tools/list the client reads (it
// gives up before calling it), and with `ops` it is called. In the
// federated block the rule names the prefixed name: new__test_simple_text
// is hidden, old__test_simple_text is not. The block's merged list, kept
// within its ttlMs, is filtered per token: neither order of two
// principals shows one the other's list. Prompts by scope the same. A
// saga suspended with the scope and resumed with the same subject's token
// without it is refused.
func TestToolScopeClients(t *testing.T) {
	t.Parallel()
	a := startAuthServer(t)
	legacy, modern := startGoEverything(t, false), startGoEverything(t, true)
	const rules = "\t\t\ttool_scope test_simple_* ops\n\t\t\tprompt_scope test_simple_prompt ops"
	for _, c := range []struct {
		name, block, rules, hidden, shown string
	}{
		{"modern", "\t\tupstream " + modern + "\n\t\tsaga on", rules + "\n\t\t\ttool_scope test_input_required_result_elicitation ops", "test_simple_text", "test_image_content"},
		{"legacy", "\t\tupstream " + legacy, rules, "test_simple_text", "test_image_content"},
		{"federated", "\t\tserver old {\n\t\t\tupstream " + legacy + "\n\t\t}\n\t\tserver new {\n\t\t\tupstream " + modern + "\n\t\t}",
			"\t\t\ttool_scope new__test_simple_* ops", "new__test_simple_text", "old__test_simple_text"},
	} {
		t.Run(c.name, func(t *testing.T) {
			port := freePort(t)
			admin, audience := fmt.Sprintf("127.0.0.1:%d", freePort(t)), fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
			g := launchCaddyfile(t, port, admin, scopeCaddyfile(a, port, admin, t.TempDir(), audience, c.block, c.rules))
			mint := func(sub, scope string) string {
				return a.mint(t, map[string]any{"sub": sub, "aud": audience, "scope": scope}, nil, 600)
			}
			for _, client := range []struct {
				script string
				args   func(scope string) []string
			}{
				{"oauth-client.mjs", func(scope string) []string {
					return []string{"client=agent-" + c.name, "issuer=" + a.issuer, "scope=" + scope}
				}},
				{"modern-client.mjs", func(scope string) []string { return []string{"bearer=" + mint("agent-"+c.name, scope)} }},
			} {
				_, err := runNodeScript(t, client.script, append([]string{g.URL, c.hidden, "{}"}, client.args("mcp")...)...)
				if err == nil || !strings.Contains(err.Error(), "is not in tools/list") || !strings.Contains(err.Error(), c.shown) {
					t.Errorf("%s without ops, calling %s: %v", client.script, c.hidden, err)
				}
				if out, err := runNodeScript(t, client.script, append([]string{g.URL, c.shown, "{}"}, client.args("mcp")...)...); err != nil {
					t.Errorf("%s without ops, calling %s: %v", client.script, c.shown, err)
				} else if strings.Contains(string(out), `"isError":true`) {
					t.Errorf("%s without ops, calling %s: %s", client.script, c.shown, out)
				}
				if out, err := runNodeScript(t, client.script, append([]string{g.URL, c.hidden, "{}"}, client.args("mcp ops")...)...); err != nil || strings.Contains(string(out), `"isError":true`) {
					t.Errorf("%s with ops, calling %s: %s %v", client.script, c.hidden, out, err)
				}
			}

			// Two principals in both orders: each sees its own list only.
			bob, alice := mint("bob", "mcp"), mint("alice", "mcp ops")
			list := func(token, method string) rpcExchange {
				h := withHeaders(modernHeaders(modernVersion, method, ""), "Authorization", "Bearer "+token)
				return postRPC(t, g.URL, h, rpcBody(t, 1, method, map[string]any{"_meta": meta(modernVersion)}), 1)
			}
			for i, token := range []string{bob, alice, bob, alice} {
				x := list(token, "tools/list")
				if x.Resp == nil || x.Resp.Result == nil {
					t.Fatalf("tools/list: %s", x)
				}
				var res struct{ CacheScope string }
				_ = json.Unmarshal(x.Resp.Result, &res)
				names := toolNames(t, x.Resp.Result)
				if slices.Contains(names, c.hidden) != (token == alice) || !slices.Contains(names, c.shown) || res.CacheScope != "private" {
					t.Errorf("tools/list %d (alice: %v): cacheScope %q, %v", i, token == alice, res.CacheScope, names)
				}
			}
			// Calls naming the hidden tool: a modern client's and a legacy
			// client's (its session through the pass-through or a bridge).
			bobHdr := map[string]string{"Authorization": "Bearer " + bob}
			call := map[string]any{"name": c.hidden, "arguments": map[string]any{}}
			modernCall := withHeaders(modernHeaders(modernVersion, "tools/call", c.hidden), "Authorization", bobHdr["Authorization"])
			unknownTool(t, postRPC(t, g.URL, modernCall, rpcBody(t, 2, "tools/call", withMeta(call)), 2), c.hidden, "a modern call")
			init := post(t, g.URL, bobHdr, legacyInit)
			sid := init.Header.Get("Mcp-Session-Id")
			init.Body.Close()
			legacyCall := withHeaders(legacyHeaders(sid), "Authorization", bobHdr["Authorization"])
			if r := post(t, g.URL, legacyCall, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); sid == "" || r.StatusCode != http.StatusAccepted {
				t.Fatalf("legacy session %q: %d", sid, r.StatusCode)
			}
			unknownTool(t, postRPC(t, g.URL, legacyCall, rpcBody(t, 3, "tools/call", call), 3), c.hidden, "a legacy call")
			if c.name != "modern" {
				return
			}
			x := list(bob, "prompts/list")
			if x.Resp == nil || strings.Contains(string(x.Resp.Result), "test_simple_prompt") || !strings.Contains(string(x.Resp.Result), "test_prompt_with_arguments") {
				t.Errorf("bob's prompts/list: %s", x)
			}
			h := withHeaders(modernHeaders(modernVersion, "prompts/get", "test_simple_prompt"), "Authorization", "Bearer "+bob)
			x = postRPC(t, g.URL, h, rpcBody(t, 2, "prompts/get", map[string]any{"name": "test_simple_prompt", "_meta": meta(modernVersion)}), 2)
			if x.Status != 200 || x.Resp == nil || x.Resp.Error == nil || x.Resp.Error.Code != -32602 || x.Resp.Error.Message != "Unknown prompt: test_simple_prompt" {
				t.Errorf("bob's prompts/get: %s", x)
			}

			// A saga suspended with ops, resumed with a token of the same
			// subject without it: its retry on the modern upstream is
			// refused as an unknown tool's.
			const tool = "test_input_required_result_elicitation"
			first := suspended(t, callSaga(t, g.URL, map[string]string{"Authorization": "Bearer " + alice}, 3, tool, map[string]any{}), "elicitation")
			plainAlice := mint("alice", "mcp")
			x = resumeSaga(t, g.URL, map[string]string{"Authorization": "Bearer " + plainAlice}, 4, first.SagaToken, []map[string]any{accept(first.Steps[0].StepID, map[string]any{})})
			if x.Resp == nil || x.Resp.Error == nil || x.Resp.Error.Code != -32602 || !strings.Contains(x.Resp.Error.Message, "Unknown tool: "+tool) {
				t.Errorf("alice's saga resumed without ops: %s", x)
			}
		})
	}
}

// TestToolScopeMultiTurnModern: a multi-turn session's turn, its call
// passed through to a modern server (the TypeScript SDK 2.x fixture),
// started with the scope and answered with the same subject's token
// without it: the turn's retry, made on the session's upstream, is
// refused as an unknown tool's call.
func TestToolScopeMultiTurnModern(t *testing.T) {
	t.Parallel()
	a := startAuthServer(t)
	port := freePort(t)
	admin, audience := fmt.Sprintf("127.0.0.1:%d", freePort(t)), fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
	block := "\t\tupstream " + startModernFixture(t) + " {\n\t\t\tera modern\n\t\t}\n\t\tmulti_turn_sse on"
	g := launchCaddyfile(t, port, admin, scopeCaddyfile(a, port, admin, t.TempDir(), audience, block, "\t\t\ttool_scope plan_* ops"))
	as := func(scope string, hdr map[string]string) map[string]string {
		return withHeaders(hdr, "Authorization", "Bearer "+a.mint(t, map[string]any{"sub": "alice", "aud": audience, "scope": scope}, nil, 600))
	}
	init := readRPC(t, post(t, g.URL, as("mcp ops", nil), `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25",`+
		`"capabilities":`+mtCaps+`,"clientInfo":{"name":"raw-sep1858","version":"1"}}}`), 1)
	sid := init.Header.Get("Mcp-Session-Id")
	if r := post(t, g.URL, as("mcp ops", legacyHeaders(sid)), `{"jsonrpc":"2.0","method":"notifications/initialized"}`); sid == "" || r.StatusCode != http.StatusAccepted {
		t.Fatalf("multi-turn session %q: %d", sid, r.StatusCode)
	}
	call := rpcBody(t, 2, "tools/call", map[string]any{"name": "plan_party", "arguments": map[string]any{"occasion": "picnic"}})
	turn := mtTurn(t, mtRead(t, post(t, g.URL, as("mcp ops", legacyHeaders(sid)), call)), "", "elicitation/create")
	b, _ := json.Marshal([]map[string]any{mtAccept(turn.reqs[0], map[string]any{"name": "Ada"})})
	answered := mtRead(t, post(t, g.URL, as("mcp", withHeaders(legacyHeaders(sid), "Last-Event-ID", turn.token)), string(b)))
	if x := answered; x.final == nil || x.final.Error == nil || x.final.Error.Code != -32602 || x.final.Error.Message != "Unknown tool: plan_party" {
		t.Errorf("a turn answered without ops: %s", x)
	}
}
