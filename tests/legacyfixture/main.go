// Command legacyfixture is a LEGACY MCP server (protocol 2025-11-25 and
// older: initialize, Mcp-Session-Id, server-to-client requests sent in-line
// on the SSE stream of the call that needs them) that exposes every tool,
// resource and prompt the MCP conformance suite calls, including the
// 2026-07-28 scenarios.
//
// It is a test fixture, written for this project because no real legacy
// server exposes the 2026 conformance fixtures in the in-line style: the
// reference servers answer the input-required scenarios with 2026
// InputRequiredResults, whereas this one asks its questions the 2025 way
// (elicitation/create, sampling/createMessage and roots/list sent on the
// tools/call or prompts/get response stream, answered by a POST of the JSON-RPC
// response). Put the gateway's forward bridge in front of it and run the suite
// with --requirements 2026-07-28 through the gateway; the bridge has to turn
// those in-line requests into input_required results and the client's
// inputResponses back into upstream responses.
//
//	go run ./tests/legacyfixture -addr 127.0.0.1:9102   # serves http://127.0.0.1:9102/mcp
//
// It listens on a loopback address only. It negotiates protocol versions up
// to 2025-11-25 only (go-sdk itself also speaks 2026-07-28; that is switched
// off), so a request carrying the 2026 per-request _meta envelope is refused
// with -32022: the gateway must speak plain 2025-11-25 upstream.
//
// Conventions the gateway relies on:
//
//   - Key hint. Every in-line request the fixture sends names the
//     inputRequests key it wants in
//     params._meta["io.github.caddy-mcp-gateway/inputKey"] (see [InputKeyMeta]),
//     e.g. "user_name" for test_input_required_result_elicitation. The keys are
//     those of the conformance suite's reference fixture, so the scenarios
//     that hard-code a key (user_name) pass through the bridge.
//   - Missing capability. test_missing_capability needs the client's sampling
//     capability. If the session's initialize capabilities lack it, the call
//     fails with the JSON-RPC error -32021 and
//     data {"requiredCapabilities": {"sampling": {}}} (a JSON-RPC error, not an
//     isError tool result); otherwise the tool samples in-line and returns the
//     answer.
//   - Resource not found. resources/read of an unknown URI fails with the
//     legacy error code -32002 and data {"uri": ...}; the gateway maps it to
//     the 2026 code -32602.
//
// Logging follows go-sdk's legacy rule: notifications/message is sent only
// after the client has set a level with logging/setLevel.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// legacyVersions are the protocol versions the fixture negotiates: everything
// go-sdk supports except the 2026 stateless protocol.
var legacyVersions = []string{"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}

func main() {
	addr := flag.String("addr", "127.0.0.1:9102", "loopback address to listen on (port 0 picks a free port)")
	flag.Parse()

	if err := checkLoopback(*addr); err != nil {
		log.Fatalf("legacyfixture: %v", err)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	server := newServer()
	go updateWatchedResource(ctx, server)

	// Sessionful (not Stateless): this is the legacy protocol. The event
	// store lets a client resume a broken stream with Last-Event-ID.
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server },
		&mcp.StreamableHTTPOptions{EventStore: mcp.NewMemoryEventStore(nil)})
	mux := http.NewServeMux()
	mux.Handle("/mcp", handler)

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatalf("legacyfixture: %v", err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		<-ctx.Done()
		// Calls parked on an unanswered in-line request never finish on
		// their own: give them a moment, then drop them.
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		srv.Shutdown(shutdownCtx)
	}()

	log.Printf("legacyfixture: MCP endpoint http://%s/mcp", ln.Addr())
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		log.Fatalf("legacyfixture: %v", err)
	}
	<-stopped
}

// newServer builds the MCP server with all fixtures registered.
func newServer() *mcp.Server {
	server := mcp.NewServer(&mcp.Implementation{Name: "caddy-mcp-gateway-legacyfixture", Version: "1.0.0"},
		&mcp.ServerOptions{
			SupportedProtocolVersions: legacyVersions,
			CompletionHandler:         complete,
			SubscribeHandler:          func(context.Context, *mcp.SubscribeRequest) error { return nil },
			UnsubscribeHandler:        func(context.Context, *mcp.UnsubscribeRequest) error { return nil },
		})
	registerTools(server)
	registerInputTools(server)
	registerTaskTools(server)
	registerResources(server)
	registerPrompts(server)
	server.AddReceivingMiddleware(legacyResourceNotFound)
	return server
}

// checkLoopback refuses to listen anywhere but on a loopback address.
func checkLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("bad -addr %q: %v", addr, err)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("-addr %q: the fixture listens on a loopback address only", addr)
}
