#!/usr/bin/env bash
# Every scenario of BENCHMARKS.md in one command: builds Caddy (with the
# mcp_gateway module and the standard modules) and tests/bench, starts on
# loopback a legacy and a modern go-sdk upstream, one Caddy serving the
# gateway and a plain reverse_proxy (in front of each), another with a
# gateway whose every round waits a gather_window of 200us (gather always;
# by default a tool that asks one question at a time waits no window after
# its first round), measures each scenario's targets in turn (A B A B …),
# then parks calls in a fresh gateway and reads its memory. Prints Markdown
# tables to paste into BENCHMARKS.md, and stops everything it started.
#
#   tests/bench/run.sh                      # about 10 minutes (12 with BENCH_REPS=3)
#   BENCH_D=5s BENCH_REPS=3 tests/bench/run.sh   # longer, steadier
#   BENCH_PARKED=0 tests/bench/run.sh       # skip the memory scenario
#   BENCH_THROUGHPUT=0 tests/bench/run.sh   # only the memory scenario
#   BENCH_EVENT_STORE=1 tests/bench/run.sh  # the legacy upstream resumable (event store)
#   BENCH_TASKS=0 tests/bench/run.sh        # skip the held-tasks memory scenario
#
# Environment: BENCH_D (measured time per target and repetition, 3s),
# BENCH_REPS (2), BENCH_PARKED (calls to park, 10000), BENCH_PARK_TTL (90s),
# BENCH_PORT (first of the loopback ports used, 19200),
# BENCH_PARK_GET_STREAM_OFF (0: park only with the default options, not
# again with get_stream off), BENCH_EVENT_STORE (1: the legacy upstream
# keeps its SSE events in a go-sdk event store, so they carry ids and
# streams can be resumed with Last-Event-ID; 0, default), BENCH_TASKS
# (calls made tasks and held, 3000; 0 skips), BENCH_TASK_TTL (60s).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

D=${BENCH_D:-3s}
REPS=${BENCH_REPS:-2}
PARKED=${BENCH_PARKED:-10000}
PARK_TTL=${BENCH_PARK_TTL:-90s}
TASKS=${BENCH_TASKS:-3000}
TASK_TTL=${BENCH_TASK_TTL:-60s}
P=${BENCH_PORT:-19200}
legacy_up=$((P + 1)) modern_up=$((P + 2)) gw_legacy=$((P + 11)) gw_modern=$((P + 12)) plain=$((P + 13)) gw_quick=$((P + 14)) plain_modern=$((P + 15)) admin=$((P + 19)) quick_admin=$((P + 18))
park_gw=$((P + 21)) park_admin=$((P + 29))

out=tests/.out/bench
source tests/bench/lib.sh
build_bench "$out"

# Readings of the gateway whose admin endpoint is $park_admin (the
# memory scenarios run one at a time there), and of a process by pid.
rss_of() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }
fds_of() { find "/proc/$1/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l; }
heap() {
	curl -s "http://127.0.0.1:$park_admin/debug/pprof/heap?gc=1" >/dev/null
	curl -s "http://127.0.0.1:$park_admin/debug/vars" | grep -o '"HeapInuse": *[0-9]*' | grep -o '[0-9]*$' | awk '{print int($1/1024)}' || true
}
goroutines() { curl -s "http://127.0.0.1:$park_admin/debug/pprof/goroutine?debug=1" | head -1 | grep -o '[0-9]*$' || true; }

# A parked call holds two upstream connections (its call stream and its
# session's GET stream), in the gateway and in the upstream: raise the
# open-file limit, and park fewer calls if the hard limit is lower. In
# front of a resumable upstream (BENCH_EVENT_STORE=1) a parked call holds
# none (a held task still does).
parked_fds=$PARKED
[[ "${BENCH_EVENT_STORE:-0}" == 1 ]] && parked_fds=0
most=$((parked_fds > TASKS ? parked_fds : TASKS))
ulimit -n "$((2 * most + 1000))" 2>/dev/null || ulimit -n "$(ulimit -Hn)"
if ((parked_fds > 0 && PARKED > ($(ulimit -n) - 1000) / 2)); then
	PARKED=$((($(ulimit -n) - 1000) / 2))
	echo "the open-file limit is $(ulimit -n): parking $PARKED calls" >&2
fi

legacy_flags=()
[[ "${BENCH_EVENT_STORE:-0}" == 1 ]] && legacy_flags+=(-event-store)
"$out/bench" serve -era legacy "${legacy_flags[@]}" -addr "127.0.0.1:$legacy_up" >"$out/legacy.log" 2>&1 &
legacy_pid=$!
pids+=($legacy_pid)
"$out/bench" serve -era modern -addr "127.0.0.1:$modern_up" >"$out/modern.log" 2>&1 &
modern_pid=$!
pids+=($modern_pid)

cat >"$out/Caddyfile" <<EOC
{
	admin 127.0.0.1:$admin
	persist_config off
	grace_period 2s
}
http://127.0.0.1:$gw_legacy {
	bind 127.0.0.1
	mcp_gateway /mcp {
		upstream http://127.0.0.1:$legacy_up/mcp {
			era legacy
		}
	}
}
http://127.0.0.1:$gw_modern {
	bind 127.0.0.1
	mcp_gateway /mcp {
		upstream http://127.0.0.1:$modern_up/mcp {
			era modern
		}
	}
}
http://127.0.0.1:$plain {
	bind 127.0.0.1
	reverse_proxy 127.0.0.1:$legacy_up
}
http://127.0.0.1:$plain_modern {
	bind 127.0.0.1
	reverse_proxy 127.0.0.1:$modern_up
}
EOC
"$out/caddy" run --config "$out/Caddyfile" --adapter caddyfile >"$out/caddy.log" 2>&1 &
caddy_pid=$!
pids+=($caddy_pid)
# The gateway whose every round waits runs in a process of its own, so that
# -cpu reports its CPU apart.
cat >"$out/Caddyfile.quick" <<EOC
{
	admin 127.0.0.1:$quick_admin
	persist_config off
	grace_period 2s
}
http://127.0.0.1:$gw_quick {
	bind 127.0.0.1
	mcp_gateway /mcp {
		upstream http://127.0.0.1:$legacy_up/mcp {
			era legacy
			gather always
		}
		gather_window 200us
	}
}
EOC
"$out/caddy" run --config "$out/Caddyfile.quick" --adapter caddyfile >"$out/caddy-quick.log" 2>&1 &
quick_pid=$!
pids+=($quick_pid)
for port in $legacy_up $modern_up $gw_legacy $gw_modern $gw_quick $plain $plain_modern; do waitport "$port"; done

L="http://127.0.0.1:$legacy_up/mcp" M="http://127.0.0.1:$modern_up/mcp"
GL="http://127.0.0.1:$gw_legacy/mcp" GM="http://127.0.0.1:$gw_modern/mcp" RP="http://127.0.0.1:$plain/mcp"
RPM="http://127.0.0.1:$plain_modern/mcp"
GQ="http://127.0.0.1:$gw_quick/mcp" # the same gateway, every round waiting 200us

results="$out/results.txt"
: >"$results"
# The CPU time per call of every server process is reported with the figures.
cpu="caddy=$caddy_pid,caddy-200us=$quick_pid,legacy=$legacy_pid,modern=$modern_pid"
cmp() { "$out/bench" compare -d "$D" -reps "$REPS" -cpu "$cpu" "$@" | tee -a "$results" >&2; }

echo "measuring (each line: one scenario at one concurrency)..." >&2
for c in 1 32; do
	[[ "${BENCH_THROUGHPUT:-1}" == 0 ]] && break
	cmp -scenario "legacy pass-through" -c "$c" gateway=legacy:"$GL" reverse_proxy=legacy:"$RP" direct=legacy:"$L"
	cmp -scenario "modern pass-through" -c "$c" gateway=modern:"$GM" reverse_proxy=modern:"$RPM" direct=modern:"$M"
	# legacy-via-reverse_proxy: the legacy client through Caddy's plain
	# reverse_proxy, what any proxy hop adds to the direct call.
	cmp -scenario "forward bridge, no input" -c "$c" modern-via-gateway=modern:"$GL" legacy-direct=legacy:"$L" legacy-via-reverse_proxy=legacy:"$RP"
	cmp -scenario "forward bridge, 1 MRTR round" -c "$c" -tool ask -args '{"rounds":1}' modern-via-gateway=modern:"$GL" legacy-direct-inline=legacy:"$L" legacy-via-reverse_proxy-inline=legacy:"$RP"
	cmp -scenario "forward bridge, 1 MRTR round, gather always, gather_window 200us" -c "$c" -tool ask -args '{"rounds":1}' modern-via-gateway=modern:"$GQ" legacy-direct-inline=legacy:"$L"
	cmp -scenario "forward bridge, 3 MRTR rounds" -c "$c" -tool ask -args '{"rounds":3}' modern-via-gateway=modern:"$GL" legacy-direct-inline=legacy:"$L" legacy-via-reverse_proxy-inline=legacy:"$RP"
done

# park_run LABEL UPSTREAM_OPTION: parks $PARKED calls in a fresh gateway
# whose upstream block adds UPSTREAM_OPTION, reads its memory before, at
# the peak and after the calls expired, stops it, and appends table rows.
park_run() {
	local label=$1 option=$2
	cat >"$out/Caddyfile.park" <<EOC
{
	admin 127.0.0.1:$park_admin
	persist_config off
	grace_period 2s
}
http://127.0.0.1:$park_gw {
	bind 127.0.0.1
	mcp_gateway /mcp {
		upstream http://127.0.0.1:$legacy_up/mcp {
			era legacy
			$option
		}
		park_ttl $PARK_TTL
		max_parked $((PARKED + 100))
		max_parked_per_principal $((PARKED + 100))
		max_sessions_per_principal $((PARKED + 100))
	}
}
EOC
	"$out/caddy" run --config "$out/Caddyfile.park" --adapter caddyfile >"$out/caddy-park.log" 2>&1 &
	local park_pid=$!
	pids+=($park_pid)
	waitport "$park_gw"
	rss() { rss_of "$park_pid"; }
	fds() { fds_of "$park_pid"; }
	parked() { curl -s "http://127.0.0.1:$park_admin/mcp_gateway/parked" | { grep -o '"upstream"' || true; } | wc -l; }
	# Warm the gateway with one parked call, so the baseline holds what
	# the first call allocates once (pools, TLS-free transports, tables).
	"$out/bench" park -url "http://127.0.0.1:$park_gw/mcp" -n 1 -c 1 >/dev/null
	local base_rss base_heap base_g base_fd peak_rss peak_heap peak_g peak_fd peak_parked after_rss after_heap after_g after_fd after_parked park_line
	base_rss=$(rss) base_heap=$(heap) base_g=$(goroutines) base_fd=$(fds)
	echo "parking $PARKED calls ($label)..." >&2
	park_line=$("$out/bench" park -url "http://127.0.0.1:$park_gw/mcp" -n "$PARKED" -c 32)
	echo "$park_line" >&2
	# Calls parked holding no stream let go of their streams after
	# resume_linger (250ms, at most 1s): count them at rest.
	sleep 1
	peak_rss=$(rss) peak_heap=$(heap) peak_g=$(goroutines) peak_fd=$(fds) peak_parked=$(parked)
	# Profiles at the peak, to account for what a parked call holds:
	# go tool pprof -sample_index=inuse_space tests/.out/bench/park-default.heap
	curl -s "http://127.0.0.1:$park_admin/debug/pprof/heap" >"$out/park-${label// /-}.heap" || true
	curl -s "http://127.0.0.1:$park_admin/debug/pprof/goroutine?debug=1" >"$out/park-${label// /-}.goroutines" || true
	grep -E '^(VmRSS|RssAnon|RssFile)' "/proc/$park_pid/status" >"$out/park-${label// /-}.status" || true
	curl -s "http://127.0.0.1:$park_admin/debug/vars" >"$out/park-${label// /-}.vars" || true
	echo "waiting for the parked calls to expire (park_ttl $PARK_TTL)..." >&2
	for _ in $(seq 600); do
		[[ "$(parked)" -eq 0 ]] && break
		sleep 1
	done
	sleep 5
	after_rss=$(rss) after_heap=$(heap) after_g=$(goroutines) after_fd=$(fds) after_parked=$(parked)
	kill "$park_pid" 2>/dev/null || true
	wait "$park_pid" 2>/dev/null || true
	per_call() { awk -v a="$1" -v b="$2" -v n="$PARKED" 'BEGIN {printf "%.1f", (a-b)/n}'; }
	memory+="| $label | baseline (after one call) | $base_rss KiB | $base_heap KiB | $base_g | $base_fd | 1 |
| $label | $PARKED parked | $peak_rss KiB | $peak_heap KiB | $peak_g | $peak_fd | $peak_parked |
| $label | per parked call | **$(per_call "$peak_rss" "$base_rss") KiB** | $(per_call "$peak_heap" "$base_heap") KiB | $(per_call "$peak_g" "$base_g") | $(per_call "$peak_fd" "$base_fd") | |
| $label | after expiry (+5 s) | $after_rss KiB | $after_heap KiB | $after_g | $after_fd | $after_parked |
"
	park_lines+="$label: $park_line
"
}

memory="" park_lines=""
if ((PARKED > 0)); then
	park_run "default" ""
	[[ "${BENCH_PARK_GET_STREAM_OFF:-1}" == 1 ]] && park_run "get_stream off" "get_stream off"
fi

# task_run: makes $TASKS calls of the legacy upstream's hold tool (runs
# until cancelled) tasks in a fresh gateway (task hold optional 0), never
# polls them, reads the memory before, at the peak and after task_ttl
# ended them, stops it, and sets the task table rows.
task_run() {
	cat >"$out/Caddyfile.tasks" <<EOC
{
	admin 127.0.0.1:$park_admin
	persist_config off
	grace_period 2s
}
http://127.0.0.1:$park_gw {
	bind 127.0.0.1
	mcp_gateway /mcp {
		upstream http://127.0.0.1:$legacy_up/mcp {
			era legacy
		}
		task hold optional 0
		task_ttl $TASK_TTL
		max_tasks $((TASKS + 100))
		max_tasks_per_principal $((TASKS + 100))
		max_sessions_per_principal $((TASKS + 100))
	}
}
EOC
	"$out/caddy" run --config "$out/Caddyfile.tasks" --adapter caddyfile >"$out/caddy-tasks.log" 2>&1 &
	local task_pid=$!
	pids+=($task_pid)
	waitport "$park_gw"
	rss() { rss_of "$task_pid"; }
	fds() { fds_of "$task_pid"; }
	held() { curl -s "http://127.0.0.1:$park_admin/mcp_gateway/tasks" | { grep -o '"tool"' || true; } | wc -l; }
	# One task first, so the baseline holds what the first one allocates.
	"$out/bench" tasks -url "http://127.0.0.1:$park_gw/mcp" -n 1 -c 1 >/dev/null
	local base_rss base_heap base_g base_fd peak_rss peak_heap peak_g peak_fd peak_held after_rss after_heap after_g after_fd after_held
	base_rss=$(rss) base_heap=$(heap) base_g=$(goroutines) base_fd=$(fds)
	echo "making tasks of $TASKS calls..." >&2
	task_line=$("$out/bench" tasks -url "http://127.0.0.1:$park_gw/mcp" -n "$TASKS" -c 32)
	echo "$task_line" >&2
	peak_rss=$(rss) peak_heap=$(heap) peak_g=$(goroutines) peak_fd=$(fds) peak_held=$(held)
	echo "waiting for the tasks to expire (task_ttl $TASK_TTL)..." >&2
	for _ in $(seq 600); do
		[[ "$(held)" -eq 0 ]] && break
		sleep 1
	done
	sleep 5
	after_rss=$(rss) after_heap=$(heap) after_g=$(goroutines) after_fd=$(fds) after_held=$(held)
	kill "$task_pid" 2>/dev/null || true
	wait "$task_pid" 2>/dev/null || true
	per_task() { awk -v a="$1" -v b="$2" -v n="$TASKS" 'BEGIN {printf "%.1f", (a-b)/n}'; }
	tasks_memory="| baseline (after one task) | $base_rss KiB | $base_heap KiB | $base_g | $base_fd | 1 |
| $TASKS tasks held | $peak_rss KiB | $peak_heap KiB | $peak_g | $peak_fd | $peak_held |
| per held task | **$(per_task "$peak_rss" "$base_rss") KiB** | $(per_task "$peak_heap" "$base_heap") KiB | $(per_task "$peak_g" "$base_g") | $(per_task "$peak_fd" "$base_fd") | |
| after task_ttl (+5 s) | $after_rss KiB | $after_heap KiB | $after_g | $after_fd | $after_held |
"
}

tasks_memory="" task_line=""
if ((TASKS > 0)); then
	task_run
fi

echo
echo "## Results ($(date -u '+%Y-%m-%d %H:%M UTC'); legacy upstream event store: ${BENCH_EVENT_STORE:-0}; $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); $(go version | cut -d' ' -f3); ${D} × ${REPS} per target, interleaved)"
if [[ -s "$results" ]]; then
	echo
	compare_tables "$results" "the Caddy processes and the upstreams"
fi
if [[ -n "$memory" ]]; then
	echo
	echo "Memory, $PARKED calls parked at input_required and never retried (park_ttl $PARK_TTL), in a fresh gateway each:"
	echo
	echo "| upstream | gateway | RSS | heap in use | goroutines | open fds | parked calls |"
	echo "|---|---|---|---|---|---|---|"
	echo -n "$memory"
	echo
	echo -n "$park_lines"
fi
if [[ -n "$tasks_memory" ]]; then
	echo
	echo "Memory, $TASKS calls of a tool that runs until cancelled made tasks at once (task hold optional 0) and never polled (task_ttl $TASK_TTL), in a fresh gateway:"
	echo
	echo "| gateway | RSS | heap in use | goroutines | open fds | tasks held |"
	echo "|---|---|---|---|---|---|"
	echo -n "$tasks_memory"
	echo
	echo "$task_line"
fi
