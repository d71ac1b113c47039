package tests

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/seal"
)

// TestAuthFleetRelay: two instances with the same `auth` block in front of
// a legacy server that asks in-line (resume off: the call parks holding its
// stream on the instance it reached). Its retry, sent to the other
// instance with the same subject's token (a fresh one), is relayed to the
// owner, which validates the token again (its access log shows the
// subject) and completes it; the same retry with another subject's valid
// token is refused, and so is one sent to the owner under a forwarding
// header signed with the fleet's key for the call's principal over another
// subject's token: the upstream never hears of either.
func TestAuthFleetRelay(t *testing.T) {
	t.Parallel()
	a := startAuthServer(t)
	rs := newRecordingServer(t)
	ports := []int{freePort(t), freePort(t)}
	const audience = "https://mcp.example.test/mcp" // the fleet's one public URL
	fleet := make([]*gateway, len(ports))
	for i, port := range ports {
		block := fleetBlock(t, "\t\tupstream "+rs.url+" {\n\t\t\tera legacy\n\t\t\tresume off\n\t\t}", "peer", ports, i) +
			fmt.Sprintf("\n\t\tauth {\n\t\t\tissuer %s\n\t\t\taudience %s\n\t\t\trequire_scope mcp\n\t\t}", a.issuer, audience)
		fleet[i] = launchGateway(t, port, "", "\tlog", block)
	}
	owner, other := fleet[0], fleet[1]
	bearer := func(sub, jti string) string {
		return "Bearer " + a.mint(t, map[string]any{"sub": sub, "aud": audience, "scope": "mcp", "jti": jti}, nil, 600)
	}

	ir := parseInputRequired(t, askCall(t, owner.URL, 1, "tea", nil, map[string]string{"Authorization": bearer("alice", "1")}))
	retry := func(id int, authorization string) rpcExchange {
		hdr, body := retryRequest(t, id, "tea", ir)
		hdr["Authorization"] = authorization
		return postRPC(t, other.URL, hdr, body, id)
	}

	// Mallory's valid token: the parked call is not hers.
	before := rs.requests.Load()
	if r := checkRPCError(t, retry(2, bearer("mallory", "2")), http.StatusBadRequest, -32602, 2); r != nil && r.Error.Message != stateRefused {
		t.Errorf("mallory's retry: %q", r.Error.Message)
	}
	if n := rs.requests.Load(); n != before {
		t.Errorf("the upstream got %d requests of mallory's retry", n-before)
	}

	// A forwarding header signed with the fleet's key for alice's principal
	// over mallory's valid token, sent to the owner: refused (403), the
	// call untouched, nothing upstream — a holder of the fleet's key still
	// needs a token of the principal it names.
	hdr, body := retryRequest(t, 4, "tea", ir)
	hdr["Authorization"] = bearer("mallory", "4")
	hdr[seal.ForwardedHeader] = fleetAuth(t, fleetKeyByte).Sign("gw-0", seal.ForwardedRequest{Method: http.MethodPost, URI: "/mcp",
		Body: []byte(body), Authorization: hdr["Authorization"], Principal: translate.PrincipalHash(a.issuer + " alice")}, time.Now())
	if r := checkRPCError(t, postRPC(t, owner.URL, hdr, body, 4), http.StatusForbidden, -32600, 4); r != nil && !strings.Contains(r.Error.Message, "not the principal's") {
		t.Errorf("the forged relay: %q", r.Error.Message)
	}
	if n := rs.requests.Load(); n != before {
		t.Errorf("the upstream got %d requests of the forged relay", n-before)
	}

	// Alice's next token: relayed to the owner, which completes the call.
	if text := checkToolResult(t, retry(3, bearer("alice", "3")), 3); text != "answer: yes" {
		t.Fatalf("alice's retry on the other instance: %q", text)
	}
	waitMetrics(t, other, map[string]float64{
		`caddy_mcp_gateway_instance_forwards_total{direction="sent",outcome="ok"}`: 1,
	})
	waitMetrics(t, owner, map[string]float64{
		`caddy_mcp_gateway_instance_forwards_total{direction="received",outcome="ok"}`: 1,
	})
	// The owner authenticated the relayed retry itself: its access log
	// line of the forwarded request carries the token's subject.
	waitFor(t, "the owner's access log line of alice's forwarded retry", func() bool {
		for _, e := range logLines(owner, "handled request") {
			req, _ := e["request"].(map[string]any)
			headers, _ := req["headers"].(map[string]any)
			if headers[seal.ForwardedHeader] != nil && e["user_id"] == "alice" {
				return true
			}
		}
		return false
	})
}

// TestGiveBackWithAuth: under `auth`, an instance that finishes a call
// another instance parked still gives the upstream session back. The
// notice it sends carries no client token (it goes after the client's
// request ended), only the fleet's signature: the home instance takes it
// without a token, and a tokenless POST that is anything else — a forged
// notice without a signature, a tools/call with another instance's
// signature header but no token — is refused with 401 and reaches no
// upstream.
func TestGiveBackWithAuth(t *testing.T) {
	t.Parallel()
	const calls = 4
	a := startAuthServer(t)
	up := newResumableServer(t)
	ports := []int{freePort(t), freePort(t)}
	const audience = "https://mcp.example.test/mcp"
	fleet := make([]*gateway, len(ports))
	for i, port := range ports {
		block := fleetBlock(t, "\t\tupstream "+up.url+" {\n\t\t\tera legacy\n\t\t}\n\t\tresume_linger -1", "peer", ports, i) +
			fmt.Sprintf("\n\t\tauth {\n\t\t\tissuer %s\n\t\t\taudience %s\n\t\t}", a.issuer, audience)
		fleet[i] = launchGateway(t, port, "", "", block)
	}
	g0, g1 := fleet[0], fleet[1]
	alice := map[string]string{"Authorization": "Bearer " + a.mint(t, map[string]any{"sub": "alice", "aud": audience}, nil, 600)}
	for i := range calls {
		first := parseInputRequired(t, askCall(t, g0.URL, 10*i+1, "tea", nil, alice))
		second := parseInputRequired(t, askCall(t, g0.URL, 10*i+2, "tea", answerWith(t, first, "yes"), alice))
		x := askCall(t, g1.URL, 10*i+3, "tea", answerWith(t, second, "sure"), alice)
		if x.Resp == nil || x.Resp.Error != nil || !strings.Contains(string(x.Resp.Result), `"accept:yes,accept:sure"`) {
			t.Fatalf("call %d on the other instance: %s", i, x)
		}
	}
	given := `caddy_mcp_gateway_resumable_calls_total{event="given_back"}`
	finished := `caddy_mcp_gateway_resumable_calls_total{event="finished_elsewhere"}`
	if got := fleetMetric(t, []*gateway{g1}, given, calls); got != calls {
		t.Fatalf("given_back = %v on the second instance, want %d", got, calls)
	}
	if got := fleetMetric(t, []*gateway{g0}, finished, calls); got != calls {
		t.Fatalf("finished_elsewhere = %v on the first instance, want %d", got, calls)
	}

	// Tokenless requests that are not a signed notice: 401, nothing upstream.
	before := up.sessions()
	notice := `{"jsonrpc":"2.0","method":"notifications/mcp-gateway/session_returned","params":` +
		`{"place":"00000000000000000000000000000000","upstream":"` + up.url + `","session":"x"}}`
	if x := postRPC(t, g0.URL, nil, notice, nil); x.Status != http.StatusUnauthorized {
		t.Errorf("an unsigned notice without a token: %s, want 401", x)
	}
	// A tools/call signed as an instance's, without a client token.
	call := rpcBody(t, 7, "tools/call", map[string]any{"name": "tea", "arguments": map[string]any{}})
	hdr := modernHeaders(modernVersion, "tools/call", "tea")
	hdr[seal.ForwardedHeader] = fleetAuth(t, fleetKeyByte).Sign("gw-0", seal.ForwardedRequest{Method: http.MethodPost, URI: "/mcp", Body: []byte(call)}, time.Now())
	if x := postRPC(t, g0.URL, hdr, call, 7); x.Status != http.StatusUnauthorized {
		t.Errorf("a signed tools/call without a token: %s, want 401", x)
	}
	if n := up.sessions(); n != before {
		t.Errorf("the upstream opened %d sessions for tokenless requests", n-before)
	}
}
