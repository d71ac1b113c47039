package main

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"
)

// compare measures several targets in turn, A B C A B C …, so that a drift
// of the shared machine's load touches all of them alike, and prints one
// figures row per target and one ratios row per pair (the first target
// against each of the others), as Markdown table rows:
//
//	FIG | scenario | conc | target | calls/s | p50 | p90 | p99 | errors | CPU µs per call, per process
//	RATIO | scenario | conc | A vs B | throughput A÷B | p50 A÷B | p99 A÷B | server CPU per call A÷B
//
// The server CPU of a call is the CPU time the -cpu processes (the proxies
// and upstreams, not the load generator) spent per completed call.
func compare(args []string) error {
	fs := flag.NewFlagSet("compare", flag.ExitOnError)
	scenario := fs.String("scenario", "", "the scenario's name in the table")
	conc := fs.Int("c", 1, "concurrent clients (a legacy client holds one session)")
	d := fs.Duration("d", 3*time.Second, "measured time per target and repetition")
	warmup := fs.Duration("warmup", 500*time.Millisecond, "unmeasured time before each measurement")
	reps := fs.Int("reps", 2, "repetitions of the A B C … sequence")
	tool := fs.String("tool", "echo", "the tool to call")
	toolArgs := fs.String("args", `{"text":"hello"}`, "the tool's arguments (JSON)")
	method := fs.String("method", "tools/call", "what each call is: tools/call (of -tool) or tools/list (modern targets only; -tool and -args unused)")
	cpuFlag := fs.String("cpu", "", "name=pid,… of server processes whose CPU time per call to report (Linux)")
	fs.Func("H", "a header ('Name: value') sent with every request; repeatable", func(v string) error {
		name, value, ok := strings.Cut(v, ":")
		if !ok {
			return fmt.Errorf("-H %q: want 'Name: value'", v)
		}
		requestHeader.Add(strings.TrimSpace(name), strings.TrimSpace(value))
		return nil
	})
	_ = fs.Parse(args)
	procs, err := parseProcs(*cpuFlag)
	if err != nil {
		return err
	}

	var targets []target
	for _, a := range fs.Args() {
		t, err := parseTarget(a)
		if err != nil {
			return err
		}
		targets = append(targets, t)
	}
	if len(targets) == 0 {
		return fmt.Errorf("compare: name at least one target (name=legacy:URL or name=modern:URL)")
	}
	switch *method {
	case "tools/call":
	case "tools/list":
		for _, t := range targets {
			if t.era != "modern" {
				return fmt.Errorf("compare: -method tools/list needs modern targets, not %s=%s", t.name, t.era)
			}
		}
	default:
		return fmt.Errorf("compare: -method %q: tools/call or tools/list", *method)
	}
	totals := make([]sample, len(targets))
	for range *reps {
		for i, t := range targets {
			s, err := run(t, *conc, *d, *warmup, *method, *tool, *toolArgs, procs)
			if err != nil {
				return err
			}
			totals[i].add(s)
		}
	}
	for i, t := range targets {
		s := &totals[i]
		slices.Sort(s.lat)
		var cpu []string
		for j, p := range procs {
			cpu = append(cpu, fmt.Sprintf("%s %d", p.name, s.cpuPerCall(j).Microseconds()))
		}
		fmt.Printf("FIG | %s | %d | %s | %.0f | %s | %s | %s | %d | %s |\n", *scenario, *conc, t.name, s.rate(), ms(s.pct(50)), ms(s.pct(90)), ms(s.pct(99)), s.errors, strings.Join(cpu, ", "))
		if s.errors > 0 {
			fmt.Fprintf(os.Stderr, "%s, %s, c=%d: %d errors, first: %v\n", *scenario, t.name, *conc, s.errors, s.firstErr)
		}
	}
	a := &totals[0]
	for i := 1; i < len(targets); i++ {
		b := &totals[i]
		fmt.Printf("RATIO | %s | %d | %s vs %s | %.2f | %.2f | %.2f | %.2f |\n", *scenario, *conc, targets[0].name, targets[i].name,
			a.rate()/b.rate(), ratio(a.pct(50), b.pct(50)), ratio(a.pct(99), b.pct(99)), ratio(a.serverCPUPerCall(), b.serverCPUPerCall()))
	}
	return nil
}

func ms(d time.Duration) string { return fmt.Sprintf("%.3f ms", float64(d.Microseconds())/1000) }

func ratio(a, b time.Duration) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}
