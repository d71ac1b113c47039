package tests

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// openStreams opens a GET stream for each of n new sessions of who at
// once, and returns how many each status got (a refusal without -32603
// counts as its status negated); the streams opened stay open until
// closeAll is called or the test ends.
func openStreams(t *testing.T, url, who string, n int) (got map[int]int, closeAll func()) {
	t.Helper()
	sids := make([]string, n)
	for i := range sids {
		sid, err := heldInit(url, who)
		if err != nil {
			t.Fatal(err)
		}
		sids[i] = sid
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	var mu sync.Mutex
	got = map[int]int{}
	var wg sync.WaitGroup
	for _, sid := range sids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			req.Header.Set("Accept", "text/event-stream")
			req.Header.Set("Mcp-Session-Id", sid)
			req.Header.Set("MCP-Protocol-Version", "2025-11-25")
			if who != "" {
				req.Header.Set("Authorization", who)
			}
			resp, err := http.DefaultClient.Do(req)
			status := 0
			if err == nil {
				status = resp.StatusCode
				if status == http.StatusOK {
					go func() { _, _ = io.Copy(io.Discard, resp.Body); resp.Body.Close() }()
				} else {
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if !strings.Contains(string(b), `"code":-32603`) {
						status = -status // refused without -32603
					}
				}
			}
			mu.Lock()
			got[status]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	return got, cancel
}

// TestHardeningReverseGetStreams: 400 anonymous GET
// streams of gateway-held sessions hold at most 100 upstream
// subscriptions/listen (max_get_streams_per_principal; the others get 429
// -32603), another principal is not affected, and max_get_streams bounds
// them all (503 -32603). A closed stream gives its place back.
func TestHardeningReverseGetStreams(t *testing.T) {
	t.Parallel()
	up := newListenUpstream(t)
	g := startGateway(t, up.block())
	before := g.memKiB(t)
	got, closeAll := openStreams(t, g.URL, "", 400)
	// Each admitted stream holds one upstream subscriptions/listen.
	waitFor(t, "the admitted streams' upstream subscriptions", func() bool { return int(up.open.Load()) >= got[http.StatusOK] })
	after := g.memKiB(t)
	t.Logf("400 anonymous GET streams: %v (HTTP status: count); %d upstream subscriptions open, at most %d at once; VmHWM +%d KiB, VmRSS +%d KiB",
		got, up.open.Load(), up.maxOpen.Load(), after["VmHWM"]-before["VmHWM"], after["VmRSS"]-before["VmRSS"])
	if got[http.StatusOK] != 100 || got[http.StatusTooManyRequests] != 300 {
		t.Errorf("400 anonymous GET streams: %v, want 100 × 200 and 300 × 429 (-32603)", got)
	}
	if up.maxOpen.Load() > 120 {
		t.Errorf("the upstream held %d subscriptions/listen at once, want at most 120", up.maxOpen.Load())
	}
	if bob, _ := openStreams(t, g.URL, "Bearer bob", 5); bob[http.StatusOK] != 5 {
		t.Errorf("another principal's GET streams: %v, want 5 × 200", bob)
	}
	closeAll()
	waitFor(t, "the closed streams' upstream subscriptions to end", func() bool { return up.open.Load() == 5 })
	if again, _ := openStreams(t, g.URL, "", 100); again[http.StatusOK] != 100 {
		t.Errorf("after the anonymous streams closed, 100 more: %v, want 100 × 200", again)
	}

	// max_get_streams, on a gateway of its own.
	up2 := newListenUpstream(t)
	g2 := startGateway(t, up2.block()+"\t\tmax_get_streams 30\n\t\tmax_get_streams_per_principal 20\n")
	a, _ := openStreams(t, g2.URL, "Bearer a", 25)
	b, _ := openStreams(t, g2.URL, "Bearer b", 15)
	if a[http.StatusOK] != 20 || a[http.StatusTooManyRequests] != 5 || b[http.StatusOK] != 10 || b[http.StatusServiceUnavailable] != 5 {
		t.Errorf("max_get_streams 30, max_get_streams_per_principal 20: a %v, b %v; want a 20 × 200, 5 × 429; b 10 × 200, 5 × 503", a, b)
	}
}

// TestHardeningReverseFactsFlush: flooding the
// instance's table of session facts with 110,100 DELETEd sessions of 11
// principals does not revive a session DELETEd before; the table refuses
// the sessions it has no room for (429 past a principal's 10,000, 503 past
// 100,000) and keeps every entry it holds.
func TestHardeningReverseFactsFlush(t *testing.T) {
	t.Parallel()
	up := newListenUpstream(t)
	g := startGateway(t, up.block())
	victim, err := heldInit(g.URL, "Bearer victim")
	if err != nil {
		t.Fatal(err)
	}
	if a, err := heldCall(g.URL, http.MethodDelete, victim, "Bearer victim", ""); err != nil || a.status != http.StatusOK {
		t.Fatalf("DELETE: %+v %v", a, err)
	}
	ping := `{"jsonrpc":"2.0","id":3,"method":"ping"}`
	if a, _ := heldCall(g.URL, http.MethodPost, victim, "Bearer victim", ping); a.status != http.StatusNotFound {
		t.Fatalf("the deleted session's ping: HTTP %d, want 404", a.status)
	}

	before := g.memKiB(t)
	start := time.Now()
	statuses := map[int]*atomic.Int64{}
	for _, s := range []int{200, 429, 503, 0} {
		statuses[s] = new(atomic.Int64)
	}
	work := make(chan string)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for who := range work {
				sid, err := heldInit(g.URL, who)
				if err != nil {
					statuses[0].Add(1)
					continue
				}
				a, err := heldCall(g.URL, http.MethodDelete, sid, who, "")
				if c := statuses[a.status]; err == nil && c != nil {
					c.Add(1)
				} else {
					statuses[0].Add(1)
				}
			}
		}()
	}
	for p := range 11 {
		n := 10000
		if p == 0 {
			n += 100 // past the principal's share
		}
		for range n {
			work <- fmt.Sprintf("Bearer m%d", p)
		}
	}
	close(work)
	wg.Wait()
	after := g.memKiB(t)
	t.Logf("110,100 sessions DELETEd in %v: %d × 200, %d × 429, %d × 503, %d other; VmHWM +%d KiB, VmRSS +%d KiB",
		time.Since(start).Round(time.Second), statuses[200].Load(), statuses[429].Load(), statuses[503].Load(), statuses[0].Load(),
		after["VmHWM"]-before["VmHWM"], after["VmRSS"]-before["VmRSS"])
	if a, _ := heldCall(g.URL, http.MethodPost, victim, "Bearer victim", ping); a.status != http.StatusNotFound {
		t.Errorf("after the flood, the deleted session's ping got HTTP %d, want 404", a.status)
	}
	if statuses[503].Load() == 0 || statuses[429].Load() != 100 || statuses[0].Load() > 0 {
		t.Errorf("want the DELETEs past the table's room refused with 503, the 100 past m0's share with 429, and no other failure")
	}
}
