package tests

// Hardening of the fleet's relay: a
// client cannot point an instance's forwarding at a host of its choosing,
// a hung owner does not hang the client, the basic_auth recipe of docs/configuration.md
// works across instances, and one client cannot starve forwarding.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/seal"
)

// victim is a listener on loopback that an attacker would like the gateway
// to reach (an admin endpoint, an internal service). It records every
// connection and request that reaches it, and answers 200 "stolen".
type victim struct {
	addr  string
	conns atomic.Int32
	hits  atomic.Int32
}

func newVictim(t *testing.T) *victim {
	t.Helper()
	v := &victim{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			v.hits.Add(1)
			_, _ = io.WriteString(w, "stolen")
		}),
		ConnState: func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				v.conns.Add(1)
			}
		},
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	v.addr = ln.Addr().String()
	return v
}

// untouched fails the test if anything reached the victim. The gateway
// answers a relayed request only after the owner (here, the victim)
// answered, so once the client has its answer, a connection would have
// been counted.
func (v *victim) untouched(t *testing.T) {
	t.Helper()
	if c, h := v.conns.Load(), v.hits.Load(); c != 0 || h != 0 {
		t.Fatalf("the victim listener saw %d connections and %d requests: the gateway relayed to it", c, h)
	}
}

// rawPost sends a POST over a new TCP connection to addr with target
// written verbatim in the request line (absolute form, say), and returns
// the response with its body read.
func rawPost(t *testing.T, addr, target string, hdr map[string]string, body string) (*http.Response, string) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n", target, addr)
	fmt.Fprintf(&b, "Accept: application/json, text/event-stream\r\nContent-Length: %d\r\nConnection: close\r\n", len(body))
	for k, v := range hdr {
		fmt.Fprintf(&b, "%s: %s\r\n", k, v)
	}
	b.WriteString("\r\n")
	b.WriteString(body)
	if _, err := io.WriteString(conn, b.String()); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("POST %s: %v", target, err)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(data)
}

// checkBadTarget checks a 400 with a JSON-RPC -32600 error body.
func checkBadTarget(t *testing.T, resp *http.Response, body string) {
	t.Helper()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, `"code":-32600`) || !strings.Contains(body, `"jsonrpc":"2.0"`) {
		t.Fatalf("an absolute-form request: HTTP %d %s, want 400 with a -32600 JSON-RPC error", resp.StatusCode, body)
	}
}

// startOpenPair runs two gateway instances sharing a state_key in front of
// upstream, found by form ("advertise" or "peer": ids gw-0 and gw-1). Each
// serves the gateway at /mcp and, through a second mcp_gateway with no
// matcher, on every other request target too, as a site whose only
// directive is `mcp_gateway { ... }` does: a request line in absolute form
// has no path for a path matcher, and reaches the gateway only so.
func startOpenPair(t *testing.T, upstream, form string) []*gateway {
	t.Helper()
	ports := []int{freePort(t), freePort(t)}
	pair := make([]*gateway, len(ports))
	for i, port := range ports {
		block := fleetBlock(t, upstream, form, ports, i)
		pair[i] = launchGateway(t, port, "", "\tmcp_gateway {\n"+block+"\n\t}", block)
	}
	return pair
}

// hostOf is the host:port of a gateway.
func hostOf(g *gateway) string { return "127.0.0.1:" + strconv.Itoa(g.Port) }

// TestRelayAbsoluteForm (finding 1): a request line in absolute form,
// `POST http:@<victim>/steal HTTP/1.1`, used to turn the owner's address
// into the userinfo of a URL of the client's choosing. It is refused at
// the door with 400, on the forward bridge's retry of a call parked on the
// other instance and on the reverse bridge's in-line answer, and nothing
// reaches the victim.
func TestRelayAbsoluteForm(t *testing.T) {
	t.Parallel()
	v := newVictim(t)
	steal := "http:@" + v.addr + "/steal"

	t.Run("forward bridge retry", func(t *testing.T) {
		rs := newRecordingServer(t)
		pair := startOpenPair(t, "\t\tupstream "+rs.url+" {\n\t\t\tera legacy\n\t\t}", "advertise")
		alice := map[string]string{"Authorization": "Bearer alice"}
		ir := parseInputRequired(t, askCall(t, pair[0].URL, 1, "tea", nil, alice))
		hdr, body := retryRequest(t, 2, "tea", ir)
		before := rs.requests.Load()
		resp, got := rawPost(t, hostOf(pair[1]), steal, hdr, body)
		checkBadTarget(t, resp, got)
		v.untouched(t)
		// A target with a '#' (no request target has a fragment) is
		// refused at the door too, by the owner as by the other instance:
		// forwarded, its query would end there.
		for _, g := range pair {
			resp, got = rawPost(t, hostOf(g), "/mcp?x=1#frag", hdr, body)
			checkBadTarget(t, resp, got)
		}
		if after := rs.requests.Load(); after != before {
			t.Errorf("the upstream received %d requests", after-before)
		}
		// The same retry in origin form is forwarded to the owner and
		// completes: the call was untouched.
		if text := checkToolResult(t, postRPC(t, pair[1].URL, hdr, body, 2), 2); text != "answer: yes" {
			t.Fatalf("the retry in origin form: %q", text)
		}
	})

	t.Run("reverse bridge in-line answer", func(t *testing.T) {
		pair := startOpenPair(t, "\t\tupstream "+startModernFixture(t), "peer")
		sid, _ := initReverse(t, pair[1].URL, "2025-11-25", `{"elicitation":{}}`, nil)
		resp, got := rawPost(t, hostOf(pair[1]), steal, legacyHeaders(sid), `{"jsonrpc":"2.0","id":"gw:gw-0:1","result":{}}`)
		checkBadTarget(t, resp, got)
		v.untouched(t)
	})

	t.Run("any request", func(t *testing.T) {
		g := startGateway(t, "\t\tupstream http://127.0.0.1:1/mcp")
		// Absolute form with a path: Caddy's path matcher sends it to the
		// gateway, which refuses it whatever it would have done with it.
		resp, got := rawPost(t, hostOf(g), "http://"+hostOf(g)+"/mcp", modernHeaders(modernVersion, "tools/list", ""),
			rpcBody(t, 1, "tools/list", map[string]any{"_meta": meta(modernVersion)}))
		checkBadTarget(t, resp, got)
	})
}

// hungListener accepts TCP connections, reads what comes, and never
// answers: an owner instance that hangs (a hostile fixture for the purpose).
func hungListener(t *testing.T) (addr string, accepted <-chan struct{}) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan struct{}, 16)
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			select {
			case ch <- struct{}{}:
			default:
			}
			go func() { _, _ = io.Copy(io.Discard, c) }()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return ln.Addr().String(), ch
}

// TestRelayHungOwner (finding 7): an owner that accepts the connection and
// never answers used to hold the client forever. The wait for the first
// byte of the owner's answer is bounded (10 s): the client gets 504
// (-32603) naming the owner's id, never its address. A live owner answers
// "100 Continue" at once, which is what stops that bound for a call that
// then runs long.
func TestRelayHungOwner(t *testing.T) {
	t.Parallel()
	rs := newRecordingServer(t)
	upstream := "\t\tupstream " + rs.url + " {\n\t\t\tera legacy\n\t\t}\n\t\tstate_key " + testKey(fleetKeyByte)
	owner := startGateway(t, upstream+"\n\t\tinstance_id gw-0")
	hung, accepted := hungListener(t)
	front := startGateway(t, upstream+"\n\t\tinstance_id gw-1\n\t\tpeer gw-0 http://"+hung)
	alice := map[string]string{"Authorization": "Bearer alice"}
	ir := parseInputRequired(t, askCall(t, owner.URL, 1, "tea", nil, alice))
	hdr, body := retryRequest(t, 2, "tea", ir)

	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	resp, err := tryPostContext(ctx, front.URL, hdr, body)
	if err != nil {
		t.Fatalf("the retry forwarded to a hung owner never ended: %v", err)
	}
	defer resp.Body.Close()
	select {
	case <-accepted:
	default:
		t.Fatal("the hung owner was never dialled")
	}
	code, msg := rpcErrorOf(t, resp)
	if resp.StatusCode != http.StatusGatewayTimeout || code != -32603 || !strings.Contains(msg, "gw-0") {
		t.Fatalf("HTTP %d, %d %q; want 504, -32603 naming gw-0", resp.StatusCode, code, msg)
	}
	if _, port, _ := net.SplitHostPort(hung); strings.Contains(msg, port) {
		t.Fatalf("the message %q tells the owner's address", msg)
	}

	t.Run("a live owner answers 100 Continue first", func(t *testing.T) {
		conn, err := net.Dial("tcp", hostOf(owner))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
		list := rpcBody(t, 3, "tools/list", map[string]any{"_meta": meta(modernVersion)})
		var b strings.Builder
		fmt.Fprintf(&b, "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n", hostOf(owner))
		fmt.Fprintf(&b, "Expect: 100-continue\r\nContent-Length: %d\r\n", len(list))
		for k, v := range modernHeaders(modernVersion, "tools/list", "") {
			fmt.Fprintf(&b, "%s: %s\r\n", k, v)
		}
		b.WriteString("\r\n")
		if _, err := io.WriteString(conn, b.String()); err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(conn)
		line, err := br.ReadString('\n')
		if err != nil || !strings.HasPrefix(line, "HTTP/1.1 100 ") {
			t.Fatalf("before the body was sent, the owner said %q (%v); want 100 Continue", line, err)
		}
	})
}

// hashPassword hashes a password with the built Caddy's hash-password.
func hashPassword(t *testing.T, password string) string {
	t.Helper()
	out, err := exec.Command(caddyBinary(t), "hash-password", "--plaintext", password).Output()
	if err != nil {
		t.Fatalf("caddy hash-password: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// basicAuthSite is docs/configuration.md's basic_auth recipe ("Authentication in
// front"), as site directives around `mcp_gateway /mcp`.
func basicAuthSite(hash string) string {
	return `	@protected {
		path /mcp*
		not {
			path /mcp
			header Mcp-Gateway-Forwarded *
		}
	}
	basic_auth @protected {
		alice ` + hash + `
	}
	request_header /mcp* -Authorization`
}

// TestRelayBasicAuthRecipe (finding 9): two instances configured with the
// basic_auth recipe of docs/configuration.md. A call parked on one instance is resumed by a
// retry that lands on the other: the forwarded retry is not refused by the
// owner's basic_auth (the credentials were stripped on the first instance),
// and the owner serves it as the principal the first instance
// authenticated. A request carrying a forged forwarding header and no
// credentials skips basic_auth but is refused by the gateway (403) and
// reaches no upstream; one with neither gets 401.
func TestRelayBasicAuthRecipe(t *testing.T) {
	t.Parallel()
	rs := newRecordingServer(t)
	hash := hashPassword(t, "s3cret")
	ports := []int{freePort(t), freePort(t)}
	pair := make([]*gateway, 2)
	for i, port := range ports {
		block := "\t\tupstream " + rs.url + " {\n\t\t\tera legacy\n\t\t}\n\t\tstate_key " + testKey(fleetKeyByte) +
			"\n\t\tprincipal {http.auth.user.id}" + fmt.Sprintf("\n\t\tinstance_id gw-%d", i)
		for j, p := range ports {
			block += fmt.Sprintf("\n\t\tpeer gw-%d http://127.0.0.1:%d", j, p)
		}
		pair[i] = launchGateway(t, port, "", basicAuthSite(hash), block)
	}
	alice := map[string]string{"Authorization": "Basic " + base64Std([]byte("alice:s3cret"))}
	ir := parseInputRequired(t, askCall(t, pair[0].URL, 1, "tea", nil, alice))
	hdr, body := retryRequest(t, 2, "tea", ir)
	hdr["Authorization"] = alice["Authorization"]
	if text := checkToolResult(t, postRPC(t, pair[1].URL, hdr, body, 2), 2); text != "answer: yes" {
		t.Fatalf("the retry on the other instance: %q", text)
	}

	t.Run("forged forwarding header without credentials", func(t *testing.T) {
		ir := parseInputRequired(t, askCall(t, pair[0].URL, 3, "coffee", nil, alice))
		hdr, body := retryRequest(t, 4, "coffee", ir)
		delete(hdr, "Authorization")
		before := rs.requests.Load()
		hdr[seal.ForwardedHeader] = "v2;k=00000000;t=gw-0;e=1;n=x;p=y;s=z"
		x := postRPC(t, pair[0].URL, hdr, body, 4)
		checkRPCError(t, x, http.StatusForbidden, -32600, 4)
		delete(hdr, seal.ForwardedHeader)
		if resp := post(t, pair[0].URL, hdr, body); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("no credentials, no forwarding header: HTTP %d, want 401", resp.StatusCode)
		}
		if after := rs.requests.Load(); after != before {
			t.Errorf("the upstream received %d requests", after-before)
		}
	})
}

// floodForwards sends n copies of one retry to front, from workers
// goroutines over kept-alive connections, and returns how many got each
// HTTP status.
func floodForwards(t *testing.T, front string, hdr map[string]string, body string, n, workers int) map[int]int {
	t.Helper()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: workers, MaxConnsPerHost: workers}}
	defer client.CloseIdleConnections()
	var next atomic.Int64
	var mu sync.Mutex
	statuses := map[int]int{}
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for next.Add(1) <= int64(n) {
				req, err := http.NewRequest(http.MethodPost, front, strings.NewReader(body))
				if err != nil {
					t.Error(err)
					return
				}
				for k, v := range hdr {
					req.Header.Set(k, v)
				}
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				resp, err := client.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				mu.Lock()
				statuses[resp.StatusCode]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return statuses
}

// TestRelayForwardFlood (finding 10): one client replays a retry of its own
// call to the instance that did not park it, as fast as it can: each copy
// is forwarded to the owner, whose replay cache remembered up to 65,536
// forwarding nonces for 30 s and then refused every forwarded request with
// 503, everyone's. Now the cache forgets the soonest-expiring nonces and
// refuses only headers at least that old: right after a flood larger than
// the cache, another client's retry forwarded to the same owner completes.
func TestRelayForwardFlood(t *testing.T) {
	// Not in parallel: it measures how fast one client can flood the owner (the nonces live 30 s): CPU-bound, and slower among other tests.
	rs := newRecordingServer(t)
	pair := startOpenPair(t, "\t\tupstream "+rs.url+" {\n\t\t\tera legacy\n\t\t}", "peer")
	mallory := map[string]string{"Authorization": "Bearer mallory"}
	irM := parseInputRequired(t, askCall(t, pair[0].URL, 1, "flood", nil, mallory))
	hdrM, bodyM := retryRequest(t, 2, "flood", irM)
	hdrM["Authorization"] = mallory["Authorization"]
	alice := map[string]string{"Authorization": "Bearer alice"}
	ir := parseInputRequired(t, askCall(t, pair[0].URL, 3, "tea", nil, alice))

	start := time.Now()
	const flood = 1<<16 + 4096 // more than the owner's cache holds
	statuses := floodForwards(t, pair[1].URL, hdrM, bodyM, flood, 16)
	t.Logf("%d forwarded retries in %v: %v", flood, time.Since(start).Round(time.Millisecond), statuses)
	if time.Since(start) > 25*time.Second {
		t.Logf("the flood took longer than the nonces live: this run cannot tell main from the fix")
	}

	hdr, body := retryRequest(t, 4, "tea", ir)
	if text := checkToolResult(t, postRPC(t, pair[1].URL, hdr, body, 4), 4); text != "answer: yes" {
		t.Fatalf("another client's forwarded retry after the flood: %q", text)
	}
}
