package main

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tidwall/gjson"
)

// park opens n modern calls that end in input_required and never retries
// them: through the gateway in front of a legacy server, each leaves a
// parked call behind.
func park(args []string) error {
	fs := flag.NewFlagSet("park", flag.ExitOnError)
	url := fs.String("url", "", "the gateway's MCP endpoint")
	n := fs.Int("n", 1000, "calls to park")
	conc := fs.Int("c", 32, "concurrent clients")
	tool := fs.String("tool", "ask", "a tool that asks for input")
	toolArgs := fs.String("args", `{"rounds":1}`, "the tool's arguments (JSON)")
	_ = fs.Parse(args)
	if *url == "" {
		return fmt.Errorf("park: -url is required")
	}

	c := newClient(*url, *conc)
	defer c.close()
	hdr := map[string]string{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": *tool}
	var next, failed atomic.Int64
	var firstErr atomic.Value
	start := time.Now()
	var wg sync.WaitGroup
	for range *conc {
		wg.Go(func() {
			for {
				i := next.Add(1)
				if i > int64(*n) {
					return
				}
				if err := parkOne(c, hdr, *tool, *toolArgs, i); err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err)
				}
			}
		})
	}
	wg.Wait()
	el := time.Since(start)
	fmt.Printf("parked %d calls in %.1fs (%.0f/s), %d failed\n", *n-int(failed.Load()), el.Seconds(), float64(*n)/el.Seconds(), failed.Load())
	if err, _ := firstErr.Load().(error); err != nil {
		return fmt.Errorf("first failure: %w", err)
	}
	return nil
}

func parkOne(c *client, hdr map[string]string, tool, args string, i int64) error {
	body := `{"jsonrpc":"2.0","id":` + strconv.FormatInt(i, 10) + `,"method":"tools/call","params":{"name":` + strconv.Quote(tool) + `,"arguments":` + args +
		`,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}}}`
	var answer []byte
	_, err := c.post(context.Background(), hdr, []byte(body), func(msg []byte) (bool, error) {
		answer = msg
		return true, nil
	})
	if err != nil {
		return err
	}
	if gjson.GetBytes(answer, "result.resultType").String() != "input_required" {
		return fmt.Errorf("call %d: not input_required: %.300s", i, answer)
	}
	return nil
}
