package main

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// sessions opens n legacy (2025-11-25) sessions, makes in each one call of
// every tool named, and leaves them open: what a gateway keeps per legacy
// client session (its reverse bridge's, and in a federated block what the
// calls left in each server's inner handler) can then be read from outside.
func sessions(args []string) error {
	fs := flag.NewFlagSet("sessions", flag.ExitOnError)
	url := fs.String("url", "", "the gateway's MCP endpoint")
	n := fs.Int("n", 1000, "sessions to open")
	conc := fs.Int("c", 32, "concurrent clients")
	tools := fs.String("tools", "echo", "comma-separated tools each session calls once (a federated block's, prefixed)")
	toolArgs := fs.String("args", `{"text":"hello"}`, "the tools' arguments (JSON)")
	_ = fs.Parse(args)
	if *url == "" {
		return fmt.Errorf("sessions: -url is required")
	}
	c := newClient(*url, *conc)
	defer c.close()
	var next, failed atomic.Int64
	var firstErr atomic.Value
	start := time.Now()
	var wg sync.WaitGroup
	for range *conc {
		wg.Go(func() {
			for next.Add(1) <= int64(*n) {
				if err := openSession(c, strings.Split(*tools, ","), *toolArgs); err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err)
				}
			}
		})
	}
	wg.Wait()
	el := time.Since(start)
	fmt.Printf("opened %d sessions in %.1fs (%.0f/s), %d failed\n", *n-int(failed.Load()), el.Seconds(), float64(*n)/el.Seconds(), failed.Load())
	if err, _ := firstErr.Load().(error); err != nil {
		return fmt.Errorf("first failure: %w", err)
	}
	return nil
}

// openSession opens one session and calls each tool once in it.
func openSession(c *client, tools []string, args string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l, err := openLegacy(ctx, c, "", args)
	if err != nil {
		return err
	}
	for _, tool := range tools {
		l.tool = tool
		if err := l.call(ctx); err != nil {
			return fmt.Errorf("%s: %w", tool, err)
		}
	}
	return nil
}
