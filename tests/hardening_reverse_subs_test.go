package tests

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestHardeningReverseSubscribeMemory: 200 MiB of
// resources/subscribe URIs sent by anonymous clients retain at most 64 MiB
// of the gateway's memory. First 200 URIs of 1 MiB on one session: each is
// refused (-32602, longer than 8 KiB). Then 200 MiB of 8 KiB URIs over 1600
// sessions: a session keeps at most 7 of them (64 KiB), the anonymous
// principal at most 4 MiB in all (then 429). The growth of the process's
// VmHWM and VmRSS is logged. Run it with:
// go test -count=1 -run TestHardeningReverseSubscribeMemory -v ./tests/
func TestHardeningReverseSubscribeMemory(t *testing.T) {
	t.Parallel()
	up := newListenUpstream(t)
	g := startGateway(t, up.block())
	before := g.memKiB(t)

	sid, err := heldInit(g.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	long := 0
	for i := range 200 {
		uri := fmt.Sprintf("test://%d/%s", i, strings.Repeat("x", 1<<20))
		a, err := heldCall(g.URL, http.MethodPost, sid, "", subscribeBody("subscribe", uri))
		if err != nil {
			t.Fatal(err)
		}
		if a.code != -32602 {
			long++
		}
	}
	mid := g.memKiB(t)
	t.Logf("200 URIs of 1 MiB on one session: VmHWM %d → %d KiB (+%d), VmRSS %d → %d KiB (+%d)",
		before["VmHWM"], mid["VmHWM"], mid["VmHWM"]-before["VmHWM"], before["VmRSS"], mid["VmRSS"], mid["VmRSS"]-before["VmRSS"])
	if long > 0 {
		t.Errorf("%d of 200 URIs of 1 MiB were not refused with -32602", long)
	}

	const sessions, perSession = 1600, 16
	var kept, refused429, other atomic.Int64
	var maxKept atomic.Int64
	work := make(chan int)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				sid, err := heldInit(g.URL, "")
				if err != nil {
					other.Add(1)
					continue
				}
				n := int64(0)
				for j := range perSession {
					uri := fmt.Sprintf("test://%d/%d/%s", i, j, strings.Repeat("y", 8<<10-32))
					a, err := heldCall(g.URL, http.MethodPost, sid, "", subscribeBody("subscribe", uri))
					switch {
					case err != nil:
						other.Add(1)
					case a.status == http.StatusOK && a.code == 0:
						n++
					case a.status == http.StatusTooManyRequests && a.code == -32603:
						refused429.Add(1)
					case a.code != -32602:
						other.Add(1)
					}
				}
				kept.Add(n)
				for old := maxKept.Load(); n > old && !maxKept.CompareAndSwap(old, n); old = maxKept.Load() {
				}
			}
		}()
	}
	for i := range sessions {
		work <- i
	}
	close(work)
	wg.Wait()
	after := g.memKiB(t)
	t.Logf("%d sessions × %d URIs of 8 KiB (200 MiB): %d kept (at most %d per session), %d refused 429, %d other; VmHWM %d → %d KiB (+%d), VmRSS %d → %d KiB (+%d) since the start",
		sessions, perSession, kept.Load(), maxKept.Load(), refused429.Load(), other.Load(),
		before["VmHWM"], after["VmHWM"], after["VmHWM"]-before["VmHWM"], before["VmRSS"], after["VmRSS"], after["VmRSS"]-before["VmRSS"])
	if maxKept.Load() > 7 {
		t.Errorf("a session kept %d URIs of 8 KiB, want at most 7 (64 KiB)", maxKept.Load())
	}
	if kept.Load()*(8<<10) > 4<<20 || refused429.Load() == 0 {
		t.Errorf("the anonymous principal kept %d URIs of 8 KiB (%d refused with 429), want at most 4 MiB", kept.Load(), refused429.Load())
	}
	if other.Load() > 0 {
		t.Errorf("%d requests failed otherwise", other.Load())
	}
	if grew := after["VmRSS"] - before["VmRSS"]; grew > 64<<10 {
		t.Errorf("VmRSS grew by %d KiB, want at most 64 MiB", grew)
	}
}

// TestHardeningReverseResubscribe: with the session's
// GET stream open, subscribes and unsubscribes make the upstream receive at
// most twice the bytes the client sent in them (every
// subscriptions/listen carries all the session's URIs). The last filter
// still carries every subscribed URI, and an unsubscribed URI's updates no
// longer reach the client.
func TestHardeningReverseResubscribe(t *testing.T) {
	t.Parallel()
	up := newListenUpstream(t)
	g := startGateway(t, up.block())
	sid, err := heldInit(g.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	stream := send(t, http.MethodGet, g.URL, legacyHeaders(sid), "")
	if stream.StatusCode != http.StatusOK {
		t.Fatalf("GET: HTTP %d", stream.StatusCode)
	}
	events := readSSE(stream.Body)
	waitFor(t, "the first subscription", func() bool { return up.open.Load() == 1 })

	uris := make([]string, 7)
	for i := range uris {
		uris[i] = fmt.Sprintf("test://r%d/%s", i, strings.Repeat("z", 8<<10-64))
	}
	var sent int64
	do := func(method, uri string) {
		t.Helper()
		body := subscribeBody(method, uri)
		sent += int64(len(body))
		if a, err := heldCall(g.URL, http.MethodPost, sid, "", body); err != nil || a.status != http.StatusOK || a.code != 0 {
			t.Fatalf("%s: %+v %v", method, a, err)
		}
	}
	for _, u := range uris {
		do("subscribe", u)
	}
	for i := range 40 {
		do("unsubscribe", uris[i%len(uris)])
		do("subscribe", uris[i%len(uris)])
	}
	waitFor(t, "a filter of every subscribed URI", func() bool { return up.lastHas(uris) })
	time.Sleep(500 * time.Millisecond) // anything still on its way
	got := up.listenBytes.Load()
	t.Logf("the client sent %d bytes of subscribes, the upstream received %d bytes of subscriptions/listen in %d requests (×%.2f)",
		sent, got, up.listens.Load(), float64(got)/float64(sent))
	if got > 2*sent {
		t.Errorf("the upstream received %d bytes for the client's %d, want at most twice", got, sent)
	}

	do("unsubscribe", uris[0])
	waitFor(t, "one subscription", func() bool { return up.open.Load() == 1 })
	up.Push(uris[0])
	up.Push(uris[1])
	for {
		ev := nextData(t, events)
		var n struct {
			Method string `json:"method"`
			Params struct {
				URI string `json:"uri"`
			} `json:"params"`
		}
		if json.Unmarshal([]byte(ev.data), &n) != nil || n.Method != "notifications/resources/updated" {
			continue
		}
		if n.Params.URI != uris[1] {
			t.Fatalf("the client got an update of %.20s…, want only those of its subscribed URIs", n.Params.URI)
		}
		break
	}
}
