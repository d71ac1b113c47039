package tests

import (
	"fmt"
	"net/http"
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

// TestFederationFaces: the REST face of a federated block sees the merged
// catalog, and its calls reach every server, an elicitation round of a
// legacy one included.
func TestFederationFaces(t *testing.T) {
	t.Parallel()
	block := federatedBlock(t) + "\t\trest /api\n"
	site := "\troute /api/* {\n\t\tmcp_gateway {\n" + block + "\n\t\t}\n\t}"
	g := startGatewayWith(t, "\tstorage file_system "+t.TempDir(), site, block)
	base := fmt.Sprintf("http://127.0.0.1:%d/api", g.Port)
	alice := map[string]string{"Authorization": "Bearer alice"}
	list := restDo(t, "GET", base+"/tools", alice, "")
	for _, name := range []string{`"ts__echo"`, `"go__test_simple_text"`, `"book_table"`} {
		if list.Status != http.StatusOK || !strings.Contains(string(list.Body), name) {
			t.Fatalf("REST tools list lacks %s: %s", name, list)
		}
	}
	echo := wantCall(t, restDo(t, "PUT", base+"/tools/ts__echo/calls/e1", withHeaders(alice, "Idempotency-Key", "k"), `{"arguments":{"message":"hi"}}`),
		http.StatusCreated, "success")
	if !strings.Contains(string(echo.Result), "Echo: hi") {
		t.Fatalf("ts__echo: %+v", echo)
	}
	simple := wantCall(t, restDo(t, "PUT", base+"/tools/go__test_simple_text/calls/s1", withHeaders(alice, "Idempotency-Key", "k"), `{"arguments":{}}`),
		http.StatusCreated, "success")
	if !strings.Contains(string(simple.Result), "simple text") {
		t.Fatalf("go__test_simple_text: %+v", simple)
	}
	trip := wantCall(t, restDo(t, "PUT", base+"/tools/plan_trip/calls/p1", withHeaders(alice, "Idempotency-Key", "k"), `{"arguments":{}}`),
		http.StatusCreated, "awaitingElicitationResult")
	if len(trip.ElicitationRequest) == 0 {
		t.Fatalf("plan_trip: %+v", trip)
	}
	wantProblem(t, restDo(t, "PUT", base+"/tools/echo/calls/x1", withHeaders(alice, "Idempotency-Key", "k"), `{"arguments":{}}`), http.StatusNotFound)
}
