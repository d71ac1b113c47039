package tests

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/tests/support"
)

// TestForwardManyParkedCalls parks many calls (1000, or $MCP_GATEWAY_PARKED),
// lets them expire, and checks that nothing is left behind: the gateway's
// goroutines return to their baseline and the upstream holds no session.
// It logs the gateway's memory per parked call.
func TestForwardManyParkedCalls(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("load test")
	}
	n := 1000
	if v := os.Getenv("MCP_GATEWAY_PARKED"); v != "" {
		n, _ = strconv.Atoi(v)
	}
	// Each parked call holds two upstream connections (its call stream and
	// its session's GET stream) on both sides.
	lim := syscall.Rlimit{Cur: uint64(8*n + 4096), Max: uint64(8*n + 4096)}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Logf("raising the open file limit: %v", err)
	}

	server := mcp.NewServer(&mcp.Implementation{Name: "parking", Version: "1"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "ask", Description: "Asks once."},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			_, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "?", RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{}}})
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprint(err)}}}, nil, nil
		})
	upstream := support.ServeMCP(t, server, nil)

	ttl := 10*time.Second + time.Duration(n)*2*time.Millisecond
	// Every call is anonymous, one principal: raise its limits too.
	g := startGateway(t, fmt.Sprintf("\t\tupstream %s {\n\t\t\tera legacy\n\t\t}\n\t\tpark_ttl %s\n\t\tmax_parked %d\n\t\tmax_parked_per_principal %d\n\t\tmax_sessions_per_principal %d", upstream, ttl, n+10, n+10, n+10))
	baseGoroutines, baseRSS, baseHeap := g.goroutines(t), g.rssKiB(t), g.heapKiB(t)

	start := time.Now()
	if failed, first := parkMany(g.URL, n); failed > 0 {
		t.Fatalf("%d of %d calls did not park; first: %v", failed, n, first)
	}
	parkedIn := time.Since(start)
	peakGoroutines, peakRSS, peakHeap := g.goroutines(t), g.rssKiB(t), g.heapKiB(t)
	t.Logf("parked %d calls in %v; gateway RSS %d KiB -> %d KiB (%.1f KiB per parked call), heap in use %d KiB -> %d KiB, goroutines %d -> %d",
		n, parkedIn.Round(time.Millisecond), baseRSS, peakRSS, float64(peakRSS-baseRSS)/float64(n), baseHeap, peakHeap, baseGoroutines, peakGoroutines)
	if peakGoroutines < baseGoroutines+n {
		t.Fatalf("only %d goroutines with %d parked calls: are the calls really parked?", peakGoroutines, n)
	}

	deadline := time.Now().Add(ttl + 60*time.Second)
	for {
		sessions := sessionsOf(server)
		gr := g.goroutines(t)
		// Idle keep-alive connections to the upstream (at most 128, two
		// goroutines each) may stay.
		if sessions == 0 && gr <= baseGoroutines+300 {
			heap := g.heapKiB(t)
			t.Logf("after expiry: gateway RSS %d KiB, heap in use %d KiB, goroutines %d, upstream sessions %d", g.rssKiB(t), heap, gr, sessions)
			// The runtime keeps the descriptors of exited goroutines for
			// reuse (about 0.6 KiB each, never freed): allow 1 KiB per
			// goroutine the peak had, on top of a quarter of the peak.
			if allowed := baseHeap + (peakHeap-baseHeap)/4 + (peakGoroutines - baseGoroutines); heap > allowed {
				t.Errorf("heap in use %d KiB after expiry (allowed %d KiB): more than a quarter of the parked calls' %d KiB is still held", heap, allowed, peakHeap-baseHeap)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after expiry: %d upstream sessions and %d goroutines (baseline %d) remain", sessions, gr, baseGoroutines)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// parkMany parks n anonymous calls (ids 0 to n-1) through url, 32 at a
// time; it returns how many did not park and the first error.
func parkMany(url string, n int) (failed int, first error) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 32}}
	defer client.CloseIdleConnections()
	var wg sync.WaitGroup
	var mu sync.Mutex
	work := make(chan int)
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				if err := parkOne(client, url, i); err != nil {
					mu.Lock()
					if failed++; first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	return failed, first
}

// parkOne sends a tools/call that parks and checks the input_required.
func parkOne(client *http.Client, url string, i int) error {
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"ask","arguments":{},"_meta":{`+
		`"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}}}`, i)
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", "ask")
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"input_required"`) {
		return fmt.Errorf("call %d: HTTP %d %s", i, resp.StatusCode, b)
	}
	return nil
}

// goroutines reads the gateway's goroutine count from Caddy's admin pprof.
func (g *gateway) goroutines(t *testing.T) int {
	t.Helper()
	resp, err := http.Get("http://" + g.AdminAddr + "/debug/pprof/goroutine?debug=1")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	line, _ := bufio.NewReader(resp.Body).ReadString('\n')
	var total int
	if _, err := fmt.Sscanf(line, "goroutine profile: total %d", &total); err != nil {
		t.Fatalf("reading goroutine count from %q: %v", line, err)
	}
	return total
}

// heapKiB reads the gateway's heap in use (after a GC) from Caddy's admin
// expvar endpoint.
func (g *gateway) heapKiB(t *testing.T) int {
	t.Helper()
	// A heap profile request makes the runtime collect first.
	if resp, err := http.Get("http://" + g.AdminAddr + "/debug/pprof/heap?gc=1"); err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	resp, err := http.Get("http://" + g.AdminAddr + "/debug/vars")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var vars struct {
		Memstats struct{ HeapInuse uint64 } `json:"memstats"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&vars); err != nil {
		t.Fatal(err)
	}
	return int(vars.Memstats.HeapInuse >> 10)
}

// rssKiB reads the gateway process's resident memory.
func (g *gateway) rssKiB(t *testing.T) int {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", g.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kib, _ := strconv.Atoi(f[1])
			return kib
		}
	}
	t.Fatal("no VmRSS")
	return 0
}
