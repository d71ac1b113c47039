package tests

// accept_client_quirks end to end: the header bugs of known clients
// repaired at the front door, through a modern upstream (pass-through),
// through the forward bridge and in a federated block of both, against
// the go-sdk everything-server in both eras; refused with -32020 without
// the option, and still refused when a header disagrees with the body
// after the repair.

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

func TestClientQuirks(t *testing.T) {
	t.Parallel()
	modern, legacy := startGoEverything(t, true), startGoEverything(t, false)
	block := func(path, upstream, era, quirks string) string {
		return fmt.Sprintf("\tmcp_gateway %s {\n\t\tupstream %s {\n\t\t\tera %s\n\t\t}\n%s\t}\n", path, upstream, era, quirks)
	}
	const both = "\t\taccept_client_quirks protocol_header_mismatch missing_method_header\n"
	// /mcp passes through to the modern server, /fwd bridges to the
	// legacy one; /off is /mcp without the option; /fed is a federated
	// block of both (new__ and old__ names).
	fed := fmt.Sprintf("\tmcp_gateway /fed {\n%s\t\tserver new {\n\t\t\tupstream %s {\n\t\t\t\tera modern\n\t\t\t}\n\t\t}\n"+
		"\t\tserver old {\n\t\t\tupstream %s {\n\t\t\t\tera legacy\n\t\t\t}\n\t\t}\n\t}\n", both, modern, legacy)
	g := startGatewayWith(t, "\tlog {\n\t\tlevel DEBUG\n\t}",
		block("/fwd", legacy, "legacy", both)+block("/off", modern, "modern", "")+fed,
		fmt.Sprintf("\t\tupstream %s {\n\t\t\tera modern\n\t\t}\n%s", modern, both))
	base := strings.TrimSuffix(g.URL, "/mcp")
	repaired, bridged, off, federated := g.URL, base+"/fwd", base+"/off", base+"/fed"

	call := func(id int, tool, args string) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"_meta":{`+
			`"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},`+
			`"io.modelcontextprotocol/clientInfo":{"name":"claude-ai","version":"0.1.0"}},"name":%q,"arguments":%s}}`, id, tool, args)
	}
	// Claude's connectors: a legacy MCP-Protocol-Version on a modern body.
	claude := map[string]string{"MCP-Protocol-Version": "2025-11-25", "Mcp-Method": "tools/call", "Mcp-Name": "test_simple_text"}
	// A stdio-to-HTTP bridge: no Mcp-Method, no Mcp-Name.
	bare := map[string]string{"MCP-Protocol-Version": "2026-07-28"}
	const simple = "This is a simple text response for testing."

	id := 0
	for _, c := range []struct{ name, url string }{{"modern upstream", repaired}, {"forward bridge", bridged}} {
		for _, q := range []struct {
			name string
			hdr  map[string]string
		}{{"protocol_header_mismatch", claude}, {"missing_method_header", bare}} {
			id++
			if text := checkToolResult(t, postRPC(t, c.url, q.hdr, call(id, "test_simple_text", "{}"), id), id); text != simple {
				t.Errorf("%s, %s: result %q", c.name, q.name, text)
			}
		}
	}
	for _, q := range []map[string]string{claude, bare} {
		id++
		checkRPCError(t, postRPC(t, off, q, call(id, "test_simple_text", "{}"), id), http.StatusBadRequest, -32020, id)
	}

	// No repair makes a header agree that disagrees with the body: the
	// method Claude's header names, a name the bridge's header names.
	id++
	wrongMethod := map[string]string{"MCP-Protocol-Version": "2025-11-25", "Mcp-Method": "tools/list", "Mcp-Name": "test_simple_text"}
	checkRPCError(t, postRPC(t, repaired, wrongMethod, call(id, "test_simple_text", "{}"), id), http.StatusBadRequest, -32020, id)
	id++
	wrongName := map[string]string{"MCP-Protocol-Version": "2026-07-28", "Mcp-Name": "test_x_mcp_header"}
	checkRPCError(t, postRPC(t, repaired, wrongName, call(id, "test_simple_text", "{}"), id), http.StatusBadRequest, -32020, id)
	// A body that is not 2026-07-28 vouches for no header.
	id++
	future := strings.Replace(call(id, "test_simple_text", "{}"), `"2026-07-28"`, `"2027-01-01"`, 1)
	checkRPCError(t, postRPC(t, repaired, claude, future, id), http.StatusBadRequest, -32020, id)

	// The modern server refuses a call whose annotated argument has no
	// Mcp-Param-* header (-32020): the gateway fills it from the server's
	// tools/list, Base64-encoded when needed; the legacy server needs none.
	for _, c := range []struct{ name, url, region string }{
		{"modern upstream", repaired, "eu-west"}, {"modern upstream", repaired, "日本 "}, {"forward bridge", bridged, "eu-west"},
	} {
		id++
		args := fmt.Sprintf(`{"region":%q,"level":2}`, c.region)
		if text := checkToolResult(t, postRPC(t, c.url, bare, call(id, "test_x_mcp_header", args), id), id); text != "region="+c.region {
			t.Errorf("%s, no Mcp-Param-Region: result %q", c.name, text)
		}
	}
	// A federated block repairs at its own front door, before it routes
	// by name.
	id++
	fedClaude := map[string]string{"MCP-Protocol-Version": "2025-11-25", "Mcp-Method": "tools/call", "Mcp-Name": "old__test_simple_text"}
	if text := checkToolResult(t, postRPC(t, federated, fedClaude, call(id, "old__test_simple_text", "{}"), id), id); text != simple {
		t.Errorf("federated block, protocol_header_mismatch: result %q", text)
	}
	id++
	if text := checkToolResult(t, postRPC(t, federated, bare, call(id, "new__test_x_mcp_header", `{"region":"eu-west"}`), id), id); text != "region=eu-west" {
		t.Errorf("federated block, missing_method_header: result %q", text)
	}
	// Without the option, the gateway refuses the call before the server
	// could.
	id++
	checkRPCError(t, postRPC(t, off, bare, call(id, "test_x_mcp_header", `{"region":"eu-west"}`), id), http.StatusBadRequest, -32020, id)

	// Counted when made: the four calls that passed, the two refused for
	// a header still wrong, the three calls to test_x_mcp_header, the
	// federated block's two.
	checkMetrics(t, scrape(t, g), map[string]float64{
		`caddy_mcp_gateway_client_quirks_repaired_total{repair="protocol_header_mismatch"}`: 4,
		`caddy_mcp_gateway_client_quirks_repaired_total{repair="missing_method_header"}`:    7,
	})
	logged := 0
	for line := range strings.SplitSeq(g.Log(), "\n") {
		if strings.Contains(line, `"msg":"client quirk repaired"`) && strings.Contains(line, `"client":"claude-ai"`) {
			logged++
		}
	}
	if logged != 11 {
		t.Errorf("%d debug lines naming the repair and the client, want 11", logged)
	}
}
