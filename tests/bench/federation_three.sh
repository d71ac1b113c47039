#!/usr/bin/env bash
# One endpoint over three servers (`server` blocks) against the same
# endpoint over one of them (BENCHMARKS.md; federation.sh compares a
# federated block with a single-upstream one instead), in one Caddy,
# measured in one run (targets in turn, A B A B …):
#   - a tools/call of the same tool of the same server (a__echo) through a
#     block of three servers and through a block of that server alone;
#   - a modern tools/list (first page) through the same two blocks: three
#     servers' lists asked and merged against one server's; cold (the
#     upstreams' lists carry no ttlMs, so every list asks them), then cached
#     (through two more blocks in front of three more upstreams whose lists
#     say ttlMs 60000, public: the gateway answers from its merged page);
#   - memory per legacy (2025-11-25) client session: N sessions opened in a
#     fresh gateway, each calling one tool of each server, then left open;
#     RSS from /proc, heap in use after a forced GC, goroutines, open fds.
# The servers: a and c modern go-sdk upstreams (`bench serve -era modern`),
# b a legacy one (sessions; the forward bridge in front of it). Prints
# Markdown tables to paste into BENCHMARKS.md, and stops everything it
# started.
#
#   tests/bench/federation_three.sh             # about 3 minutes (5 with BENCH_REPS=3)
#   BENCH_D=5s BENCH_REPS=3 tests/bench/federation_three.sh
#   BENCH_SESSIONS=0 tests/bench/federation_three.sh  # no memory scenario
#
# Environment: BENCH_D (3s), BENCH_REPS (2), BENCH_C ("1 32"),
# BENCH_SESSIONS (legacy sessions opened, 2000; 0 skips), BENCH_PORT
# (first of the loopback ports used, 19600).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

D=${BENCH_D:-3s}
REPS=${BENCH_REPS:-2}
CONC=${BENCH_C:-"1 32"}
SESSIONS=${BENCH_SESSIONS:-2000}
P=${BENCH_PORT:-19600}
up_a=$((P + 1)) up_b=$((P + 2)) up_c=$((P + 3)) ttl_a=$((P + 4)) ttl_b=$((P + 5)) ttl_c=$((P + 6)) gw=$((P + 11)) admin=$((P + 19)) mem_gw=$((P + 21)) mem_admin=$((P + 29))

out=tests/.out/bench-federation-three
source tests/bench/lib.sh
build_bench "$out"
ulimit -n "$((4 * SESSIONS + 1000))" 2>/dev/null || ulimit -n "$(ulimit -Hn)"

"$out/bench" serve -era modern -addr "127.0.0.1:$up_a" >"$out/a.log" 2>&1 &
a_pid=$!
pids+=($a_pid)
"$out/bench" serve -era legacy -addr "127.0.0.1:$up_b" >"$out/b.log" 2>&1 &
b_pid=$!
pids+=($b_pid)
"$out/bench" serve -era modern -addr "127.0.0.1:$up_c" >"$out/c.log" 2>&1 &
c_pid=$!
pids+=($c_pid)
# The same three, their lists kept for a minute.
ttl_pids=()
for spec in "$ttl_a modern" "$ttl_b legacy" "$ttl_c modern"; do
	read -r port era <<<"$spec"
	"$out/bench" serve -era "$era" -list-ttl 60s -addr "127.0.0.1:$port" >"$out/ttl-$port.log" 2>&1 &
	ttl_pids+=($!)
	pids+=($!)
done

key=$(head -c 32 /dev/urandom | base64)
# servers N [ttl]: the server blocks of the first N of a, b, c (with ttl,
# in front of the upstreams whose lists say ttlMs).
servers() {
	local n=$1 name port era
	local specs=("a $up_a modern" "b $up_b legacy" "c $up_c modern")
	[[ "${2:-}" == ttl ]] && specs=("a $ttl_a modern" "b $ttl_b legacy" "c $ttl_c modern")
	for spec in "${specs[@]}"; do
		((n-- > 0)) || break
		read -r name port era <<<"$spec"
		printf '\t\tserver %s {\n\t\t\tupstream http://127.0.0.1:%s/mcp {\n\t\t\t\tera %s\n\t\t\t}\n\t\t}\n' "$name" "$port" "$era"
	done
}
cat >"$out/Caddyfile" <<EOC
{
	admin 127.0.0.1:$admin
	persist_config off
	grace_period 2s
}
http://127.0.0.1:$gw {
	bind 127.0.0.1
	mcp_gateway /three/mcp {
		state_key $key
$(servers 3)
	}
	mcp_gateway /one/mcp {
		state_key $key
$(servers 1)
	}
	mcp_gateway /three-ttl/mcp {
		state_key $key
$(servers 3 ttl)
	}
	mcp_gateway /one-ttl/mcp {
		state_key $key
$(servers 1 ttl)
	}
}
EOC
"$out/caddy" run --config "$out/Caddyfile" --adapter caddyfile >"$out/caddy.log" 2>&1 &
caddy_pid=$!
pids+=($caddy_pid)
waitport "$up_a" "$a_pid" "$out/a.log"
waitport "$up_b" "$b_pid" "$out/b.log"
waitport "$up_c" "$c_pid" "$out/c.log"
for port in $ttl_a $ttl_b $ttl_c; do waitport "$port"; done
waitport "$gw" "$caddy_pid" "$out/caddy.log"

three="http://127.0.0.1:$gw/three/mcp" one="http://127.0.0.1:$gw/one/mcp"
three_ttl="http://127.0.0.1:$gw/three-ttl/mcp" one_ttl="http://127.0.0.1:$gw/one-ttl/mcp"
results="$out/results.txt"
: >"$results"
cpu="caddy=$caddy_pid,a=$a_pid,b=$b_pid,c=$c_pid"
cpu_ttl="caddy=$caddy_pid,a=${ttl_pids[0]},b=${ttl_pids[1]},c=${ttl_pids[2]}"
for c in $CONC; do
	"$out/bench" compare -scenario "tools/call a__echo" -c "$c" -d "$D" -reps "$REPS" -cpu "$cpu" \
		-tool a__echo -args '{"text":"hi"}' \
		"three-servers=modern:$three" "one-server=modern:$one" | tee -a "$results" >&2
	"$out/bench" compare -scenario "tools/list, cold" -c "$c" -d "$D" -reps "$REPS" -cpu "$cpu" -method tools/list \
		"three-servers=modern:$three" "one-server=modern:$one" | tee -a "$results" >&2
	"$out/bench" compare -scenario "tools/list, cached" -c "$c" -d "$D" -reps "$REPS" -cpu "$cpu_ttl" -method tools/list \
		"three-servers=modern:$three_ttl" "one-server=modern:$one_ttl" | tee -a "$results" >&2
done
kill "$caddy_pid" 2>/dev/null || true
wait "$caddy_pid" 2>/dev/null || true

# session_run LABEL N TOOLS: opens $SESSIONS legacy sessions calling TOOLS
# in a fresh gateway whose block has the first N servers, reads its memory
# before and after, stops it, and adds the table rows.
session_run() {
	local label=$1 n=$2 tools=$3
	cat >"$out/Caddyfile.sessions" <<EOC
{
	admin 127.0.0.1:$mem_admin
	persist_config off
	grace_period 2s
}
http://127.0.0.1:$mem_gw {
	bind 127.0.0.1
	mcp_gateway /mcp {
		state_key $key
		max_sessions_per_principal $((SESSIONS + 100))
$(servers "$n")
	}
}
EOC
	"$out/caddy" run --config "$out/Caddyfile.sessions" --adapter caddyfile >"$out/caddy-sessions.log" 2>&1 &
	local mem_pid=$!
	pids+=($mem_pid)
	waitport "$mem_gw" "$mem_pid" "$out/caddy-sessions.log"
	rss() { awk '/^VmRSS:/ {print $2}' "/proc/$mem_pid/status"; }
	fds() { find "/proc/$mem_pid/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l; }
	heap() {
		curl -s "http://127.0.0.1:$mem_admin/debug/pprof/heap?gc=1" >/dev/null
		curl -s "http://127.0.0.1:$mem_admin/debug/vars" | grep -o '"HeapInuse": *[0-9]*' | grep -o '[0-9]*$' | awk '{print int($1/1024)}' || true
	}
	goroutines() { curl -s "http://127.0.0.1:$mem_admin/debug/pprof/goroutine?debug=1" | head -1 | grep -o '[0-9]*$' || true; }
	# One session first, so the baseline holds what the first one allocates.
	"$out/bench" sessions -url "http://127.0.0.1:$mem_gw/mcp" -n 1 -c 1 -tools "$tools" >/dev/null
	local base_rss base_heap base_g base_fd peak_rss peak_heap peak_g peak_fd line
	base_rss=$(rss) base_heap=$(heap) base_g=$(goroutines) base_fd=$(fds)
	echo "$label: opening $SESSIONS legacy sessions calling $tools..." >&2
	line=$("$out/bench" sessions -url "http://127.0.0.1:$mem_gw/mcp" -n "$SESSIONS" -c 32 -tools "$tools")
	echo "$line" >&2
	sleep 1
	peak_rss=$(rss) peak_heap=$(heap) peak_g=$(goroutines) peak_fd=$(fds)
	kill "$mem_pid" 2>/dev/null || true
	wait "$mem_pid" 2>/dev/null || true
	per() { awk -v a="$1" -v b="$2" -v n="$SESSIONS" 'BEGIN {printf "%.1f", (a-b)/n}'; }
	memory+="| $label | baseline (after one session) | $base_rss KiB | $base_heap KiB | $base_g | $base_fd |
| $label | $SESSIONS sessions | $peak_rss KiB | $peak_heap KiB | $peak_g | $peak_fd |
| $label | per session | **$(per "$peak_rss" "$base_rss") KiB** | $(per "$peak_heap" "$base_heap") KiB | $(per "$peak_g" "$base_g") | $(per "$peak_fd" "$base_fd") |
"
	session_lines+="$label: $line
"
}

memory="" session_lines=""
if ((SESSIONS > 0)); then
	session_run "three servers" 3 a__echo,b__echo,c__echo
	session_run "one server" 1 a__echo
fi

echo
echo "## Results ($(date -u '+%Y-%m-%d %H:%M UTC'); $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); $(go version | cut -d' ' -f3); ${D} × ${REPS} per target, interleaved)"
echo
compare_tables "$results" "Caddy and the three upstreams"
if [[ -n "$memory" ]]; then
	echo
	echo "Memory, $SESSIONS legacy client sessions left open, each having called the tools named, in a fresh gateway each:"
	echo
	echo "| block | gateway | RSS | heap in use | goroutines | open fds |"
	echo "|---|---|---|---|---|---|"
	echo -n "$memory"
	echo
	echo -n "$session_lines"
fi
