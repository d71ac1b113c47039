#!/usr/bin/env bash
# Tracing's cost: builds Caddy at revision OLD (before traces) and from the
# work tree (NEW), starts on loopback a legacy and a modern go-sdk upstream,
# an OTLP/HTTP receiver (bench otlp) and three Caddy processes, each with a
# gateway in front of each upstream: OLD, NEW without `tracing`, and NEW
# with `tracing` exporting every span to the receiver. One interleaved bench
# compare (new-off old traced …) per scenario and number of clients, with
# the CPU time per call of the three Caddy processes. Prints the Markdown
# tables and the spans received; stops everything it started.
#
#   tests/bench/traces.sh c4d948b
#   TRACES_CLIENTS="1 16" TRACES_D=2s TRACES_REPS=3 tests/bench/traces.sh HEAD~3
#
# Environment: TRACES_CLIENTS ("1 16"), TRACES_D (2s per target and
# repetition), TRACES_REPS (3), TRACES_PORT (first loopback port, 19700; up
# to +50), TRACES_CADDY_ONLY (a Caddy built from the work tree with
# translate/traces.Start always returning nil: a fourth target, `caddy`,
# with tracing on and only Caddy's own span, to tell its cost from the
# gateway's). Output: tests/.out/bench/traces/.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

old_rev=${1:?usage: tests/bench/traces.sh OLD_REVISION}
CLIENTS=${TRACES_CLIENTS:-1 16}
D=${TRACES_D:-2s}
REPS=${TRACES_REPS:-3}
P=${TRACES_PORT:-19700}

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

legacy_up=$((P + 1)) modern_up=$((P + 2)) otlp=$((P + 3))
"$bin/bench" serve -era legacy -addr "127.0.0.1:$legacy_up" >"$out/legacy.log" 2>&1 &
legacy_pid=$!
pids+=($legacy_pid)
"$bin/bench" serve -era modern -addr "127.0.0.1:$modern_up" >"$out/modern.log" 2>&1 &
modern_pid=$!
pids+=($modern_pid)
"$bin/bench" otlp -addr "127.0.0.1:$otlp" >"$out/otlp.log" 2>&1 &
pids+=($!)

# gateway NAME BUILD ADMIN LEGACY_PORT MODERN_PORT [SITE]: one Caddy of
# BUILD with a gateway in front of each upstream, SITE among each site's
# directives; sets caddy_pid.
gateway() {
	cat >"$out/Caddyfile.$1" <<EOC
{
	admin 127.0.0.1:$3
	persist_config off
	grace_period 2s
	log {
		level WARN
	}
}
http://127.0.0.1:$4 {
	bind 127.0.0.1
	${6:-}
	mcp_gateway /mcp {
		upstream http://127.0.0.1:$legacy_up/mcp {
			era legacy
		}
	}
}
http://127.0.0.1:$5 {
	bind 127.0.0.1
	${6:-}
	mcp_gateway /mcp {
		upstream http://127.0.0.1:$modern_up/mcp {
			era modern
		}
	}
}
EOC
	OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:$otlp" OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf \
		"$out/caddy-$2" run --config "$out/Caddyfile.$1" --adapter caddyfile >"$out/caddy-$1.log" 2>&1 &
	caddy_pid=$!
	pids+=($caddy_pid)
}
gateway old old $((P + 10)) $((P + 11)) $((P + 12))
old_pid=$caddy_pid
gateway off new $((P + 20)) $((P + 21)) $((P + 22))
off_pid=$caddy_pid
gateway traced new $((P + 30)) $((P + 31)) $((P + 32)) tracing
traced_pid=$caddy_pid
cpu="off=$off_pid,old=$old_pid,traced=$traced_pid"
if [[ -n "${TRACES_CADDY_ONLY:-}" ]]; then
	cp "$TRACES_CADDY_ONLY" "$out/caddy-caddyonly"
	gateway caddy caddyonly $((P + 40)) $((P + 41)) $((P + 42)) tracing
	cpu+=",caddy=$caddy_pid"
	waitport $((P + 41))
	waitport $((P + 42))
fi
# only NAME L|M: the fourth target, when there is one.
only() { [[ -n "${TRACES_CADDY_ONLY:-}" ]] && echo "caddy=$1:http://127.0.0.1:$((P + 40 + $2))/mcp"; true; }
waitport "$legacy_up" "$legacy_pid" "$out/legacy.log"
waitport "$modern_up" "$modern_pid" "$out/modern.log"
waitport "$otlp"
for port in $((P + 11)) $((P + 12)) $((P + 21)) $((P + 22)) $((P + 31)) $((P + 32)); do waitport "$port"; done

OL="http://127.0.0.1:$((P + 11))/mcp" OM="http://127.0.0.1:$((P + 12))/mcp"
FL="http://127.0.0.1:$((P + 21))/mcp" FM="http://127.0.0.1:$((P + 22))/mcp"
TL="http://127.0.0.1:$((P + 31))/mcp" TM="http://127.0.0.1:$((P + 32))/mcp"
results="$out/results.txt"
: >"$results"
cmp() { "$bin/bench" compare -d "$D" -reps "$REPS" -cpu "$cpu" "$@" | tee -a "$results" >&2; }
echo "measuring (each line: one scenario at one concurrency)..." >&2
for c in $CLIENTS; do
	cmp -scenario "legacy pass-through" -c "$c" off=legacy:"$FL" old=legacy:"$OL" traced=legacy:"$TL" $(only legacy 1)
	cmp -scenario "modern pass-through" -c "$c" off=modern:"$FM" old=modern:"$OM" traced=modern:"$TM" $(only modern 2)
	cmp -scenario "forward bridge, no input" -c "$c" off=modern:"$FL" old=modern:"$OL" traced=modern:"$TL" $(only modern 1)
	cmp -scenario "forward bridge, 1 MRTR round" -c "$c" -tool ask -args '{"rounds":1}' off=modern:"$FL" old=modern:"$OL" traced=modern:"$TL" $(only modern 1)
done
sleep 1 # the last batch of spans
echo "## Tracing off and on: $old_rev (old) against the work tree at $(git rev-parse --short HEAD)$(git diff --quiet || echo ', modified') (off, traced); $(date -u '+%Y-%m-%d %H:%M UTC'); $(nproc) cores"
echo
echo "Spans received by the OTLP receiver: $(curl -s "http://127.0.0.1:$otlp/count")"
echo
compare_tables "$results" "each target's Caddy"
