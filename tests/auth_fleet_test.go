package tests

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/seal"
)

// TestAuthFleetRelay: two instances with the same `auth` block in front of
// a legacy server that asks in-line (resume off: the call parks holding its
// stream on the instance it reached). Its retry, sent to the other
// instance with the same subject's token (a fresh one), is relayed to the
// owner, which validates the token again (its access log shows the
// subject) and completes it; the same retry with another subject's valid
// token is refused, and the upstream never hears of it.
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
