package tests

// Per-upstream options and the proxy decision of dynamic upstreams (issue
// 26): an upstream a dynamic source returns has every option of the
// dynamic_endpoint template, and is reached as a static one would be.

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/tests/support"
)

// srvBlock is a `dynamic srv` source asking dns, with a dynamic_endpoint
// block of lines.
func srvBlock(dns *srvServer, endpoint ...string) string {
	return fmt.Sprintf("\t\tdynamic srv {\n\t\t\tname _mcp._tcp.gateway.test\n\t\t\trefresh 50ms\n\t\t\tresolvers %s\n\t\t}\n"+
		"\t\tdynamic_endpoint http:///mcp {\n\t\t\t%s\n\t\t}\n", dns.addr, strings.Join(endpoint, "\n\t\t\t"))
}

// TestDynamicTasksOff: `tasks off` in the dynamic_endpoint block applies
// to the upstreams the source returns, as it does in an upstream block
// (TestReverseTasksOff): a legacy client's tools/call declares no Tasks
// extension, so the server refuses a tool that needs a task. On main the
// option parsed and was ignored for dynamic upstreams.
func TestDynamicTasksOff(t *testing.T) {
	t.Parallel()
	fx := support.NewModernTasksServer(t)
	dns := newSRVServer(t)
	dns.set(portOfURL(t, fx.URL))
	g := startGateway(t, srvBlock(dns, "era modern", "tasks off"))
	sid, _ := initReverse(t, g.URL, "2025-11-25", `{}`, nil)
	if resp := revCall(t, g.URL, sid, 2, "slow_task", `{"ms":10}`); resp.Error == nil || resp.Error.Code != -32600 || !strings.Contains(resp.Error.Message, "Tasks extension") {
		t.Fatalf("slow_task with tasks off: %s; want -32600 with the server's message", revSummary(resp))
	}
	calls := fx.Requests("tools/call")
	if len(calls) == 0 {
		t.Fatal("no tools/call reached the upstream")
	}
	for _, r := range calls {
		if r.DeclaredTasks {
			t.Fatalf("tools/call declared the Tasks extension with tasks off: %s", r.Params)
		}
	}
}

// forwardProxy is an HTTP forward proxy on loopback, written for the
// tests: it takes requests in absolute form (`POST http://host/path`),
// records the host each named, and sends them to backend whatever the
// host (the names the tests use resolve nowhere).
type forwardProxy struct {
	url   string
	mu    sync.Mutex
	hosts []string
}

func newForwardProxy(t *testing.T, backend string) *forwardProxy {
	t.Helper()
	p := &forwardProxy{}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme, pr.Out.URL.Host, pr.Out.Host = "http", backend, ""
		},
		FlushInterval: -1,
	}
	srv := httptest.NewServer(fullDuplex(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !r.URL.IsAbs() {
			http.Error(w, "not a proxy request", http.StatusBadRequest)
			return
		}
		p.mu.Lock()
		p.hosts = append(p.hosts, r.URL.Host)
		p.mu.Unlock()
		rp.ServeHTTP(w, r)
	})))
	t.Cleanup(srv.Close)
	p.url = srv.URL
	return p
}

// proxied returns the hosts of the requests the proxy took.
func (p *forwardProxy) proxied() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.hosts)
}

// TestDynamicTransportProxy: under `transport http`, the forward bridge
// reaches a dynamic upstream to which HTTP_PROXY applies through the
// proxy, as it does a static one: a modern client's call to a legacy
// server named by an SRV record (a name only the proxy can reach) is
// answered, and the proxy carried the bridge's requests. On main the
// bridge dialled the name on its own connections and the call failed.
func TestDynamicTransportProxy(t *testing.T) {
	// Not in parallel: t.Setenv (the proxy environment of the process).
	up := newInProcessLegacy(t, "behind-proxy")
	proxy := newForwardProxy(t, up.addr)
	for _, k := range []string{"HTTP_PROXY", "http_proxy"} {
		t.Setenv(k, proxy.url)
	}
	for _, k := range []string{"NO_PROXY", "no_proxy"} {
		t.Setenv(k, "")
	}
	dns := newSRVServer(t)
	dns.target = "mcp.gateway.test."
	dns.set(portOf(t, up))
	g := startGateway(t, srvBlock(dns, "era legacy")+"\t\ttransport http {\n\t\t\tdial_timeout 2s\n\t\t}")

	hdr, body := whoamiCall(t, 1)
	if got := checkToolResult(t, postRPC(t, g.URL, hdr, body, 1), 1); got != "behind-proxy" {
		t.Fatalf("whoami: %q", got)
	}
	want := fmt.Sprintf("mcp.gateway.test:%d", portOf(t, up))
	hosts := proxy.proxied()
	if len(hosts) == 0 || slices.ContainsFunc(hosts, func(h string) bool { return h != want }) {
		t.Fatalf("the proxy carried requests for %q, want only (and some) for %s", hosts, want)
	}
}

// portOfURL is the port of an upstream's URL.
func portOfURL(t *testing.T, raw string) int {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(u.Port())
	if err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	return n
}
