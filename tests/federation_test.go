package tests

import (
	"strings"
	"testing"
)

// federatedBlock is a block over three real servers of both eras: the
// go-sdk everything server (2026-07-28, stateless), the TypeScript
// server-everything (2025-11-25) and the demo server (legacy, asking
// in-line).
func federatedBlock(t *testing.T) string {
	t.Helper()
	goURL, tsURL, demoURL := startGoEverything(t, true), startServerEverything(t), startDemoServer(t)
	return `		state_key ` + testKey(fleetKeyByte) + `
		server go {
			upstream ` + goURL + ` {
				era modern
			}
		}
		server ts {
			upstream ` + tsURL + `
		}
		server demo {
			upstream ` + demoURL + `
			prefix ""
		}
`
}

func TestFederationSmoke(t *testing.T) {
	t.Parallel()
	g := startGateway(t, federatedBlock(t))
	x := postRPC(t, g.URL, modernHeaders(modernVersion, "tools/list", ""), rpcBody(t, 1, "tools/list", map[string]any{"_meta": meta(modernVersion)}), 1)
	t.Logf("tools/list: %d %s", x.Status, x.Raw)
	x = postRPC(t, g.URL, modernHeaders(modernVersion, "server/discover", ""), rpcBody(t, 2, "server/discover", map[string]any{"_meta": meta(modernVersion)}), 2)
	t.Logf("discover: %d %s", x.Status, x.Raw)
	for i, tool := range []string{"greet", "ts__echo", "go__test_simple_text"} {
		x = postRPC(t, g.URL, modernHeaders(modernVersion, "tools/call", tool), rpcBody(t, 10+i, "tools/call", map[string]any{"name": tool, "arguments": map[string]any{"name": "x", "message": "hi"}, "_meta": meta(modernVersion)}), 10+i)
		t.Logf("%s: %d %s", tool, x.Status, x.Raw)
		if !strings.Contains(x.Raw, `"result"`) {
			t.Errorf("%s: no result", tool)
		}
	}
}

func TestFederationLegacySmoke(t *testing.T) {
	t.Parallel()
	g := startGateway(t, federatedBlock(t))
	for _, c := range []struct{ client, tool, args string }{
		{"legacy-client.mjs", "book_table", `{}`},
		{"legacy-client.mjs", "ts__echo", `{"message":"hi"}`},
		{"legacy-client.mjs", "go__test_elicitation", `{"message":"who?"}`},
		{"modern-client.mjs", "book_table", `{}`},
		{"modern-client.mjs", "go__test_elicitation", `{"message":"who?"}`},
	} {
		got := runClient(t, c.client, g.URL, c.tool, c.args)
		t.Logf("%s %s: %v", c.client, c.tool, got)
	}
}
