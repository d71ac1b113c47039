#!/usr/bin/env bash
# What a federated block costs against a block of one server, for each
# era's clients: builds Caddy and tests/bench, starts a legacy and a modern
# go-sdk upstream and one Caddy serving, on loopback, a block of each
# upstream alone and two federated blocks over both (the server measured
# with `prefix ""`, so that the tool names are the same), then measures
# each pair in turn (A B A B …) at 1 and 8 clients. A legacy client of a
# legacy server passes through pinned in a block of its own, and crosses
# both bridges in a federated block. Prints Markdown tables and stops
# everything it started.
#
#   tests/bench/federation.sh               # about 4 minutes
#   BENCH_D=5s BENCH_REPS=3 tests/bench/federation.sh
#
# Environment: BENCH_D (measured time per target and repetition, 3s),
# BENCH_REPS (2), BENCH_PORT (first of the loopback ports used, 19500).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

D=${BENCH_D:-3s}
REPS=${BENCH_REPS:-2}
P=${BENCH_PORT:-19500}
legacy_up=$((P + 1)) modern_up=$((P + 2)) alone_legacy=$((P + 11)) alone_modern=$((P + 12))
fed_legacy=$((P + 13)) fed_modern=$((P + 14)) admin=$((P + 19))

out=tests/.out/bench-federation
source tests/bench/lib.sh
build_bench "$out"

"$out/bench" serve -era legacy -addr "127.0.0.1:$legacy_up" >"$out/legacy.log" 2>&1 &
legacy_pid=$!
pids+=($legacy_pid)
"$out/bench" serve -era modern -addr "127.0.0.1:$modern_up" >"$out/modern.log" 2>&1 &
modern_pid=$!
pids+=($modern_pid)

L="http://127.0.0.1:$legacy_up/mcp" M="http://127.0.0.1:$modern_up/mcp"
cat >"$out/Caddyfile" <<EOC
{
	admin 127.0.0.1:$admin
	persist_config off
	grace_period 2s
}
http://127.0.0.1:$alone_legacy {
	bind 127.0.0.1
	mcp_gateway /mcp {
		upstream $L {
			era legacy
		}
	}
}
http://127.0.0.1:$alone_modern {
	bind 127.0.0.1
	mcp_gateway /mcp {
		upstream $M {
			era modern
		}
	}
}
http://127.0.0.1:$fed_legacy {
	bind 127.0.0.1
	mcp_gateway /mcp {
		server old {
			upstream $L {
				era legacy
			}
			prefix ""
		}
		server new {
			upstream $M {
				era modern
			}
		}
	}
}
http://127.0.0.1:$fed_modern {
	bind 127.0.0.1
	mcp_gateway /mcp {
		server new {
			upstream $M {
				era modern
			}
			prefix ""
		}
		server old {
			upstream $L {
				era legacy
			}
		}
	}
}
EOC
"$out/caddy" run --config "$out/Caddyfile" --adapter caddyfile >"$out/caddy.log" 2>&1 &
caddy_pid=$!
pids+=($caddy_pid)
for port in $legacy_up $modern_up $alone_legacy $alone_modern $fed_legacy $fed_modern; do waitport "$port" "$caddy_pid" "$out/caddy.log"; done

AL="http://127.0.0.1:$alone_legacy/mcp" AM="http://127.0.0.1:$alone_modern/mcp"
FL="http://127.0.0.1:$fed_legacy/mcp" FM="http://127.0.0.1:$fed_modern/mcp"

results="$out/results.txt"
: >"$results"
cpu="caddy=$caddy_pid,legacy=$legacy_pid,modern=$modern_pid"
cmp() { "$out/bench" compare -d "$D" -reps "$REPS" -cpu "$cpu" "$@" | tee -a "$results" >&2; }

echo "measuring (each line: one scenario at one concurrency)..." >&2
for c in 1 8; do
	cmp -scenario "legacy client, legacy server" -c "$c" federated=legacy:"$FL" alone=legacy:"$AL"
	cmp -scenario "legacy client, legacy server, 1 in-line question" -c "$c" -tool ask -args '{"rounds":1}' federated=legacy:"$FL" alone=legacy:"$AL"
	cmp -scenario "modern client, legacy server" -c "$c" federated=modern:"$FL" alone=modern:"$AL"
	cmp -scenario "modern client, modern server" -c "$c" federated=modern:"$FM" alone=modern:"$AM"
	cmp -scenario "legacy client, modern server" -c "$c" federated=legacy:"$FM" alone=legacy:"$AM"
done

compare_tables "$results" "caddy + upstreams"
