#!/usr/bin/env bash
# The whole test suite, from a fresh clone: installs what it needs (Go
# modules, npm packages, Node 22), then runs formatting and vet checks, the
# unit tests with the race detector, short fuzzing, and the end-to-end tests
# through a real Caddy against real MCP peers and the conformance suite.
#
#   ./tests/test.sh          everything (CI runs exactly this)
#   ./tests/test.sh -short   unit tests and the end-to-end tests that need no Node
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

short=()
[[ "${1:-}" == "-short" ]] && short=(-short)

step() { printf '\n== %s\n' "$*"; }

step setup
bash tests/setup.sh

step "gofmt and go vet"
unformatted="$(gofmt -l caddymodule jsonrpc legacy sse translate tests)"
if [[ -n "$unformatted" ]]; then
	echo "gofmt -l lists:"; echo "$unformatted"; exit 1
fi
go vet ./...

step "unit tests (race detector)"
go test -race -count=1 "${short[@]}" ./sse/ ./jsonrpc/ ./translate/... ./legacy/... ./caddymodule/

if ((${#short[@]} == 0)); then
	step "fuzzing, briefly"
	# A count, not a duration: time-boxed fuzzing can end with a spurious
	# "context deadline exceeded" on Go 1.26 (golang/go#75804).
	for target in "FuzzReader ./sse/" "FuzzWriter ./sse/" "FuzzPeek ./jsonrpc/" "FuzzValidateModern ./translate/" \
		"FuzzOpenState ./translate/seal/" "FuzzReshapeResult ./translate/" "FuzzOpenPin ./translate/seal/" "FuzzOpenClientSession ./translate/seal/" \
		"FuzzInputs ./translate/" "FuzzParseMessage ./jsonrpc/" "FuzzMessageReader ./legacy/" "FuzzVerifyForwarded ./translate/seal/" \
		"FuzzJSONDepth ./jsonrpc/" "FuzzForwardURL ./caddymodule/" "FuzzCheckBatch ./translate/" "FuzzDecodeTask ./translate/seal/" \
		"FuzzDecodeResume ./translate/seal/" "FuzzQuote ./jsonrpc/" "FuzzDecodeTaskRecord ./translate/seal/" \
		"FuzzDecodeSaga ./translate/seal/" "FuzzDecodeRESTCall ./translate/seal/" "FuzzDecodeTurn ./translate/seal/" "FuzzDecodeTurnSession ./translate/seal/"; do
		set -- $target
		if ! out="$(go test -run='^$' -fuzz="^$1\$" -fuzztime=200000x "$2" 2>&1)"; then
			echo "fuzzing $1 failed:"; echo "$out"; exit 1
		fi
		echo "$1: ok"
	done
fi

step "end to end through a real Caddy"
go test -count=1 -timeout 25m "${short[@]}" ./tests/
