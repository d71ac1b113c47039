package tests

// A dynamic upstream source's answers naming loopback
// (or link-local, or a cloud's metadata service) must not become upstreams:
// clients' Authorization headers go to every upstream. The victim here is
// a service on the gateway's own loopback, which records what reaches it.

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// loopbackVictim is a legacy MCP server on 127.0.0.1 that records the
// Authorization header of every request reaching it.
type loopbackVictim struct {
	port int
	mu   sync.Mutex
	auth []string
}

func newLoopbackVictim(t *testing.T) *loopbackVictim {
	t.Helper()
	v := &loopbackVictim{}
	server := mcp.NewServer(&mcp.Implementation{Name: "victim", Version: "1"}, nil)
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v.mu.Lock()
		v.auth = append(v.auth, r.Header.Get("Authorization"))
		v.mu.Unlock()
		h.ServeHTTP(w, r)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	v.port = ln.Addr().(*net.TCPAddr).Port
	return v
}

// seen returns the Authorization headers that reached v.
func (v *loopbackVictim) seen() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return append([]string(nil), v.auth...)
}

// initializeWith sends a legacy initialize carrying auth through g and
// returns the status (0: no answer within 10s).
func initializeWith(t *testing.T, g *gateway, auth string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := tryPostContext(ctx, g.URL, map[string]string{"Authorization": auth}, legacyInit)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestHardeningDynamicRefusesLoopback: by default, a dynamic source that
// does not ask loopback resolvers only (an `a` source on the system's
// resolver; a `multi` joining an SRV source on a loopback resolver with
// it) gets no loopback upstream: an address it answers is dropped, and a
// name it answers (the SRV target localhost.) is refused when the gateway
// connects; the victim on loopback receives nothing, the client's
// credential least of all. With `dynamic_refuse none` the same answers
// are upstreams (the test's setup reaches the victim).
func TestHardeningDynamicRefusesLoopback(t *testing.T) {
	t.Parallel()
	requireLocalhostIPv4(t)
	victim := newLoopbackVictim(t)
	dns := newSRVServer(t)
	dns.set(victim.port)
	endpoint := "\t\tdynamic_endpoint http:///mcp {\n\t\t\tera legacy\n\t\t}\n"
	aSource := fmt.Sprintf("\t\tdynamic a localhost %d {\n\t\t\trefresh 50ms\n\t\t\tversions ipv4\n\t\t}\n", victim.port)

	t.Run("an address answered", func(t *testing.T) {
		g := startGateway(t, aSource+endpoint)
		for range 3 {
			if st := initializeWith(t, g, "Bearer secret-a"); st == http.StatusOK {
				t.Fatalf("initialize answered %d: a loopback answer became an upstream", st)
			}
		}
		if got := victim.seen(); len(got) != 0 {
			t.Fatalf("the loopback victim received %d requests (Authorization %q)", len(got), got)
		}
		if !strings.Contains(g.Log(), "dynamic upstream refused") {
			t.Fatalf("no refusal in the log:\n%s", g.Log())
		}
	})

	// A name answered: the SRV target localhost., looked up when the
	// gateway connects. The multi source's `a` on the system resolver
	// makes it a source not on loopback.
	multi := fmt.Sprintf("\t\tdynamic multi {\n\t\t\tsrv {\n\t\t\t\tname _mcp._tcp.gateway.test\n\t\t\t\trefresh 50ms\n\t\t\t\tresolvers %s\n\t\t\t}\n"+
		"\t\t\ta localhost 1 {\n\t\t\t\tversions ipv4\n\t\t\t}\n\t\t}\n", dns.addr)
	for name, transport := range map[string]string{
		"a name answered":                 "",
		"a name answered, transport http": "\t\ttransport http {\n\t\t\tdial_timeout 3s\n\t\t}\n",
	} {
		t.Run(name, func(t *testing.T) {
			// Each client in a gateway of its own: a refused connection
			// marks the upstream down for fail_duration.
			g := startGateway(t, multi+endpoint+transport)
			if st := initializeWith(t, g, "Bearer secret-b"); st == http.StatusOK {
				t.Fatalf("initialize answered %d: the SRV target localhost. became an upstream", st)
			}
			// A modern client's call goes through the forward bridge's
			// own connections.
			gm := startGateway(t, multi+endpoint+transport)
			c := &taskClient{t: t, auth: "Bearer secret-c"}
			if x := c.send(gm.URL, "tools/list", "", map[string]any{}, map[string]any{}); x.Status == http.StatusOK && x.Resp != nil && x.Resp.Error == nil {
				t.Fatalf("a modern tools/list was answered: %s", x)
			}
			if got := victim.seen(); len(got) != 0 {
				t.Fatalf("the loopback victim received %d requests (Authorization %q)", len(got), got)
			}
			for _, g := range []*gateway{g, gm} {
				// The line is written before the answer; the log is
				// read from a pipe, which may lag behind it.
				waitLog(t, g, "refused range")
			}
		})
	}

	t.Run("dynamic_refuse none", func(t *testing.T) {
		g := startGateway(t, aSource+endpoint+"\t\tdynamic_refuse none")
		if st := initializeWith(t, g, "Bearer allowed"); st != http.StatusOK {
			t.Fatalf("initialize answered %d with dynamic_refuse none", st)
		}
		if got := victim.seen(); len(got) == 0 || got[0] != "Bearer allowed" {
			t.Fatalf("the victim saw %q, want the client's credential (the setup reaches it)", got)
		}
	})
}
