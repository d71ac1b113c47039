package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"
)

// target is one endpoint under measurement: a name for the table, the
// client's era and the URLs. A legacy target has exactly one URL; a modern
// one may have several (instances of one fleet), over which each call's
// requests are spread: the k-th request of a call goes to urls[k % n].
type target struct {
	name string
	era  string // legacy | modern
	urls []string
}

// parseTarget reads name=era:url, or name=modern:url,url,… for a modern
// target whose calls' requests go to several instances in turn.
func parseTarget(s string) (target, error) {
	name, rest, ok := strings.Cut(s, "=")
	era, list, ok2 := strings.Cut(rest, ":")
	if !ok || !ok2 || (era != "legacy" && era != "modern" && era != "rest") {
		return target{}, fmt.Errorf("target %q: want name=legacy:URL, name=modern:URL[,URL…] or name=rest:BASE_URL", s)
	}
	urls := strings.Split(list, ",")
	for _, u := range urls {
		if !strings.HasPrefix(u, "http") {
			return target{}, fmt.Errorf("target %q: %q is no http(s) URL", s, u)
		}
	}
	if era != "modern" && len(urls) != 1 {
		return target{}, fmt.Errorf("target %q: a legacy target has exactly one URL (its session lives on one instance)", s)
	}
	return target{name: name, era: era, urls: urls}, nil
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

// run drives t with conc clients, each making calls (method: tools/call of
// tool, or tools/list) one after the other, for warmup (not counted) and
// then d. A legacy client opens its own session first. The CPU time of
// procs is read when the measurement starts and once the last call has
// ended.
func run(t target, conc int, d, warmup time.Duration, method, tool, args string, procs []proc) (sample, error) {
	c := newClient(t.urls[0], conc)
	defer c.close()
	// One client per URL, all sharing c's connections.
	cs := []*client{c}
	for _, u := range t.urls[1:] {
		cs = append(cs, c.at(u))
	}
	ctx, cancel := context.WithTimeout(context.Background(), warmup+d+time.Minute)
	defer cancel()

	callers := make([]caller, conc)
	for i := range callers {
		if method == "tools/list" {
			callers[i] = newList(c)
			continue
		}
		if t.era == "modern" {
			callers[i] = newModern(cs, tool, args)
			continue
		}
		if t.era == "rest" {
			callers[i] = newREST(c, tool, args)
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
