package tests

// Exactly once across a fleet: a sagaToken and a turn's Last-Event-ID
// answered at once on three instances sharing state_key and Caddy's
// storage (file_system in one directory) run the tool's continuation
// once: one instance goes on, the others refuse the token as used. A
// storage that cannot record the use refuses with 503 and leaves the
// token usable.

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/tidwall/gjson"
)

// retryCounter is a reverse proxy in front of an MCP server that counts
// the tool calls it passes carrying a requestState: the retries, each one
// run of the tool's continuation. A fixture written for these tests (no
// published server counts its executions); the server behind it is the
// TypeScript SDK 2.x modern fixture.
type retryCounter struct {
	URL     string
	retries atomic.Int32
}

// newRetryCounter serves a retryCounter in front of the MCP endpoint
// upstream until the test ends.
func newRetryCounter(t *testing.T, upstream string) *retryCounter {
	t.Helper()
	target, err := url.Parse(upstream)
	if err != nil {
		t.Fatal(err)
	}
	c := &retryCounter{}
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: target.Scheme, Host: target.Host})
	proxy.FlushInterval = -1
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if m := gjson.ParseBytes(body); m.Get("method").String() == "tools/call" && m.Get("params.requestState").String() != "" {
			c.retries.Add(1)
		}
		r.Body = io.NopCloser(strings.NewReader(string(body)))
		r.Host = target.Host
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	c.URL = srv.URL + target.Path
	return c
}

// onceFleet starts n instances in front of upstream (modern), with the
// saga and multi-turn SSE on, sharing state_key and the file_system
// storage at dir.
func onceFleet(t *testing.T, n int, upstream, dir string) []*gateway {
	t.Helper()
	ports := make([]int, n)
	for i := range ports {
		ports[i] = freePort(t)
	}
	fleet := make([]*gateway, len(ports))
	for i, port := range ports {
		block := fleetBlock(t, "\t\tupstream "+upstream+" {\n\t\t\tera modern\n\t\t}\n\t\tsaga on\n\t\tmulti_turn_sse on", "peer", ports, i)
		fleet[i] = launchGateway(t, port, "\tstorage file_system "+dir, "", block)
	}
	return fleet
}

// postAll POSTs body with hdr to every url at once and returns the
// answers, in the order of urls.
func postAll(t *testing.T, urls []string, hdr map[string]string, body string) []*http.Response {
	t.Helper()
	resps := make([]*http.Response, len(urls))
	errs := make([]error, len(urls))
	var wg sync.WaitGroup
	for i, u := range urls {
		wg.Go(func() { resps[i], errs[i] = tryPost(u, hdr, body) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("POST to instance %d: %v", i, err)
		}
	}
	return resps
}

// TestOnceAcrossFleet: one sagaToken resumed, and one turn's answers
// POSTed, on each of three instances sharing state_key and storage, all
// at once: the tool's continuation runs once (one retry reaches the
// server), one instance answers with the next round, the two others
// refuse the token as used, as one instance refuses a token used there.
func TestOnceAcrossFleet(t *testing.T) {
	t.Parallel()
	up := newRetryCounter(t, startModernFixture(t))
	fleet := onceFleet(t, 3, up.URL, t.TempDir())
	urls := []string{fleet[0].URL, fleet[1].URL, fleet[2].URL}

	s := suspended(t, callSaga(t, urls[0], nil, 1, "plan_party", map[string]any{"occasion": "picnic"}), "elicitation")
	resume := rpcBody(t, 2, "tools/resumeSaga", map[string]any{"sagaToken": s.SagaToken,
		"completedSteps": []map[string]any{accept("host", map[string]any{"name": "Ada"})}})
	went := 0
	for i, resp := range postAll(t, urls, nil, resume) {
		x := readRPC(t, resp, 2)
		if x.Resp != nil && x.Resp.Error == nil {
			suspended(t, x, "sampling")
			went++
			continue
		}
		if x.Status != http.StatusBadRequest || x.Resp == nil || x.Resp.Error.Code != -32602 || !strings.Contains(x.Resp.Error.Message, "sagaToken is not valid") {
			t.Errorf("saga, instance %d: want the next step or the token refused, got %s", i, x)
		}
	}
	if n := up.retries.Load(); went != 1 || n != 1 {
		t.Errorf("one sagaToken on three instances: %d went on, the tool's continuation ran %d times; want 1 and 1", went, n)
	}

	sid := mtOpen(t, urls[1], mtCaps)
	turn := mtTurn(t, mtCall(t, urls[1], sid, "call-9", "plan_party", map[string]any{"occasion": "tea"}), "", "elicitation/create")
	hdr := legacyHeaders(sid)
	hdr["Last-Event-ID"] = turn.token
	answers, err := json.Marshal([]map[string]any{mtAccept(turn.reqs[0], map[string]any{"name": "Bo"})})
	if err != nil {
		t.Fatal(err)
	}
	went, before := 0, up.retries.Load()
	for i, resp := range postAll(t, urls, hdr, string(answers)) {
		a := mtRead(t, resp)
		if a.token != "" {
			mtTurn(t, a, "Bo's tea", "sampling/createMessage")
			went++
			continue
		}
		if a.status != http.StatusBadRequest || a.final == nil || a.final.Error == nil || a.final.Error.Code != -32602 ||
			!strings.Contains(a.final.Error.Message, "Last-Event-ID is not valid") || string(a.final.ID) != "null" {
			t.Errorf("turn, instance %d: want the next turn or the token refused, got %s", i, a)
		}
	}
	if n := up.retries.Load() - before; went != 1 || n != 1 {
		t.Errorf("one turn's answers on three instances: %d went on, the tool's continuation ran %d times; want 1 and 1", went, n)
	}
}

// TestOnceStorageDown: an instance whose storage cannot record a token's
// use (its lock directory is a file) refuses the resume with 503 and a
// message saying nothing was done, and makes no call; once the storage is
// back, the same sagaToken goes on, once.
func TestOnceStorageDown(t *testing.T) {
	t.Parallel()
	up := newRetryCounter(t, startModernFixture(t))
	dir := t.TempDir()
	g := onceFleet(t, 1, up.URL, dir)[0]

	s := suspended(t, callSaga(t, g.URL, nil, 1, "plan_party", map[string]any{"occasion": "picnic"}), "elicitation")
	done := []map[string]any{accept("host", map[string]any{"name": "Ada"})}
	// Caddy's storage cleaning at start made the lock directory; once it
	// is done, the directory is empty, and a file takes its place.
	waitLog(t, g, "finished cleaning storage units")
	locks := filepath.Join(dir, "locks")
	if err := os.RemoveAll(locks); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(locks, []byte("not a directory"), 0o600); err != nil {
		t.Fatal(err)
	}
	x := resumeSaga(t, g.URL, nil, 2, s.SagaToken, done)
	if x.Status != http.StatusServiceUnavailable || x.Resp == nil || x.Resp.Error == nil || x.Resp.Error.Code != -32603 ||
		!strings.Contains(x.Resp.Error.Message, "nothing was done, resume again with the same sagaToken") {
		t.Fatalf("storage down: %s", x)
	}
	if n := up.retries.Load(); n != 0 {
		t.Fatalf("storage down: the tool's continuation ran %d times", n)
	}
	waitLog(t, g, "a token's use could not be recorded in the storage")
	if err := os.Remove(locks); err != nil {
		t.Fatal(err)
	}
	suspended(t, resumeSaga(t, g.URL, nil, 3, s.SagaToken, done), "sampling")
	sagaRefused(t, resumeSaga(t, g.URL, nil, 4, s.SagaToken, done), "sagaToken is not valid")
	if n := up.retries.Load(); n != 1 {
		t.Fatalf("storage back: the tool's continuation ran %d times, want 1", n)
	}
}
