package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net/http"
	"strconv"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/tests/support"
)

// The upstream the benchmarks measure against: a plain go-sdk server, in one
// of the two eras, with one tool that asks nothing and one that asks N times.
// It is a real go-sdk server (the SDK's own HTTP transport and session
// handling); only the two tools are ours, because no published server has an
// elicitation tool with a chosen number of rounds in both eras.

type echoArgs struct {
	Text string `json:"text" jsonschema:"what to send back"`
}

type askArgs struct {
	Rounds int `json:"rounds" jsonschema:"how many elicitations to make, one after the other"`
}

// answerSchema is the form every question asks for: one string.
var answerSchema = support.Form(map[string]any{"answer": map[string]any{"type": "string"}})

func serve(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ExitOnError)
	addr := fs.String("addr", "127.0.0.1:9201", "address to listen on (the endpoint is /mcp)")
	era := fs.String("era", "legacy", "legacy: 2025-11-25 sessions, questions in-line; modern: stateless 2026-07-28, questions as input_required")
	busy := fs.Duration("busy", 0, "how long each echo call keeps the CPU busy before answering, to model a server that costs more per call")
	listTTL := fs.Duration("list-ttl", 0, "the ttlMs its tools/list answers carry (public), so that a client or gateway may keep them; 0: none")
	eventStore := fs.Bool("event-store", false, "legacy era: keep the SSE events in a go-sdk MemoryEventStore, so they carry ids and a GET with Last-Event-ID replays what followed (resumable streams)")
	_ = fs.Parse(args)

	server := mcp.NewServer(&mcp.Implementation{Name: "mcp-bench", Version: "1"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "echo", Description: "Returns its text."}, echo(*busy))
	opts := &mcp.StreamableHTTPOptions{}
	switch *era {
	case "legacy":
		mcp.AddTool(server, &mcp.Tool{Name: "ask", Description: "Asks `rounds` questions in-line."}, askInline)
		mcp.AddTool(server, &mcp.Tool{Name: "hold", Description: "Runs until cancelled (a task the gateway holds)."}, holdOn)
		if *eventStore {
			opts.EventStore = mcp.NewMemoryEventStore(nil)
		}
	case "modern":
		mcp.AddTool(server, &mcp.Tool{Name: "ask", Description: "Asks `rounds` questions, one input_required round each."}, askRounds)
		opts.Stateless = true
		if *eventStore {
			return fmt.Errorf("serve: -event-store needs -era legacy (a stateless server has no streams to resume)")
		}
	default:
		return fmt.Errorf("serve: -era must be legacy or modern, not %q", *era)
	}
	if *listTTL > 0 {
		server.AddReceivingMiddleware(listTTLMiddleware(*listTTL))
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, opts))
	log.Printf("bench server (%s, event store %t): http://%s/mcp", *era, opts.EventStore != nil, *addr)
	return http.ListenAndServe(*addr, mux)
}

// listTTLMiddleware sets ttl, public, on the server's tools/list answers.
func listTTLMiddleware(ttl time.Duration) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			res, err := next(ctx, method, req)
			if l, ok := res.(*mcp.ListToolsResult); ok {
				l.TTLMs, l.CacheScope = int(ttl.Milliseconds()), "public"
			}
			return res, err
		}
	}
}

// echo returns the echo tool, which spins for busy before answering.
func echo(busy time.Duration) mcp.ToolHandlerFor[echoArgs, any] {
	return func(_ context.Context, _ *mcp.CallToolRequest, in echoArgs) (*mcp.CallToolResult, any, error) {
		for start := time.Now(); time.Since(start) < busy; {
		}
		return support.Text(in.Text), nil, nil
	}
}

// holdOn runs until its call is cancelled.
func holdOn(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
	<-ctx.Done()
	return nil, nil, ctx.Err()
}

// askInline elicits in-line on the call's stream, rounds times.
func askInline(ctx context.Context, req *mcp.CallToolRequest, in askArgs) (*mcp.CallToolResult, any, error) {
	var last any
	for i := range in.Rounds {
		res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "Question " + strconv.Itoa(i), RequestedSchema: answerSchema})
		if err != nil {
			return nil, nil, fmt.Errorf("elicitation %d: %w", i, err)
		}
		if res.Action != "accept" {
			return support.Text("declined"), nil, nil
		}
		last = res.Content["answer"]
	}
	return support.Text(fmt.Sprintf("%d answers, last %v", in.Rounds, last)), nil, nil
}

// askRounds asks one question per input_required round; requestState counts
// the answers so far.
func askRounds(_ context.Context, req *mcp.CallToolRequest, in askArgs) (*mcp.CallToolResult, any, error) {
	got, _ := strconv.Atoi(req.Params.RequestState)
	key := "q" + strconv.Itoa(got)
	var last any
	if e, ok := req.Params.InputResponses[key].(*mcp.ElicitResult); ok && e.Action == "accept" {
		got++
		last = e.Content["answer"]
	}
	if got >= in.Rounds {
		return support.Text(fmt.Sprintf("%d answers, last %v", in.Rounds, last)), nil, nil
	}
	return &mcp.CallToolResult{
		InputRequests: mcp.InputRequestMap{"q" + strconv.Itoa(got): &mcp.ElicitParams{Message: "Question " + strconv.Itoa(got), RequestedSchema: answerSchema}},
		RequestState:  strconv.Itoa(got),
	}, nil, nil
}
