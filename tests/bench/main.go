// Command bench measures an MCP endpoint — a server directly, Caddy's plain
// reverse_proxy in front of it, or the gateway — with the same clients, so
// that the figures compare.
//
//	bench serve   -era legacy|modern -addr 127.0.0.1:9201 [-busy 300us] [-event-store] [-list-ttl 60s]
//	    the benchmarks' upstream: a go-sdk server with the tools echo {text}
//	    and ask {rounds} (in-line elicitations in the legacy era,
//	    input_required rounds in the modern era), and in the legacy era hold
//	    (runs until cancelled, for tasks); -busy makes each echo
//	    call spin that long first, to model a costlier server; -event-store
//	    (legacy era) numbers the SSE events and replays them on a GET with
//	    Last-Event-ID (resumable streams); -list-ttl makes its tools/list
//	    answers say ttlMs (public)
//	bench compare -scenario NAME -c 32 -d 3s -reps 2 -tool echo -args '{"text":"hi"}' \
//	        gateway=legacy:http://127.0.0.1:9300/mcp direct=legacy:http://127.0.0.1:9201/mcp
//	    runs the targets in turn (A B A B …) with c concurrent clients making
//	    calls back to back; prints calls per second, p50/p90/p99 latency and
//	    the first target's ratios against the others. With -method
//	    tools/list each call is a modern tools/list instead. A modern target may
//	    name several URLs, comma-separated (name=modern:URL_A,URL_B, e.g. two
//	    gateway instances sharing state_key): the k-th request of each call
//	    (k = 0 the first, 1 the first retry, …) goes to the (k mod n)-th URL,
//	    so with two URLs and one round every retry lands on the other
//	    instance. A legacy target has exactly one URL. A rest target
//	    (name=rest:http://host:port/api) names the gateway's REST base
//	    (option `rest`): a call is one PUT of a new call id (and its
//	    advances and polls, if any).
//	bench park    -url URL -n 10000 -c 32
//	    opens n modern calls that end in input_required and never retries them
//	bench tasks   -url URL -n 3000 -c 32 [-tool hold]
//	    opens n modern calls declaring the Tasks extension that become tasks
//	    (the gateway's task policy) and never polls them
//	bench sessions -url URL -n 1000 -c 32 -tools a__echo,b__echo
//	    opens n legacy sessions, calls each tool once in each, and leaves
//	    them open
//	bench otlp    -addr 127.0.0.1:4318
//	    an OTLP/HTTP traces receiver that decodes and counts the spans
//	    exported to it (GET /count): the tracing benchmark's
//	bench tokens  -addr 127.0.0.1:9400 [-client-id gateway -client-secret gateway-secret]
//	    an RFC 8693 token endpoint (POST /token, the tests' fixture) that
//	    counts its exchanges (GET /count?audience=A&subject=S): the
//	    exchange benchmark's
//
// A legacy client opens a 2025-11-25 session (initialize, initialized) and
// answers in-line elicitations by POSTing their responses; a modern client
// sends stateless 2026-07-28 calls with _meta and the mirrored headers and
// answers input_required by retrying with inputResponses and requestState.
// A call's latency runs from its first request to its result, over every
// round. tests/bench/run.sh runs every scenario of BENCHMARKS.md;
// tests/bench/fleet.sh the fleet one, two gateway instances in front of a
// go-sdk and a TypeScript SDK server, with retries landing on the other.
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: bench serve|compare|park|tasks|sessions|otlp|tokens [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "serve":
		err = serve(os.Args[2:])
	case "compare":
		err = compare(os.Args[2:])
	case "park":
		err = park(os.Args[2:])
	case "tasks":
		err = tasks(os.Args[2:])
	case "sessions":
		err = sessions(os.Args[2:])
	case "otlp":
		err = otlp(os.Args[2:])
	case "tokens":
		err = tokens(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q: serve, compare, park, tasks, sessions, otlp or tokens", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}
