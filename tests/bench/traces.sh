#!/usr/bin/env bash
# Tracing's cost: builds Caddy at revision OLD (before traces), from the
# work tree (NEW), and from the work tree with translate/traces.Start never
# starting a span (CADDY: tracing on, only Caddy's own server span for the
# calls measured here; built with go build -overlay, the work tree
# untouched); starts on loopback a legacy and a modern go-sdk upstream, an
# OTLP/HTTP receiver (bench otlp) and six Caddy processes, each with a
# gateway in front of each upstream: old (OLD), off (NEW without
# `tracing`), caddy (CADDY with `tracing`), traced (NEW with `tracing`,
# every span exported to the receiver), sampled (NEW with `tracing` and a
# parent-based sampler keeping 1 trace in 100) and caddy-sampled (CADDY,
# the same sampler). One interleaved bench compare per scenario and number
# of clients, with the CPU time per call of each Caddy process (its own,
# not the receiver's nor the load generator's). Prints the Markdown tables
# and the spans received; stops everything it started.
#
#   tests/bench/traces.sh c4d948b
#   TRACES_CLIENTS="1 16" TRACES_D=2s TRACES_REPS=3 tests/bench/traces.sh HEAD~3
#   TRACES_OTEL_ENV="OTEL_EXPORTER_OTLP_COMPRESSION=gzip" tests/bench/traces.sh c4d948b
#
# Environment: TRACES_CLIENTS ("1 16"), TRACES_D (2s per target and
# repetition), TRACES_REPS (3), TRACES_PORT (first loopback port, 19700; up
# to +70), TRACES_OTEL_ENV (more OTEL_* settings, NAME=VALUE separated by
# spaces, for every Caddy: the exporter's protocol, compression, batching),
# TRACES_SAMPLER_ARG (the sampled targets' ratio, 0.01). Output:
# tests/.out/bench/traces/.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

old_rev=${1:?usage: tests/bench/traces.sh OLD_REVISION}
CLIENTS=${TRACES_CLIENTS:-1 16}
D=${TRACES_D:-2s}
REPS=${TRACES_REPS:-3}
P=${TRACES_PORT:-19700}
read -r -a OTEL_ENV <<<"${TRACES_OTEL_ENV:-}"

source tests/bench/lib.sh
bin=tests/.out/bench
out=$bin/traces
build_bench "$bin"
mkdir -p "$out"
tree=$out/old-tree
git worktree remove --force "$tree" 2>/dev/null || rm -rf "$tree"
git worktree add --detach "$tree" "$old_rev" >&2
(cd "$tree" && go build -o "$OLDPWD/$out/caddy-old" ./caddymodule/cmd/caddy)
git worktree remove --force "$tree"
cp "$bin/caddy" "$out/caddy-new"
# CADDY: Start's "no recording parent" branch taken always.
start=$PWD/translate/traces/traces.go
sed 's/if !parent.IsRecording() {/if true || !parent.IsRecording() {/' "$start" >"$PWD/$out/traces-caddyonly.go"
if ! grep -q 'if true || !parent.IsRecording() {' "$out/traces-caddyonly.go"; then
	echo "translate/traces.Start changed: cannot build the caddy-only target" >&2
	exit 1
fi
echo "{\"Replace\":{\"$start\":\"$PWD/$out/traces-caddyonly.go\"}}" >"$out/overlay.json"
go build -overlay "$out/overlay.json" -o "$out/caddy-caddyonly" ./caddymodule/cmd/caddy

legacy_up=$((P + 1)) modern_up=$((P + 2)) otlp=$((P + 3))
"$bin/bench" serve -era legacy -addr "127.0.0.1:$legacy_up" >"$out/legacy.log" 2>&1 &
legacy_pid=$!
pids+=($legacy_pid)
"$bin/bench" serve -era modern -addr "127.0.0.1:$modern_up" >"$out/modern.log" 2>&1 &
modern_pid=$!
pids+=($modern_pid)
"$bin/bench" otlp -addr "127.0.0.1:$otlp" >"$out/otlp.log" 2>&1 &
pids+=($!)

# gateway NAME BUILD PORT [SITE [ENV…]]: one Caddy of BUILD, its admin on
# PORT, with a gateway in front of each upstream on PORT+1 (legacy) and
# PORT+2 (modern), SITE among each site's directives and ENV in its
# environment; adds NAME=pid to cpu.
cpu=
gateway() {
	local name=$1 build=$2 port=$3 site=${4:-}
	shift 4 || shift $#
	cat >"$out/Caddyfile.$name" <<EOC
{
	admin 127.0.0.1:$port
	persist_config off
	grace_period 2s
	log {
		level WARN
	}
}
http://127.0.0.1:$((port + 1)) {
	bind 127.0.0.1
	$site
	mcp_gateway /mcp {
		upstream http://127.0.0.1:$legacy_up/mcp {
			era legacy
		}
	}
}
http://127.0.0.1:$((port + 2)) {
	bind 127.0.0.1
	$site
	mcp_gateway /mcp {
		upstream http://127.0.0.1:$modern_up/mcp {
			era modern
		}
	}
}
EOC
	env OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:$otlp" OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf "${OTEL_ENV[@]}" "$@" \
		"$out/caddy-$build" run --config "$out/Caddyfile.$name" --adapter caddyfile >"$out/caddy-$name.log" 2>&1 &
	pids+=($!)
	cpu+="${cpu:+,}$name=$!"
}
gateway off new $((P + 10))
gateway old old $((P + 20))
gateway caddy caddyonly $((P + 30)) tracing
gateway traced new $((P + 40)) tracing
sampler=(OTEL_TRACES_SAMPLER=parentbased_traceidratio OTEL_TRACES_SAMPLER_ARG="${TRACES_SAMPLER_ARG:-0.01}")
gateway sampled new $((P + 50)) tracing "${sampler[@]}"
gateway caddy-sampled caddyonly $((P + 60)) tracing "${sampler[@]}"
waitport "$legacy_up" "$legacy_pid" "$out/legacy.log"
waitport "$modern_up" "$modern_pid" "$out/modern.log"
waitport "$otlp"
for base in 10 20 30 40 50 60; do
	waitport $((P + base + 1))
	waitport $((P + base + 2))
done

# targets ERA L|M: every target's gateway of that upstream (1 legacy, 2
# modern), for a client of ERA.
targets() {
	for t in off=10 old=20 caddy=30 traced=40 sampled=50 caddy-sampled=60; do
		echo "${t%=*}=$1:http://127.0.0.1:$((P + ${t#*=} + $2))/mcp"
	done
}
results="$out/results.txt"
: >"$results"
cmp() { "$bin/bench" compare -d "$D" -reps "$REPS" -cpu "$cpu" "$@" | tee -a "$results" >&2; }
echo "measuring (each line: one scenario at one concurrency)..." >&2
for c in $CLIENTS; do
	cmp -scenario "legacy pass-through" -c "$c" $(targets legacy 1)
	cmp -scenario "modern pass-through" -c "$c" $(targets modern 2)
	cmp -scenario "forward bridge, no input" -c "$c" $(targets modern 1)
	cmp -scenario "forward bridge, 1 MRTR round" -c "$c" -tool ask -args '{"rounds":1}' $(targets modern 1)
done
sleep 6 # the last batch of spans (OTEL_BSP_SCHEDULE_DELAY: 5 s)
echo "## Tracing off and on: $old_rev (old) against the work tree at $(git rev-parse --short HEAD)$(git diff --quiet || echo ', modified'); $(date -u '+%Y-%m-%d %H:%M UTC'); $(nproc) cores${TRACES_OTEL_ENV:+; $TRACES_OTEL_ENV}"
echo
echo "Spans received by the OTLP receiver: $(curl -s "http://127.0.0.1:$otlp/count")"
echo
# Each Caddy's CPU per call of its own target, with what it spent while
# the others were measured (a batch of spans exported after its turn)
# charged to its own calls: its µs per call in each row times that row's
# calls per second (every target runs as long), over its own calls per
# second.
echo "CPU per call (µs, each Caddy's own, its exports after its turn included) and ratios:"
echo
echo "| scenario | clients | old | off | caddy | traced | sampled | caddy-sampled | off÷old | caddy÷off | traced÷off | traced÷caddy | sampled÷off | caddy-sampled÷off | sampled÷caddy-sampled |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
awk -F ' [|] ' '/^FIG / {
	key = $2 " | " $3
	if (!(key in seen)) { seen[key] = 1; keys[++nk] = key }
	rate[key, $4] = $5
	sub(/ [|]$/, "", $10)
	n = split($10, cs, ", ")
	for (i = 1; i <= n; i++) { split(cs[i], kv, " "); spent[key, kv[1]] += kv[2] * $5 }
}
END {
	for (k = 1; k <= nk; k++) {
		key = keys[k]
		split("old off caddy traced sampled caddy-sampled", ts, " ")
		for (i = 1; i <= 6; i++) c[ts[i]] = rate[key, ts[i]] > 0 ? spent[key, ts[i]] / rate[key, ts[i]] : 0
		printf "| %s | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f |\n", key,
			c["old"], c["off"], c["caddy"], c["traced"], c["sampled"], c["caddy-sampled"],
			c["off"] / c["old"], c["caddy"] / c["off"], c["traced"] / c["off"], c["traced"] / c["caddy"], c["sampled"] / c["off"],
			c["caddy-sampled"] / c["off"], c["sampled"] / c["caddy-sampled"]
	}
}' "$results"
echo
compare_tables "$results" "each target's Caddy"
