package tests

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// adminGET fetches an admin endpoint of the gateway into v.
func adminGET(t *testing.T, g *gateway, path string, v any) {
	t.Helper()
	resp, err := http.Get("http://" + g.AdminAddr + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: status %d", path, resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
}

// TestAdminAPI: after one input round the admin endpoint lists the parked
// call (without principal or payload); when the call ends it leaves.
func TestAdminAPI(t *testing.T) {
	t.Parallel()
	rs := newRecordingServer(t)
	g := startGateway(t, "\t\tupstream "+rs.url)
	ir := parseInputRequired(t, askCall(t, g.URL, 1, "admin", nil, map[string]string{"Authorization": "Bearer secret-token"}))

	var parked []map[string]any
	adminGET(t, g, "/mcp_gateway/parked", &parked)
	if len(parked) != 1 || parked[0]["method"] != "tools/call" || parked[0]["name"] != "ask" ||
		parked[0]["upstream"] != rs.url || parked[0]["round"] != float64(1) || parked[0]["waiting_inputs"] != float64(1) ||
		parked[0]["holding"] != "stream" || parked[0]["resumable"] != false {
		t.Fatalf("parked = %v, want the one ask call in round 1, holding its stream", parked)
	}
	raw, _ := json.Marshal(parked)
	for _, secret := range []string{"secret-token", ir.RequestState, "admin"} {
		if strings.Contains(string(raw), secret) {
			t.Fatalf("the parked list leaks %q: %s", secret, raw)
		}
	}
	var ups []map[string]any
	adminGET(t, g, "/mcp_gateway/upstreams", &ups)
	if _, named := ups[0]["server"]; len(ups) != 1 || ups[0]["url"] != rs.url || ups[0]["era"] != "legacy" || ups[0]["healthy"] != true ||
		ups[0]["bridge_sessions"] != float64(1) || named {
		t.Fatalf("upstreams = %v, want the one legacy upstream, with no server (the block has none)", ups)
	}

	retry := map[string]any{"inputResponses": map[string]any{"elicitation-1": acceptAnswer}, "requestState": ir.RequestState}
	checkToolResult(t, askCall(t, g.URL, 2, "admin", retry, map[string]string{"Authorization": "Bearer secret-token"}), 2)
	adminGET(t, g, "/mcp_gateway/parked", &parked)
	if len(parked) != 0 {
		t.Fatalf("parked after completion = %v", parked)
	}
	var sessions map[string]map[string]int
	adminGET(t, g, "/mcp_gateway/sessions", &sessions)
	if st := sessions[rs.url]; st["open"] != 1 || st["idle"] != 1 {
		t.Fatalf("sessions = %v, want one idle session on %s", sessions, rs.url)
	}
}

// TestAdminUpstreamsFederated: the upstreams of a federated block are
// listed with the name of the server each belongs to, and the block's own
// merged endpoint (served in-process, never reached over the network) is
// neither listed nor in the metrics' upstream series.
func TestAdminUpstreamsFederated(t *testing.T) {
	t.Parallel()
	rs, mu := newRecordingServer(t), newModernUpstream(t)
	g := startGateway(t, "\t\tserver old {\n\t\t\tupstream "+rs.url+"\n\t\t}\n\t\tserver new {\n"+mu.block()+"\n\t\t}\n")
	// A listing asks both servers (the legacy one's era is learned).
	x := postRPC(t, g.URL, modernHeaders(modernVersion, "tools/list", ""), rpcBody(t, 1, "tools/list", map[string]any{"_meta": meta(modernVersion)}), 1)
	if x.Resp == nil || x.Resp.Error != nil || !strings.Contains(x.Raw, `"old__ask"`) || !strings.Contains(x.Raw, `"new__confirm"`) {
		t.Fatalf("tools/list = %s, want both servers' tools", x)
	}
	var ups []map[string]any
	adminGET(t, g, "/mcp_gateway/upstreams", &ups)
	want := map[string][2]string{rs.url: {"old", "legacy"}, mu.url: {"new", "modern"}}
	if len(ups) != len(want) {
		t.Fatalf("upstreams = %v, want the two servers' upstreams only", ups)
	}
	for _, u := range ups {
		w, ok := want[u["url"].(string)]
		if !ok || u["server"] != w[0] || u["era"] != w[1] || u["healthy"] != true {
			t.Fatalf("upstreams = %v, want %s of server old (legacy) and %s of server new (modern)", ups, rs.url, mu.url)
		}
	}
	// Nor do the upstream series of the metrics name the merged endpoint.
	if text := scrape(t, g); !strings.Contains(text, rs.url) || strings.Contains(text, "federated.mcp-gateway.invalid") {
		t.Fatalf("the metrics name the merged endpoint, or not the servers' upstreams:\n%s", text)
	}
}
