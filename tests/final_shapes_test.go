package tests

// The shapes SEP-2575 took after it became final: clientInfo is optional in
// a request's _meta; the server names itself in every result's
// _meta["io.modelcontextprotocol/serverInfo"], and DiscoverResult has no
// serverInfo member any more. The forward bridge builds such results, and
// the reverse bridge reads them from modern servers of either shape.

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/tests/support"
)

// startClosableLegacy serves a go-sdk server named final-shapes-legacy 3.1
// (the legacy protocol, with sessions and their GET streams; its tools
// list may change, so it offers tools.listChanged) with two tools, echo
// and ask (which asks the client a question), on a port of its own, and
// returns its URL and a func that takes it down as a process that died
// would: its listener and every connection closed, a new connection
// refused.
func startClosableLegacy(t *testing.T) (url string, down func()) {
	t.Helper()
	server := mcp.NewServer(&mcp.Implementation{Name: "final-shapes-legacy", Version: "3.1"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "echo", Description: "Says hello."},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return support.Text("hello"), nil, nil
		})
	mcp.AddTool(server, &mcp.Tool{Name: "ask", Description: "Asks once."},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "Sure?",
				RequestedSchema: support.Form(map[string]any{"answer": map[string]any{"type": "string"}})})
			if err != nil {
				return nil, nil, err
			}
			return support.Text(res.Action), nil, nil
		})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String() + "/mcp", func() { _ = srv.Close() }
}

// noClientInfo is the request _meta of a client that sends no clientInfo,
// with caps as its capabilities.
func noClientInfo(caps map[string]any) map[string]any {
	return map[string]any{"io.modelcontextprotocol/protocolVersion": modernVersion, "io.modelcontextprotocol/clientCapabilities": caps}
}

// TestForwardFinalShapes: in front of a legacy server (the go-sdk), a
// modern client that sends no clientInfo is served, and what the gateway
// builds follows the final text: server/discover names the server in
// _meta only, and a tool's result and an input_required round carry the
// server's serverInfo in _meta (the round did not before).
func TestForwardFinalShapes(t *testing.T) {
	t.Parallel()
	up, _ := startClosableLegacy(t)
	g := startGateway(t, "\t\tupstream "+up+" {\n\t\t\tera legacy\n\t\t}")
	result := func(t *testing.T, x rpcExchange) map[string]any {
		t.Helper()
		if x.Status != http.StatusOK || x.Resp == nil || x.Resp.Error != nil {
			t.Fatalf("want a 200 result; %s", x)
		}
		var res map[string]any
		if err := json.Unmarshal(x.Resp.Result, &res); err != nil {
			t.Fatal(err)
		}
		meta, _ := res["_meta"].(map[string]any)
		if info, _ := meta["io.modelcontextprotocol/serverInfo"].(map[string]any); info["name"] != "final-shapes-legacy" || info["version"] != "3.1" {
			t.Errorf("_meta serverInfo %v, want the upstream's (final-shapes-legacy 3.1): %s", meta["io.modelcontextprotocol/serverInfo"], x.Resp.Result)
		}
		return res
	}

	t.Run("server/discover", func(t *testing.T) {
		res := result(t, postRPC(t, g.URL, modernHeaders(modernVersion, "server/discover", ""),
			rpcBody(t, 1, "server/discover", map[string]any{"_meta": noClientInfo(map[string]any{})}), 1))
		if _, ok := res["serverInfo"]; ok {
			t.Errorf("DiscoverResult has a serverInfo member, removed from the final text: %v", res)
		}
		if res["resultType"] != "complete" || res["capabilities"] == nil {
			t.Errorf("DiscoverResult %v lacks resultType complete or capabilities", res)
		}
		if v, _ := res["supportedVersions"].([]any); len(v) != 1 || v[0] != modernVersion {
			t.Errorf("supportedVersions %v, want [%s]", res["supportedVersions"], modernVersion)
		}
	})
	t.Run("tools/call", func(t *testing.T) {
		res := result(t, postRPC(t, g.URL, modernHeaders(modernVersion, "tools/call", "echo"),
			rpcBody(t, 2, "tools/call", map[string]any{"name": "echo", "arguments": map[string]any{}, "_meta": noClientInfo(map[string]any{})}), 2))
		if res["resultType"] != "complete" {
			t.Errorf("tools/call: %v", res)
		}
	})
	t.Run("input_required", func(t *testing.T) {
		caps := map[string]any{"elicitation": map[string]any{}}
		res := result(t, postRPC(t, g.URL, modernHeaders(modernVersion, "tools/call", "ask"),
			rpcBody(t, 3, "tools/call", map[string]any{"name": "ask", "arguments": map[string]any{}, "_meta": noClientInfo(caps)}), 3))
		if res["resultType"] != "input_required" || res["requestState"] == nil {
			t.Errorf("tools/call ask: %v, want an input_required round", res)
		}
	})
}

// TestReverseServerInfoShapes: a legacy client's InitializeResult names the
// modern server as its server/discover does, in _meta (the final text) or
// in the result's body (a server that lags: the listenUpstream fixture
// answering so, since no published modern server does any more).
func TestReverseServerInfoShapes(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]struct {
		up   func(*testing.T) *listenUpstream
		want string
	}{
		"_meta": {newListenUpstream, "listen-fixture"},
		"body":  {newLaggingListenUpstream, "listen-fixture-lagging"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			g := startGateway(t, c.up(t).block())
			_, res := initReverse(t, g.URL, "2025-11-25", `{}`, nil)
			if info, _ := res["serverInfo"].(map[string]any); info["name"] != c.want {
				t.Fatalf("InitializeResult serverInfo %v, want %s's", res["serverInfo"], c.want)
			}
		})
	}
}
