// Command demoserver is a small legacy MCP server (protocol 2025-11-25, with
// sessions) to put behind the gateway. It is the demo upstream of the
// README's run command, and the tests use it as a real sessionful upstream.
//
//	go run ./tests/demoserver -addr 127.0.0.1:9101   # serves http://127.0.0.1:9101/mcp
//	go run ./tests/demoserver -event-store=false    # streams that cannot be resumed
//
// Its tools show the server-to-client requests that only the legacy protocol
// can send in the middle of a tool call:
//
//   - greet {name}: plain text, no questions asked.
//   - book_table {restaurant}: asks the user for party size and date
//     (elicitation), then confirms the booking.
//   - summarize {text}: asks the client's model for a summary (sampling) and
//     returns its answer.
//   - plan_trip {}: asks twice in a row, first for a destination, then for
//     dates.
//   - order_taxi {to}: asks when to pick the user up, on the session's
//     standalone GET stream rather than on the call's own stream (as a
//     server does when the question comes from work not tied to the
//     request), then books the taxi. A client that has not opened the GET
//     stream gets the question once it does.
//
// The questions travel on the tools/call response stream (order_taxi's on
// the GET stream), so a modern client can only answer them through a gateway
// that turns them into input_required results.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/tests/support"
)

type greetArgs struct {
	Name string `json:"name" jsonschema:"who to greet"`
}

type bookTableArgs struct {
	Restaurant string `json:"restaurant" jsonschema:"the restaurant to book"`
}

type summarizeArgs struct {
	Text string `json:"text" jsonschema:"the text to summarize"`
}

type planTripArgs struct{}

type orderTaxiArgs struct {
	To string `json:"to" jsonschema:"where the taxi goes"`
}

func main() {
	addr := flag.String("addr", "127.0.0.1:9101", "address to listen on")
	eventStore := flag.Bool("event-store", true, "keep the SSE events in a go-sdk MemoryEventStore, so they carry ids and a GET with Last-Event-ID replays what followed (resumable streams); false: events without ids, streams that cannot be resumed")
	flag.Parse()

	server := mcp.NewServer(&mcp.Implementation{Name: "caddy-mcp-gateway-demo", Version: "1.0.0"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "greet", Description: "Say hello."}, greet)
	mcp.AddTool(server, &mcp.Tool{Name: "book_table", Description: "Book a table; asks for party size and date."}, bookTable)
	mcp.AddTool(server, &mcp.Tool{Name: "summarize", Description: "Summarize text with the client's model."}, summarize)
	mcp.AddTool(server, &mcp.Tool{Name: "plan_trip", Description: "Plan a trip; asks for a destination, then dates."}, planTrip)
	mcp.AddTool(server, &mcp.Tool{Name: "order_taxi", Description: "Order a taxi; asks for the pick-up time on the session's GET stream."}, orderTaxi)

	// Sessionful (not Stateless): this is the legacy protocol the gateway
	// fronts. The event store lets a client resume a broken stream with
	// Last-Event-ID.
	opts := &mcp.StreamableHTTPOptions{}
	if *eventStore {
		opts.EventStore = mcp.NewMemoryEventStore(nil)
	}
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, opts)
	mux := http.NewServeMux()
	mux.Handle("/mcp", handler)

	log.Printf("demoserver: MCP endpoint http://%s/mcp (event store %t)", *addr, *eventStore)
	log.Fatal(http.ListenAndServe(*addr, mux))
}

func greet(_ context.Context, _ *mcp.CallToolRequest, in greetArgs) (*mcp.CallToolResult, any, error) {
	return support.Text(fmt.Sprintf("Hello, %s!", in.Name)), nil, nil
}

func bookTable(ctx context.Context, req *mcp.CallToolRequest, in bookTableArgs) (*mcp.CallToolResult, any, error) {
	// Elicit with the call's ctx, so the question goes out on this call's stream.
	answer, err := ask(ctx, req, "How many people, and when?", map[string]any{
		"partySize": map[string]any{"type": "integer", "title": "Party size", "minimum": 1, "maximum": 20},
		"date":      map[string]any{"type": "string", "title": "Date", "format": "date"},
	})
	if err != nil || answer == nil {
		return declined("Nothing booked", err)
	}
	return support.Text(fmt.Sprintf("Booked %s for %v on %v.", in.Restaurant, answer["partySize"], answer["date"])), nil, nil
}

func summarize(ctx context.Context, req *mcp.CallToolRequest, in summarizeArgs) (*mcp.CallToolResult, any, error) {
	res, err := req.Session.CreateMessage(ctx, &mcp.CreateMessageParams{
		MaxTokens:    200,
		SystemPrompt: "Summarize the user's text in one sentence.",
		Messages:     []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: in.Text}}},
	})
	if err != nil {
		return nil, nil, fmt.Errorf("sampling: %w", err)
	}
	summary, ok := res.Content.(*mcp.TextContent)
	if !ok {
		return nil, nil, fmt.Errorf("sampling: expected text content, got %T", res.Content)
	}
	return support.Text(fmt.Sprintf("Summary (%s): %s", res.Model, summary.Text)), nil, nil
}

func planTrip(ctx context.Context, req *mcp.CallToolRequest, _ planTripArgs) (*mcp.CallToolResult, any, error) {
	where, err := ask(ctx, req, "Where do you want to go?", map[string]any{
		"destination": map[string]any{"type": "string", "title": "Destination"},
	})
	if err != nil || where == nil {
		return declined("No trip planned", err)
	}
	when, err := ask(ctx, req, fmt.Sprintf("When do you want to go to %v?", where["destination"]), map[string]any{
		"startDate": map[string]any{"type": "string", "title": "First day", "format": "date"},
		"endDate":   map[string]any{"type": "string", "title": "Last day", "format": "date"},
	})
	if err != nil || when == nil {
		return declined("No trip planned", err)
	}
	return support.Text(fmt.Sprintf("Trip to %v from %v to %v.", where["destination"], when["startDate"], when["endDate"])), nil, nil
}

func orderTaxi(ctx context.Context, req *mcp.CallToolRequest, in orderTaxiArgs) (*mcp.CallToolResult, any, error) {
	// The go-sdk sends a request on the stream of the call whose context it
	// is made with; one made with a context that carries no call goes out on
	// the session's standalone GET stream. This one is cancelled with the
	// call all the same.
	aside, cancel := context.WithCancel(context.Background())
	defer cancel()
	defer context.AfterFunc(ctx, cancel)()
	when, err := ask(aside, req, fmt.Sprintf("When should the taxi to %s pick you up?", in.To), map[string]any{
		"time": map[string]any{"type": "string", "title": "Pick-up time"},
	})
	if err != nil || when == nil {
		return declined("No taxi ordered", err)
	}
	return support.Text(fmt.Sprintf("Taxi to %s ordered for %v.", in.To, when["time"])), nil, nil
}

// ask elicits a form whose fields are all required. It returns nil content
// when the user declines or cancels.
func ask(ctx context.Context, req *mcp.CallToolRequest, message string, fields map[string]any) (map[string]any, error) {
	res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: message, RequestedSchema: support.Form(fields)})
	if err != nil {
		return nil, fmt.Errorf("elicitation: %w", err)
	}
	if res.Action != "accept" {
		return nil, nil
	}
	return res.Content, nil
}

// declined turns a failed or refused elicitation into the tool's answer.
func declined(what string, err error) (*mcp.CallToolResult, any, error) {
	if err != nil {
		return nil, nil, err
	}
	return support.Text(what + ": the user declined."), nil, nil
}
