#!/usr/bin/env bash
# A/B of two builds of the gateway on run.sh's throughput scenarios:
# builds Caddy at revision OLD (a git worktree under tests/.out) and from
# the work tree (NEW), starts on loopback a legacy and a modern go-sdk
# upstream and one Caddy per build (a gateway in front of each upstream),
# and runs one interleaved bench compare (old new old new …) per scenario
# and number of clients, with the CPU time per call of both Caddy
# processes. Prints the Markdown tables; stops everything it started.
#
#   tests/bench/run_ab.sh 78bc63d
#   RUN_AB_CLIENTS="1 32" RUN_AB_D=4s RUN_AB_REPS=3 tests/bench/run_ab.sh HEAD~5
#
# Environment: RUN_AB_CLIENTS ("1 32"), RUN_AB_D (3s per target and
# repetition), RUN_AB_REPS (3), RUN_AB_PORT (first loopback port, 19900;
# up to +30), BENCH_PREBUILT (a folder with caddy, bench and caddy-old
# built at OLD: nothing is built). Output: tests/.out/bench/run_ab/.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

old_rev=${1:?usage: tests/bench/run_ab.sh OLD_REVISION}
CLIENTS=${RUN_AB_CLIENTS:-1 32}
D=${RUN_AB_D:-3s}
REPS=${RUN_AB_REPS:-3}
P=${RUN_AB_PORT:-19900}

source tests/bench/lib.sh
bin=tests/.out/bench
out=$bin/run_ab
build_bench "$bin"
mkdir -p "$out"
if [[ -n "${BENCH_PREBUILT:-}" ]]; then
	cp "$BENCH_PREBUILT/caddy-old" "$out/caddy-old" # built at OLD elsewhere
else
	tree=$out/old-tree
	git worktree remove --force "$tree" 2>/dev/null || rm -rf "$tree"
	git worktree add --detach "$tree" "$old_rev" >&2
	(cd "$tree" && go build -o "$OLDPWD/$out/caddy-old" ./caddymodule/cmd/caddy)
	git worktree remove --force "$tree"
fi
cp "$bin/caddy" "$out/caddy-new"

legacy_up=$((P + 1)) modern_up=$((P + 2))
"$bin/bench" serve -era legacy -addr "127.0.0.1:$legacy_up" >"$out/legacy.log" 2>&1 &
legacy_pid=$!
pids+=($legacy_pid)
"$bin/bench" serve -era modern -addr "127.0.0.1:$modern_up" >"$out/modern.log" 2>&1 &
modern_pid=$!
pids+=($modern_pid)

# gateway BUILD ADMIN LEGACY_PORT MODERN_PORT: one Caddy of BUILD with a
# gateway in front of each upstream; sets caddy_pid.
gateway() {
	cat >"$out/Caddyfile.$1" <<EOC
{
	admin 127.0.0.1:$2
	persist_config off
	grace_period 2s
	log {
		level WARN
	}
}
http://127.0.0.1:$3 {
	bind 127.0.0.1
	mcp_gateway /mcp {
		upstream http://127.0.0.1:$legacy_up/mcp {
			era legacy
		}
	}
}
http://127.0.0.1:$4 {
	bind 127.0.0.1
	mcp_gateway /mcp {
		upstream http://127.0.0.1:$modern_up/mcp {
			era modern
		}
	}
}
EOC
	"$out/caddy-$1" run --config "$out/Caddyfile.$1" --adapter caddyfile >"$out/caddy-$1.log" 2>&1 &
	caddy_pid=$!
	pids+=($caddy_pid)
}
gateway old $((P + 10)) $((P + 11)) $((P + 12))
old_pid=$caddy_pid
gateway new $((P + 20)) $((P + 21)) $((P + 22))
new_pid=$caddy_pid
waitport "$legacy_up" "$legacy_pid" "$out/legacy.log"
waitport "$modern_up" "$modern_pid" "$out/modern.log"
for port in $((P + 11)) $((P + 12)) $((P + 21)) $((P + 22)); do waitport "$port"; done

OL="http://127.0.0.1:$((P + 11))/mcp" OM="http://127.0.0.1:$((P + 12))/mcp"
NL="http://127.0.0.1:$((P + 21))/mcp" NM="http://127.0.0.1:$((P + 22))/mcp"
results="$out/results.txt"
: >"$results"
cmp() { "$bin/bench" compare -d "$D" -reps "$REPS" -cpu "old=$old_pid,new=$new_pid" "$@" | tee -a "$results" >&2; }
echo "measuring (each line: one scenario at one concurrency)..." >&2
for c in $CLIENTS; do
	cmp -scenario "legacy pass-through" -c "$c" old=legacy:"$OL" new=legacy:"$NL"
	cmp -scenario "modern pass-through" -c "$c" old=modern:"$OM" new=modern:"$NM"
	cmp -scenario "forward bridge, no input" -c "$c" old=modern:"$OL" new=modern:"$NL"
	cmp -scenario "forward bridge, 1 MRTR round" -c "$c" -tool ask -args '{"rounds":1}' old=modern:"$OL" new=modern:"$NL"
	cmp -scenario "forward bridge, 3 MRTR rounds" -c "$c" -tool ask -args '{"rounds":3}' old=modern:"$OL" new=modern:"$NL"
done
echo "## run.sh scenarios, A/B: $old_rev (old) against the work tree at $(git rev-parse --short HEAD 2>/dev/null || echo "${RUN_AB_NEW:-?}")$(git diff --quiet 2>/dev/null || echo ', modified') (new); $(date -u '+%Y-%m-%d %H:%M UTC'); $(nproc) cores"
echo
compare_tables "$results" "the old or new Caddy"
