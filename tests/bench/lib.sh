# Sourced by the bench scripts (run.sh, fleet.sh): what each needs to start
# processes on loopback and stop them at the end.

# pids are the processes the script started: cleanup stops them, on exit
# or interrupt.
pids=()
cleanup() {
	for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
	wait 2>/dev/null || true
}
trap cleanup EXIT INT TERM

# build_bench DIR: builds Caddy (with the mcp_gateway module) and the load
# tool into DIR; with BENCH_PREBUILT set to a folder holding caddy and
# bench (built elsewhere: a machine without Go), copies them instead.
build_bench() {
	mkdir -p "$1"
	if [[ -n "${BENCH_PREBUILT:-}" ]]; then
		cp "$BENCH_PREBUILT/caddy" "$BENCH_PREBUILT/bench" "$1/"
		return
	fi
	echo "building Caddy and the load tool..." >&2
	go build -o "$1/caddy" ./caddymodule/cmd/caddy
	go build -o "$1/bench" ./tests/bench
}

# waitport PORT [PID LOG]: waits until something listens on
# 127.0.0.1:PORT; fails after 20 s or, given PID, as soon as that process
# ended, showing LOG.
waitport() {
	for _ in $(seq 200); do
		if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
		if [[ -n "${2:-}" ]] && ! kill -0 "$2" 2>/dev/null; then break; fi
		sleep 0.1
	done
	echo "nothing listens on 127.0.0.1:$1${3:+; $3:}" >&2
	[[ -n "${3:-}" ]] && tail -20 "$3" >&2
	exit 1
}

# compare_tables RESULTS WHOSE_CPU: prints, as Markdown, the ratio and
# figure tables of the `bench compare` lines in RESULTS; WHOSE_CPU says
# which processes the server CPU counts.
compare_tables() {
	echo "Ratios (first target ÷ second, same run; server CPU: $2, per call):"
	echo
	echo "| scenario | clients | A vs B | throughput A÷B | p50 A÷B | p99 A÷B | server CPU per call A÷B |"
	echo "|---|---|---|---|---|---|---|"
	sed -n 's/^RATIO //p' "$1"
	echo
	echo "Figures:"
	echo
	echo "| scenario | clients | target | calls/s | p50 | p90 | p99 | errors | CPU µs per call |"
	echo "|---|---|---|---|---|---|---|---|---|"
	sed -n 's/^FIG //p' "$1"
}
