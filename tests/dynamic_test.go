package tests

// Dynamic upstreams: `dynamic srv` inside mcp_gateway, from a
// DNS server the test runs and whose answers it changes.

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// srvServer is a DNS server written for the dynamic-upstream tests, on
// 127.0.0.1 over UDP: it answers every SRV question with one record per
// port the test set (target `localhost.`, or target when set, the port),
// and every other question with no record. set changes the answer.
type srvServer struct {
	addr   string
	conn   net.PacketConn
	target string // a fully qualified name; "": localhost.
	mu     sync.Mutex
	ports  []int
}

func newSRVServer(t *testing.T) *srvServer {
	t.Helper()
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &srvServer{addr: conn.LocalAddr().String(), conn: conn}
	go s.serve()
	t.Cleanup(func() { _ = conn.Close() })
	return s
}

// set makes the SRV answer name these ports.
func (s *srvServer) set(ports ...int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ports = ports
}

func (s *srvServer) serve() {
	buf := make([]byte, 1500)
	for {
		n, from, err := s.conn.ReadFrom(buf)
		if err != nil {
			return
		}
		if out, err := s.answer(buf[:n]); err == nil {
			_, _ = s.conn.WriteTo(out, from)
		}
	}
}

func (s *srvServer) answer(query []byte) ([]byte, error) {
	var p dnsmessage.Parser
	h, err := p.Start(query)
	if err != nil {
		return nil, err
	}
	q, err := p.Question()
	if err != nil {
		return nil, err
	}
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true,
		RecursionDesired: h.RecursionDesired, RecursionAvailable: true})
	if err := b.StartQuestions(); err != nil {
		return nil, err
	}
	if err := b.Question(q); err != nil {
		return nil, err
	}
	if err := b.StartAnswers(); err != nil {
		return nil, err
	}
	if q.Type == dnsmessage.TypeSRV {
		s.mu.Lock()
		ports := append([]int(nil), s.ports...)
		s.mu.Unlock()
		target := "localhost."
		if s.target != "" {
			target = s.target
		}
		for _, port := range ports {
			err := b.SRVResource(dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 1},
				dnsmessage.SRVResource{Priority: 10, Weight: 10, Port: uint16(port), Target: dnsmessage.MustNewName(target)})
			if err != nil {
				return nil, err
			}
		}
	}
	return b.Finish()
}

// portOf is the port of an in-process upstream.
func portOf(t *testing.T, p *inProcessLegacy) int {
	t.Helper()
	_, port, err := net.SplitHostPort(p.addr)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(port)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// rawSession opens a legacy session through the gateway with raw HTTP (10s
// deadline per request) and returns its id and the name of the server that
// answered initialize.
func rawSession(t *testing.T, g *gateway) (sid, server string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := tryPostContext(ctx, g.URL, nil, legacyInit)
	if err != nil {
		t.Fatalf("initialize: %v", err)
	}
	x := readRPC(t, resp, 1)
	if x.Status != http.StatusOK || x.Resp == nil || x.Resp.Error != nil {
		t.Fatalf("initialize: %s", x)
	}
	var res struct {
		ServerInfo struct {
			Name string `json:"name"`
		} `json:"serverInfo"`
	}
	if err := json.Unmarshal(x.Resp.Result, &res); err != nil {
		t.Fatal(err)
	}
	sid = x.Header.Get("Mcp-Session-Id")
	r, err := tryPostContext(ctx, g.URL, legacyHeaders(sid), `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	if err != nil {
		t.Fatalf("notifications/initialized: %v", err)
	}
	r.Body.Close()
	if r.StatusCode != http.StatusAccepted {
		t.Fatalf("notifications/initialized: status %d", r.StatusCode)
	}
	return sid, res.ServerInfo.Name
}

// rawWhoami calls whoami in the session sid, within 10s.
func rawWhoami(t *testing.T, g *gateway, sid string, id int) rpcExchange {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := tryPostContext(ctx, g.URL, legacyHeaders(sid),
		rpcBody(t, id, "tools/call", map[string]any{"name": "whoami", "arguments": map[string]any{}}))
	if err != nil {
		t.Fatalf("whoami: %v", err)
	}
	return readRPC(t, resp, id)
}

// TestDynamicUpstreams: upstreams come from `dynamic srv` with a resolver
// the test runs. New sessions go only to the upstreams the SRV answer
// names; one that appears takes sessions; when it leaves the answer, a
// session pinned to it gets the gateway's 404 (-32001, initialize again),
// and its requests never reach another upstream.
func TestDynamicUpstreams(t *testing.T) {
	t.Parallel()
	requireLocalhostIPv4(t)
	a, b := newFaultyLegacy(t, "a"), newFaultyLegacy(t, "b")
	dns := newSRVServer(t)
	dns.set(portOf(t, a.inProcessLegacy))
	g := startGateway(t, fmt.Sprintf("\t\tdynamic srv {\n\t\t\tname _mcp._tcp.gateway.test\n\t\t\trefresh 50ms\n\t\t\tresolvers %s\n\t\t}\n"+
		"\t\tdynamic_endpoint http:///mcp {\n\t\t\tera legacy\n\t\t}\n\t\tlb_policy round_robin", dns.addr))

	for i := range 4 {
		if _, on := rawSession(t, g); on != "a" {
			t.Fatalf("session %d went to %q while the SRV answer names only a", i, on)
		}
	}

	dns.set(portOf(t, a.inProcessLegacy), portOf(t, b.inProcessLegacy))
	var sidB string
	deadline := time.Now().Add(20 * time.Second)
	for sidB == "" {
		if sid, on := rawSession(t, g); on == "b" {
			sidB = sid
		} else if time.Now().After(deadline) {
			t.Fatal("no session reached b within 20s of its appearing in the SRV answer")
		}
	}
	if got := checkToolResult(t, rawWhoami(t, g, sidB, 2), 2); got != "b" {
		t.Fatalf("b's session answered %q", got)
	}
	var ups []map[string]any
	adminGET(t, g, "/mcp_gateway/upstreams", &ups)
	wantURL := fmt.Sprintf("http://localhost:%d/mcp", portOf(t, b.inProcessLegacy))
	listed := false
	for _, u := range ups {
		listed = listed || u["url"] == wantURL
	}
	if !listed {
		t.Fatalf("/mcp_gateway/upstreams does not list %s: %v", wantURL, ups)
	}
	var bSessions []string
	for ss := range b.server.Sessions() {
		bSessions = append(bSessions, ss.ID())
	}

	dns.set(portOf(t, a.inProcessLegacy))
	deadline = time.Now().Add(20 * time.Second)
	for id := 3; ; id++ {
		x := rawWhoami(t, g, sidB, id)
		if x.Status == http.StatusNotFound {
			checkRPCError(t, x, http.StatusNotFound, -32001, id)
			break
		}
		if got := checkToolResult(t, x, id); got != "b" {
			t.Fatalf("b's session was served by %q", got)
		}
		if time.Now().After(deadline) {
			t.Fatal("b's session still served 20s after b left the SRV answer")
		}
		time.Sleep(50 * time.Millisecond)
	}
	for i := range 4 {
		if _, on := rawSession(t, g); on != "a" {
			t.Fatalf("session %d went to %q after b left the SRV answer", i, on)
		}
	}
	for _, sid := range bSessions {
		if _, seen := a.sessions.Load(sid); seen {
			t.Fatalf("a received b's session %s", sid)
		}
	}
}
