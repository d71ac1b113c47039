package tests

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/tests/support"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/seal"
)

// TestUpstreamAuthFleet: `upstream_auth exchange` across a fleet. Two
// instances with the same `auth` (tokens of oauth2-mock-server) and
// `upstream_auth exchange` (the RFC 8693 fixture token endpoint), in front
// of a go-sdk server with an event store behind a recorder of the
// Authorization it gets. A lingering call's retry landing on the other
// instance is relayed home, which exchanges the client's token; a retry
// whose home dies after reading it is resumed on the other instance, which
// exchanges the same token itself: the upstream gets the exchanged token of
// the same subject every time, never none, and the token endpoint makes one
// exchange per instance. Another subject's valid token cannot resume the
// call; a forwarding header signed with the fleet's key for alice's
// principal over mallory's token cannot make the home exchange mallory's
// token for alice's call (403, nothing exchanged, nothing upstream).
func TestUpstreamAuthFleet(t *testing.T) {
	t.Parallel()
	a := startAuthServer(t)
	up := newHoldingServer(t, true)
	rec := newAuthRecorder(t, up.url)
	ts := support.ServeTokenExchange(t, "gateway", "gateway-secret")
	const audience = "https://mcp.example.test/mcp" // the fleet's one public URL
	ports := []int{freePort(t), freePort(t)}
	fleet := make([]*gateway, len(ports))
	for i, port := range ports {
		block := fleetBlock(t, "\t\tupstream "+rec.url+" {\n\t\t\tera legacy\n\t\t}\n\t\tresume_linger 1s", "peer", ports, i) +
			fmt.Sprintf("\n\t\tauth {\n\t\t\tissuer %s\n\t\t\taudience %s\n\t\t\trequire_scope mcp\n\t\t}", a.issuer, audience) +
			"\n\t\tupstream_auth exchange {\n\t\t\ttoken_endpoint " + ts.URL +
			"\n\t\t\tclient_id gateway\n\t\t\tclient_secret gateway-secret\n\t\t\taudience mcp-server\n\t\t}"
		fleet[i] = launchGateway(t, port, "", "", block)
	}
	home, other := fleet[0], fleet[1]
	aliceToken := a.mint(t, map[string]any{"sub": "alice", "aud": audience, "scope": "mcp"}, nil, 600)
	malloryToken := a.mint(t, map[string]any{"sub": "mallory", "aud": audience, "scope": "mcp"}, nil, 600)
	alice := map[string]string{"Authorization": "Bearer " + aliceToken}
	mallory := map[string]string{"Authorization": "Bearer " + malloryToken}
	exchanged := "Bearer exchanged:mcp-server:" + aliceToken
	call := func(url string, id int, extra map[string]any, hdr map[string]string) rpcExchange {
		t.Helper()
		return elicitingCall(t, url, id, "ask", map[string]any{}, extra, hdr)
	}
	result := func(x rpcExchange, want string) {
		t.Helper()
		if x.Resp == nil || x.Resp.Error != nil || !strings.Contains(string(x.Resp.Result), want) {
			t.Fatalf("want the result %q, got %s", want, x)
		}
	}
	// Every request the upstream got carried alice's exchanged token.
	onlyExchanged := func(when string) int {
		t.Helper()
		got := rec.authorizations("/mcp")
		for _, v := range got {
			if v != exchanged {
				t.Fatalf("%s: the upstream received Authorization %q, want alice's exchanged token", when, v)
			}
		}
		return len(got)
	}

	// The first call, answered where it parked, teaches the home that the
	// tool's retries come back at once: later calls linger there.
	up.release <- struct{}{}
	ir := parseInputRequired(t, call(home.URL, 1, nil, alice))
	result(call(home.URL, 2, answerWith(t, ir, "first"), alice), "got first")
	wait(t, up.answered, 5*time.Second, "the first answer upstream")

	// (1) A lingering call's retry on the other instance, relayed home:
	// the home exchanged alice's token (once, for both calls), the other
	// instance nothing.
	up.release <- struct{}{}
	ir = parseInputRequired(t, call(home.URL, 3, nil, alice))
	result(call(other.URL, 4, answerWith(t, ir, "second"), alice), "got second")
	wait(t, up.answered, 5*time.Second, "the second answer upstream")
	waitMetrics(t, other, map[string]float64{`caddy_mcp_gateway_instance_forwards_total{direction="sent",outcome="ok"}`: 1})
	onlyExchanged("relayed home")
	if n := ts.Count("mcp-server", aliceToken); n != 1 {
		t.Fatalf("%d exchanges of alice's token, want 1 (the home's)", n)
	}

	// The attack: a forwarding header signed with the fleet's key for
	// alice's principal, over mallory's valid token, sent to the home with
	// the retry of alice's lingering call.
	up.release <- struct{}{} // were the forged retry served, the tool would finish
	ir = parseInputRequired(t, call(home.URL, 5, nil, alice))
	m := meta(modernVersion)
	m["io.modelcontextprotocol/clientCapabilities"] = map[string]any{"elicitation": map[string]any{}}
	params := map[string]any{"name": "ask", "arguments": map[string]any{}, "_meta": m}
	for k, v := range answerWith(t, ir, "forged") {
		params[k] = v
	}
	body := rpcBody(t, 6, "tools/call", params)
	hdr := mergeHeaders(modernHeaders(modernVersion, "tools/call", "ask"), mallory)
	hdr[seal.ForwardedHeader] = fleetAuth(t, fleetKeyByte).Sign("gw-0", seal.ForwardedRequest{Method: http.MethodPost, URI: "/mcp",
		Body: []byte(body), Authorization: mallory["Authorization"], Principal: translate.PrincipalHash(a.issuer + " alice")}, time.Now())
	before := onlyExchanged("before the forged retry")
	if r := checkRPCError(t, postRPC(t, home.URL, hdr, body, 6), http.StatusForbidden, -32600, 6); r != nil && !strings.Contains(r.Error.Message, "not the principal's") {
		t.Errorf("the forged retry: %q", r.Error.Message)
	}
	if n := ts.Count("mcp-server", malloryToken); n != 0 {
		t.Errorf("the home exchanged mallory's token %d times for alice's call", n)
	}
	if after := onlyExchanged("after the forged retry"); after != before {
		t.Errorf("the upstream got %d requests of the forged retry", after-before)
	}

	// (2) The next call's retry, on the other instance, is relayed home,
	// which posts the answer upstream and dies before it answers: the
	// other instance resumes the call itself, exchanging alice's token.
	ir = parseInputRequired(t, call(home.URL, 7, nil, alice))
	answer := make(chan rpcExchange, 1)
	go func() { answer <- call(other.URL, 8, answerWith(t, ir, "third"), alice) }()
	if got := wait(t, up.answered, 10*time.Second, "the answer upstream, posted by the home"); got != "third" {
		t.Fatalf("answer upstream %q", got)
	}
	before = onlyExchanged("before the home's death")
	home.kill(t)
	var x rpcExchange
	select {
	case x = <-answer:
	case <-time.After(30 * time.Second):
		t.Fatal("no answer to the retry within 30s of the home's death")
	}
	result(x, "got third")
	if after := onlyExchanged("resumed on the other instance"); after == before {
		t.Fatal("the other instance sent the upstream nothing: the call was not resumed there")
	}
	if n := ts.Count("mcp-server", aliceToken); n != 2 {
		t.Errorf("%d exchanges of alice's token, want 2 (one per instance)", n)
	}

	// (3) Mallory's valid token cannot resume alice's call on the other
	// instance either.
	ir = parseInputRequired(t, call(other.URL, 9, nil, alice))
	before = onlyExchanged("before mallory's retry")
	if r := checkRPCError(t, call(other.URL, 10, answerWith(t, ir, "mallory"), mallory), http.StatusBadRequest, -32602, 10); r != nil && r.Error.Message != stateRefused {
		t.Errorf("mallory's retry: %q", r.Error.Message)
	}
	if after := onlyExchanged("after mallory's retry"); after != before {
		t.Errorf("the upstream got %d requests of mallory's retry", after-before)
	}
	if n := ts.Count("mcp-server", malloryToken); n != 0 {
		t.Errorf("mallory's token was exchanged %d times", n)
	}
	for _, secret := range []string{aliceToken, malloryToken, "exchanged:", "gateway-secret"} {
		if strings.Contains(other.Log(), secret) {
			t.Errorf("the gateway's log holds %q", secret)
		}
	}
}
