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
func park(args []string) error { return hold("park", args, "ask", `{"rounds":1}`) }

// tasks opens n modern calls declaring the Tasks extension that become
// tasks (the tool's task policy in the gateway, a tool that does not end
// on its own), and never polls them: each leaves a task the gateway holds.
func tasks(args []string) error { return hold("tasks", args, "hold", `{}`) }

// hold opens the calls of park and tasks.
func hold(cmd string, args []string, defaultTool, defaultArgs string) error {
	fs := flag.NewFlagSet(cmd, flag.ExitOnError)
	url := fs.String("url", "", "the gateway's MCP endpoint")
	n := fs.Int("n", 1000, "calls to open")
	conc := fs.Int("c", 32, "concurrent clients")
	tool := fs.String("tool", defaultTool, "park: a tool that asks for input; tasks: a tool whose calls become tasks")
	toolArgs := fs.String("args", defaultArgs, "the tool's arguments (JSON)")
	_ = fs.Parse(args)
	if *url == "" {
		return fmt.Errorf("%s: -url is required", cmd)
	}
	caps, want, verb := `{"elicitation":{}}`, "input_required", "parked"
	if cmd == "tasks" {
		caps, want, verb = `{"elicitation":{},"extensions":{"io.modelcontextprotocol/tasks":{}}}`, "task", "made tasks of"
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
				if err := holdOne(c, hdr, *tool, *toolArgs, caps, want, i); err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err)
				}
			}
		})
	}
	wg.Wait()
	el := time.Since(start)
	fmt.Printf("%s %d calls in %.1fs (%.0f/s), %d failed\n", verb, *n-int(failed.Load()), el.Seconds(), float64(*n)/el.Seconds(), failed.Load())
	if err, _ := firstErr.Load().(error); err != nil {
		return fmt.Errorf("first failure: %w", err)
	}
	return nil
}

// holdOne makes call i and checks that its answer's resultType is want.
func holdOne(c *client, hdr map[string]string, tool, args, caps, want string, i int64) error {
	body := `{"jsonrpc":"2.0","id":` + strconv.FormatInt(i, 10) + `,"method":"tools/call","params":{"name":` + strconv.Quote(tool) + `,"arguments":` + args +
		`,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":` + caps + `}}}`
	var answer []byte
	_, err := c.post(context.Background(), hdr, []byte(body), func(msg []byte) (bool, error) {
		answer = msg
		return true, nil
	})
	if err != nil {
		return err
	}
	if gjson.GetBytes(answer, "result.resultType").String() != want {
		return fmt.Errorf("call %d: not %s: %.300s", i, want, answer)
	}
	return nil
}
