package main

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// proc is a server process whose CPU time compare reports per call: on a
// shared machine, the CPU a process spends per call moves much less than
// calls per second do.
type proc struct {
	name string
	pid  int
}

// parseProcs reads name=pid,name=pid….
func parseProcs(s string) ([]proc, error) {
	var ps []proc
	for _, f := range strings.Split(s, ",") {
		if f == "" {
			continue
		}
		name, pid, ok := strings.Cut(f, "=")
		n, err := strconv.Atoi(pid)
		if !ok || err != nil || n <= 0 {
			return nil, fmt.Errorf("-cpu %q: want name=pid,name=pid", s)
		}
		ps = append(ps, proc{name, n})
	}
	return ps, nil
}

// userHZ is the unit of the CPU times in /proc/PID/stat (USER_HZ, 100 on
// every Linux architecture's user ABI).
const userHZ = 100

// cpuTimes reads the user plus system CPU time of each process.
func cpuTimes(ps []proc) ([]time.Duration, error) {
	out := make([]time.Duration, len(ps))
	for i, p := range ps {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.pid))
		if err != nil {
			return nil, fmt.Errorf("CPU time of %s: %w", p.name, err)
		}
		// The fields after the command name (which may hold spaces, in
		// parentheses) start with the state, field 3; utime and stime are
		// fields 14 and 15.
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		if len(f) < 13 {
			return nil, fmt.Errorf("CPU time of %s: unreadable /proc/%d/stat", p.name, p.pid)
		}
		utime, err1 := strconv.ParseInt(f[11], 10, 64)
		stime, err2 := strconv.ParseInt(f[12], 10, 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("CPU time of %s: unreadable /proc/%d/stat", p.name, p.pid)
		}
		out[i] = time.Duration(utime+stime) * time.Second / userHZ
	}
	return out, nil
}
