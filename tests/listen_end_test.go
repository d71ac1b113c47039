package tests

// How a subscriptions/listen stream ends: the gateway ends every one it
// serves or relays with the graceful completion result (a response to the
// listen request whose _meta names the subscription) before it closes it,
// and passes an upstream's own completion on; a legacy client's GET
// stream, which has no request to answer, ends when its upstream
// subscription ends the graceful way.

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// listenThrough opens a subscriptions/listen with filter through the
// gateway at url and returns its events once it is acknowledged.
func listenThrough(t *testing.T, url string, id int, filter map[string]any) <-chan sseMsg {
	t.Helper()
	resp := post(t, url, modernHeaders(modernVersion, "subscriptions/listen", ""),
		rpcBody(t, id, "subscriptions/listen", map[string]any{"_meta": meta(modernVersion), "notifications": filter}))
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("subscriptions/listen: HTTP %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	events := readSSE(resp.Body)
	if ack := nextData(t, events); !strings.Contains(ack.data, `"notifications/subscriptions/acknowledged"`) {
		t.Fatalf("the listen stream began with %s, not its acknowledgement", ack.data)
	}
	return events
}

// awaitCompletion fails unless the listen stream events, of the listen
// request id, carries the graceful completion result within notHang,
// {"resultType":"complete","_meta":{"io.modelcontextprotocol/subscriptionId":id}}
// (other _meta keys, such as the serverInfo every result may carry,
// allowed), and then closes; it returns the result's _meta.
// Notifications before it are skipped.
func awaitCompletion(t *testing.T, events <-chan sseMsg, id int) map[string]any {
	t.Helper()
	deadline := time.After(notHang)
	for {
		select {
		case m, ok := <-events:
			if !ok {
				t.Fatal("the listen stream closed without the completion result")
			}
			var got struct {
				JSONRPC string          `json:"jsonrpc"`
				ID      json.RawMessage `json:"id"`
				Method  string          `json:"method"`
				Result  map[string]any  `json:"result"`
			}
			if m.data == "" || json.Unmarshal([]byte(m.data), &got) == nil && got.Method != "" {
				continue
			}
			meta, _ := got.Result["_meta"].(map[string]any)
			if got.JSONRPC != "2.0" || string(got.ID) != strconv.Itoa(id) || len(got.Result) != 2 || got.Result["resultType"] != "complete" ||
				meta["io.modelcontextprotocol/subscriptionId"] != float64(id) {
				t.Fatalf("the listen stream ended with %s, want the completion result for id %d", m.data, id)
			}
			for {
				select {
				case m, ok := <-events:
					if !ok {
						return meta
					}
					if m.data != "" {
						t.Fatalf("after the completion result: %s", m.data)
					}
				case <-deadline:
					t.Fatalf("the listen stream still open %v after its completion result", notHang)
				}
			}
		case <-deadline:
			t.Fatalf("no completion result on the listen stream within %v", notHang)
		}
	}
}

// checkServerInfo fails unless meta names the server name.
func checkServerInfo(t *testing.T, meta map[string]any, name string) {
	t.Helper()
	if info, _ := meta["io.modelcontextprotocol/serverInfo"].(map[string]any); info["name"] != name {
		t.Errorf("_meta serverInfo %v, want the upstream's (%s)", meta["io.modelcontextprotocol/serverInfo"], name)
	}
}

// TestListenCompletionForward: a modern client's subscriptions/listen
// served by the forward bridge from a legacy upstream (the go-sdk) ends
// with the completion result when the gateway closes it (a reload, a
// graceful stop) and when the upstream goes away (its GET stream ends
// and cannot be opened again: before, the stream stayed open, carrying
// nothing, for as long as the client held it).
func TestListenCompletionForward(t *testing.T) {
	t.Parallel()
	filter := map[string]any{"toolsListChanged": true}
	t.Run("reload", func(t *testing.T) {
		t.Parallel()
		up, _ := startClosableLegacy(t)
		block := "\t\tupstream " + up + " {\n\t\t\tera legacy\n\t\t}"
		g := startGateway(t, block)
		events := listenThrough(t, g.URL, 7, filter)
		g.reload(t, block+"\n\t\tkeepalive_interval 10s")
		checkServerInfo(t, awaitCompletion(t, events, 7), "final-shapes-legacy")
	})
	t.Run("stop", func(t *testing.T) {
		t.Parallel()
		up, _ := startClosableLegacy(t)
		g := startGateway(t, "\t\tupstream "+up+" {\n\t\t\tera legacy\n\t\t}")
		events := listenThrough(t, g.URL, 8, filter)
		g.terminate(t)
		awaitCompletion(t, events, 8)
		g.awaitExit(t)
	})
	t.Run("upstream gone", func(t *testing.T) {
		t.Parallel()
		up, down := startClosableLegacy(t)
		g := startGateway(t, "\t\tupstream "+up+" {\n\t\t\tera legacy\n\t\t}")
		events := listenThrough(t, g.URL, 9, filter)
		down()
		awaitCompletion(t, events, 9)
	})
}

// TestListenCompletionPassThrough: in front of a modern upstream (the
// go-sdk everything-server, stateless), the upstream's own completion
// reaches the client as it sent it (a listen for nothing is acknowledged
// and completed at once by it), and a listen the gateway closes on a
// reload ends with the completion result, not with the error for a call
// it abandoned (-32603) that it ended with before.
func TestListenCompletionPassThrough(t *testing.T) {
	t.Parallel()
	block := "\t\tupstream " + startGoEverything(t, true) + " {\n\t\t\tera modern\n\t\t}"
	g := startGateway(t, block)
	checkServerInfo(t, awaitCompletion(t, listenThrough(t, g.URL, 11, map[string]any{}), 11), "mcp-conformance-test-server")

	events := listenThrough(t, g.URL, 12, map[string]any{"toolsListChanged": true})
	g.reload(t, block+"\n\t\tkeepalive_interval 10s")
	awaitCompletion(t, events, 12)
}

// TestListenCompletionReverse: a legacy client's GET stream, served by the
// reverse bridge over an upstream subscriptions/listen, ends when the
// upstream ends that subscription the graceful way (the legacy stream has
// no response to carry the result: the client opens it again, as legacy
// clients do), where before the gateway kept it open and subscribed again
// itself; the client's next GET opens a new upstream subscription.
func TestListenCompletionReverse(t *testing.T) {
	t.Parallel()
	u := newListenUpstream(t)
	g := startGateway(t, u.block())
	sid, _ := initReverse(t, g.URL, "2025-11-25", `{}`, nil)
	lines := openGetStream(t, g.URL, sid)
	waitFor(t, "the upstream subscription", func() bool { return u.open.Load() == 1 })
	u.Complete()
	waitClosed(t, lines, notHang)
	if n := u.listens.Load(); n != 1 {
		t.Fatalf("the gateway subscribed %d times, want once (the client's to open its stream again)", n)
	}

	openGetStream(t, g.URL, sid)
	waitFor(t, "a new upstream subscription for the new GET stream", func() bool { return u.open.Load() == 1 && u.listens.Load() == 2 })
}

// tsListen runs tests/node/listen-client.mjs (the TypeScript SDK 2.x client)
// against url and returns its lines once the first one, the acknowledged
// subscription, came; the next says how the subscription ended, as the
// SDK tells it.
func tsListen(t *testing.T, url string) <-chan string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), nodeScriptTimeout)
	t.Cleanup(cancel)
	cmd := groupCommand(ctx, nodeBin(t), filepath.Join(testsDir(t), "node", "listen-client.mjs"), url)
	cmd.Dir = testsDir(t)
	stderr := &peerLog{}
	cmd.Stderr = stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 4)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		_ = cmd.Wait()
	}()
	select {
	case l, ok := <-lines:
		if !ok || !strings.Contains(l, `"honoredFilter":{"toolsListChanged":true}`) {
			t.Fatalf("listen-client: %q, want the acknowledged subscription; stderr:\n%s", l, stderr.String())
		}
	case <-time.After(notHang):
		t.Fatalf("listen-client: no subscription within %v; stderr:\n%s", notHang, stderr.String())
	}
	return lines
}

// TestListenCompletionTSClient: the TypeScript SDK 2.x client, listening
// through the gateway, reports the subscription ended 'graceful' when the
// gateway ends it: its legacy upstream gone (forward bridge), a reload in
// front of a modern upstream (pass-through).
func TestListenCompletionTSClient(t *testing.T) {
	t.Parallel()
	ended := func(t *testing.T, lines <-chan string) {
		t.Helper()
		start := time.Now()
		select {
		case l := <-lines:
			t.Logf("listen-client, %v later: %s", time.Since(start).Round(time.Millisecond), l)
			if l != `{"closed":"graceful"}` {
				t.Fatalf("listen-client: %q, want {\"closed\":\"graceful\"}", l)
			}
		case <-time.After(notHang):
			t.Fatalf("listen-client: the subscription had not ended %v later", notHang)
		}
	}
	t.Run("forward, upstream gone", func(t *testing.T) {
		t.Parallel()
		up, down := startClosableLegacy(t)
		g := startGateway(t, "\t\tupstream "+up+" {\n\t\t\tera legacy\n\t\t}")
		lines := tsListen(t, g.URL)
		down()
		ended(t, lines)
	})
	t.Run("pass-through, reload", func(t *testing.T) {
		t.Parallel()
		block := "\t\tupstream " + startGoEverything(t, true) + " {\n\t\t\tera modern\n\t\t}"
		g := startGateway(t, block)
		lines := tsListen(t, g.URL)
		g.reload(t, block+"\n\t\tkeepalive_interval 10s")
		ended(t, lines)
	})
}
