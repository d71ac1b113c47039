#!/usr/bin/env bash
# How fast one gateway ends abandoned resumable calls (issue 14): parks N
# calls in front of the bench's legacy server with an event store
# (park_ttl 15s), never retries them, and prints every 2 s the gauge of
# live places, the resumable_calls_total{event="ended"|"left"} counters and
# the upstream's RSS, until all N were ended (or 5 minutes).
#
#   tests/bench/run.sh ...            # builds tests/.out/bench/{bench,caddy} first
#   N=5000 tests/bench/abandon.sh
#
# Ports: BENCH_PORT (19550) .. +2, 127.0.0.1 only.
set -u
cd "$(dirname "$0")/../.."
B=tests/.out/bench
N=${N:-5000}
P=${BENCH_PORT:-19550}
up_port=$((P + 1)) gw_port=$((P + 2)) admin_port=$((P + 3))
out=$B/abandon
mkdir -p "$out"
"$B/bench" serve -era legacy -event-store -addr "127.0.0.1:$up_port" >"$out/up.log" 2>&1 &
up=$!
cat >"$out/Caddyfile" <<EOC
{
	admin 127.0.0.1:$admin_port
	persist_config off
	grace_period 2s
}
http://127.0.0.1:$gw_port {
	bind 127.0.0.1
	mcp_gateway /mcp {
		upstream http://127.0.0.1:$up_port/mcp {
			era legacy
		}
		park_ttl 15s
		max_parked $((N + 100))
		max_parked_per_principal $((N + 100))
		max_sessions_per_principal $((N + 100))
	}
}
EOC
"$B/caddy" run --config "$out/Caddyfile" --adapter caddyfile >"$out/caddy.log" 2>&1 &
gw=$!
trap 'kill $gw $up 2>/dev/null; wait' EXIT
for port in $up_port $gw_port; do
	for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.1; done
done
t0=$(date +%s)
"$B/bench" park -url "http://127.0.0.1:$gw_port/mcp" -n "$N" -c 32
for _ in $(seq 150); do
	m=$(curl -s "127.0.0.1:$admin_port/metrics" | grep -E '^caddy_mcp_gateway_resumable_(calls_total\{event="(ended|left)"\}|parked_calls)' | tr '\n' ' ')
	echo "+$(($(date +%s) - t0))s $m upstream_rss_kib=$(awk '/^VmRSS/{print $2}' "/proc/$up/status")"
	echo "$m" | grep -q "ended\"} $N" && break
	sleep 2
done
