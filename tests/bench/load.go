package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"
)

// target is one endpoint under measurement: a name for the table, the
// client's era and the URL.
type target struct {
	name string
	era  string // legacy | modern
	url  string
}

// parseTarget reads name=era:url.
func parseTarget(s string) (target, error) {
	name, rest, ok := strings.Cut(s, "=")
	era, url, ok2 := strings.Cut(rest, ":")
	if !ok || !ok2 || (era != "legacy" && era != "modern") || !strings.HasPrefix(url, "http") {
		return target{}, fmt.Errorf("target %q: want name=legacy:URL or name=modern:URL", s)
	}
	return target{name: name, era: era, url: url}, nil
}

// sample is what one run of a target measured.
type sample struct {
	calls    int
	errors   int
	firstErr error
	elapsed  time.Duration
	lat      []time.Duration
	cpu      []time.Duration // per process of -cpu, while measured
}

func (s *sample) add(o sample) {
	s.calls += o.calls
	s.errors += o.errors
	if s.firstErr == nil {
		s.firstErr = o.firstErr
	}
	s.elapsed += o.elapsed
	s.lat = append(s.lat, o.lat...)
	if s.cpu == nil {
		s.cpu = make([]time.Duration, len(o.cpu))
	}
	for i, c := range o.cpu {
		s.cpu[i] += c
	}
}

// cpuPerCall is the CPU time of process i per completed call.
func (s *sample) cpuPerCall(i int) time.Duration {
	if s.calls == 0 || i >= len(s.cpu) {
		return 0
	}
	return s.cpu[i] / time.Duration(s.calls)
}

// serverCPUPerCall is the CPU time of all the -cpu processes per call.
func (s *sample) serverCPUPerCall() time.Duration {
	var sum time.Duration
	for i := range s.cpu {
		sum += s.cpuPerCall(i)
	}
	return sum
}

func (s *sample) rate() float64 { return float64(s.calls) / s.elapsed.Seconds() }

// pct is the p-th percentile latency; s.lat must be sorted.
func (s *sample) pct(p float64) time.Duration {
	if len(s.lat) == 0 {
		return 0
	}
	return s.lat[min(len(s.lat)-1, int(p/100*float64(len(s.lat))))]
}

// run drives t with conc clients, each making calls one after the other,
// for warmup (not counted) and then d. A legacy client opens its own session
// first. The CPU time of procs is read when the measurement starts and once
// the last call has ended.
func run(t target, conc int, d, warmup time.Duration, tool, args string, procs []proc) (sample, error) {
	c := newClient(t.url, conc)
	defer c.close()
	ctx, cancel := context.WithTimeout(context.Background(), warmup+d+time.Minute)
	defer cancel()

	callers := make([]caller, conc)
	for i := range callers {
		if t.era == "modern" {
			callers[i] = newModern(c, tool, args)
			continue
		}
		l, err := openLegacy(ctx, c, tool, args)
		if err != nil {
			return sample{}, fmt.Errorf("%s: %w", t.name, err)
		}
		callers[i] = l
	}

	start := time.Now()
	measureFrom, stop := start.Add(warmup), start.Add(warmup+d)
	var mu sync.Mutex
	var total sample
	var wg sync.WaitGroup
	for _, cl := range callers {
		wg.Go(func() {
			var s sample
			s.lat = make([]time.Duration, 0, 1024)
			for {
				t0 := time.Now()
				if t0.After(stop) {
					break
				}
				err := cl.call(ctx)
				if t0.Before(measureFrom) {
					continue
				}
				if err != nil {
					s.errors++
					if s.firstErr == nil {
						s.firstErr = err
					}
					continue
				}
				s.calls++
				s.lat = append(s.lat, time.Since(t0))
			}
			mu.Lock()
			total.add(s)
			mu.Unlock()
		})
	}
	time.Sleep(time.Until(measureFrom))
	cpu0, err := cpuTimes(procs)
	wg.Wait()
	total.elapsed = time.Since(measureFrom)
	if err != nil {
		return total, err
	}
	cpu1, err := cpuTimes(procs)
	if err != nil {
		return total, err
	}
	total.cpu = make([]time.Duration, len(procs))
	for i := range procs {
		total.cpu[i] = cpu1[i] - cpu0[i]
	}
	return total, nil
}
