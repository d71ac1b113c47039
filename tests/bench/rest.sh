#!/usr/bin/env bash
# The REST face's scenario of BENCHMARKS.md (issue 29): a fast tool call
# (echo) made through the REST face (PUT <base>/tools/echo/calls/{new id},
# answered success) against the same tools/call made through the MCP
# endpoint by a 2026-07-28 client, in one run (targets in turn, A B A B …),
# in front of a legacy and a modern go-sdk upstream. The gateway has a
# state_key and Caddy's storage is file_system in a fresh folder: each
# REST call writes its record twice (running, then success) under a
# storage lock. Prints Markdown tables to paste into BENCHMARKS.md.
#
#   tests/bench/rest.sh                 # about 2 minutes
#   BENCH_D=5s BENCH_REPS=3 BENCH_C="1 16" tests/bench/rest.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

D=${BENCH_D:-3s}
REPS=${BENCH_REPS:-2}
CONC=${BENCH_C:-"1 8"}
P=${BENCH_PORT:-19400}
legacy_up=$((P + 1)) modern_up=$((P + 2)) gw=$((P + 11)) admin=$((P + 19))

out=tests/.out/bench-rest
source tests/bench/lib.sh
build_bench "$out"
rm -rf "$out/storage" && mkdir -p "$out/storage"

"$out/bench" serve -era legacy -addr "127.0.0.1:$legacy_up" >"$out/legacy.log" 2>&1 &
legacy_pid=$!
pids+=($legacy_pid)
"$out/bench" serve -era modern -addr "127.0.0.1:$modern_up" >"$out/modern.log" 2>&1 &
modern_pid=$!
pids+=($modern_pid)

key=$(head -c 32 /dev/urandom | base64)
cat >"$out/Caddyfile" <<EOC
{
	admin 127.0.0.1:$admin
	persist_config off
	grace_period 2s
	storage file_system $PWD/$out/storage
}
http://127.0.0.1:$gw {
	bind 127.0.0.1
	@legacy path /legacy/mcp /legacy/api/*
	mcp_gateway @legacy {
		upstream http://127.0.0.1:$legacy_up/mcp {
			era legacy
		}
		state_key $key
		rest /legacy/api
		rest_max_records_per_principal 10000000
		rest_max_bytes_per_principal 1TiB
		rest_max_records 10000000
		rest_max_bytes 1TiB
	}
	@modern path /modern/mcp /modern/api/*
	mcp_gateway @modern {
		upstream http://127.0.0.1:$modern_up/mcp {
			era modern
		}
		state_key $key
		rest /modern/api
		rest_max_records_per_principal 10000000
		rest_max_bytes_per_principal 1TiB
		rest_max_records 10000000
		rest_max_bytes 1TiB
	}
}
EOC
"$out/caddy" run --config "$out/Caddyfile" --adapter caddyfile >"$out/caddy.log" 2>&1 &
caddy_pid=$!
pids+=($caddy_pid)
waitport "$legacy_up" "$legacy_pid" "$out/legacy.log"
waitport "$modern_up" "$modern_pid" "$out/modern.log"
waitport "$gw" "$caddy_pid" "$out/caddy.log"

results="$out/results.txt"
: >"$results"
cpu="caddy=$caddy_pid,legacy=$legacy_pid,modern=$modern_pid"
base="http://127.0.0.1:$gw"
for c in $CONC; do
	for era in legacy modern; do
		"$out/bench" compare -scenario "REST fast call, $era upstream" -c "$c" -d "$D" -reps "$REPS" -cpu "$cpu" \
			-tool echo -args '{"text":"hi"}' \
			"rest=rest:$base/$era/api" "mcp-endpoint=modern:$base/$era/mcp" | tee -a "$results" >&2
	done
done
echo
compare_tables "$results" "caddy + upstream"
