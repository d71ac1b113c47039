#!/usr/bin/env bash
# The whole test suite, from a fresh clone: installs what it needs (Go
# modules, npm packages, Node 22), then runs formatting and vet checks, the
# unit tests with the race detector, short fuzzing, and the end-to-end tests
# through a real Caddy against real MCP peers and the conformance suite.
#
#   ./tests/test.sh                 everything (CI runs exactly this)
#   ./tests/test.sh -short          unit tests and the end-to-end tests that need no Node
#   ./tests/test.sh STEP...         only these steps, in the order given: setup, vet,
#                                   unit, fuzz, e2e (e.g. ./tests/test.sh fuzz)
#
# Each step prints how long it took, and the run its total (docs/testing.md
# has the figures of a whole run).
# MCP_FUZZ_EXECS sets the executions per fuzz target (default 20000).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

short=()
if [[ "${1:-}" == "-short" ]]; then
	short=(-short)
	shift
fi
steps=("$@")
if ((${#steps[@]} == 0)); then
	steps=(setup vet unit fuzz e2e)
	if ((${#short[@]})); then
		steps=(setup vet unit e2e)
	fi
fi
for s in "${steps[@]}"; do
	case "$s" in
	setup | vet | unit | fuzz | e2e) ;;
	*) echo "tests/test.sh: unknown step '$s' (setup, vet, unit, fuzz, e2e)" >&2; exit 2 ;;
	esac
done

# The packages of the unit tests, and those whose fuzz targets the fuzz
# step runs: the Caddy-free ones (a fuzz build instruments every package
# in the binary, and Caddy's take minutes; caddymodule/face/multiturn's
# FuzzTurnAnswers runs its seeds in the unit tests, and by hand).
unit_pkgs=(./sse/ ./jsonrpc/ ./translate/... ./legacy/... ./caddymodule/...)
fuzz_pkgs=(./sse/ ./jsonrpc/ ./translate/... ./legacy/...)

run_start=$SECONDS
step_name=""
step_start=0
# step NAME starts a step, closing the previous one with its duration.
step() {
	end_step
	step_name="$*"
	step_start=$SECONDS
	printf '\n== %s\n' "$*"
}
end_step() {
	if [[ -n "$step_name" ]]; then
		printf '== %s: %ds\n' "$step_name" $((SECONDS - step_start))
	fi
	step_name=""
}

for s in "${steps[@]}"; do
	case "$s" in
	setup)
		step setup
		bash tests/setup.sh
		;;

	vet)
		step "gofmt and go vet"
		unformatted="$(gofmt -l caddymodule jsonrpc legacy sse translate tests)"
		if [[ -n "$unformatted" ]]; then
			echo "gofmt -l lists:"; echo "$unformatted"; exit 1
		fi
		go vet ./...
		;;

	unit)
		step "unit tests (race detector)"
		go test -race -count=1 "${short[@]}" "${unit_pkgs[@]}"
		;;

	fuzz)
		step "fuzzing, briefly"
		# Every fuzz target of fuzz_pkgs, as `go test -list`
		# finds them: a new or moved target needs no edit here. Each runs
		# its seed corpus in the unit tests too; here it gets
		# MCP_FUZZ_EXECS generated inputs on top (docs/testing.md).
		# A count, not a duration: time-boxed fuzzing can end with a spurious
		# "context deadline exceeded" on Go 1.26 (golang/go#75804).
		execs="${MCP_FUZZ_EXECS:-20000}"
		if ! listing="$(go test -list '^Fuzz' "${fuzz_pkgs[@]}" 2>&1)"; then
			echo "listing the fuzz targets failed:"; echo "$listing"; exit 1
		fi
		targets=()
		names=()
		while read -r first second _; do
			case "$first" in
			Fuzz*) names+=("$first") ;;
			ok)
				for name in ${names[@]+"${names[@]}"}; do targets+=("$name $second"); done
				names=()
				;;
			esac
		done <<<"$listing"
		if ((${#targets[@]} == 0)); then
			echo "no fuzz targets found in ${fuzz_pkgs[*]}:"; echo "$listing"; exit 1
		fi
		echo "${#targets[@]} targets, $execs executions each"
		for target in "${targets[@]}"; do
			set -- $target
			t0=$SECONDS
			if ! out="$(go test -run='^$' -fuzz="^$1\$" -fuzztime="${execs}x" "$2" 2>&1)"; then
				echo "fuzzing $1 ($2) failed:"; echo "$out"; exit 1
			fi
			echo "$1: ok ($((SECONDS - t0))s)"
		done
		;;

	e2e)
		step "end to end through a real Caddy"
		# -parallel 8: most tests wait (TTLs, expiries, polls, peers) more
		# than they compute; the default, GOMAXPROCS, is 2 on CI.
		go test -count=1 -timeout 25m -parallel 8 "${short[@]}" ./tests/
		;;
	esac
done
end_step
printf '\n== all steps (%s): %ds\n' "${steps[*]}" $((SECONDS - run_start))
