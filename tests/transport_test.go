package tests

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// testPKI is a private certificate authority made for one test, written
// to a directory: the CA's certificate (ca.pem), a client certificate
// (client.pem, client-key.pem) with the common name "mcp-gateway"; and a
// server certificate for 127.0.0.1 and mcp.test, in memory.
type testPKI struct {
	caFile, clientCert, clientKey string
	roots                         *x509.CertPool
	server                        tls.Certificate
}

// newTestPKI makes a testPKI in t.TempDir().
func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	return newTestPKIIn(t, t.TempDir())
}

// newTestPKIIn makes a testPKI in dir.
func newTestPKIIn(t *testing.T, dir string) *testPKI {
	t.Helper()
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "mcp-gateway test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	leaf := func(serial int64, cn string, usage x509.ExtKeyUsage) (certPEM, keyPEM []byte) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
		}
		if usage == x509.ExtKeyUsageServerAuth {
			tmpl.IPAddresses, tmpl.DNSNames = []net.IP{net.IPv4(127, 0, 0, 1)}, []string{"mcp.test"}
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		keyDER, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
	}
	p := &testPKI{caFile: filepath.Join(dir, "ca.pem"), clientCert: filepath.Join(dir, "client.pem"),
		clientKey: filepath.Join(dir, "client-key.pem"), roots: x509.NewCertPool()}
	p.roots.AddCert(ca)
	write := func(name string, b []byte) {
		if err := os.WriteFile(name, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(p.caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}))
	certPEM, keyPEM := leaf(2, "127.0.0.1", x509.ExtKeyUsageServerAuth)
	if p.server, err = tls.X509KeyPair(certPEM, keyPEM); err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM = leaf(3, "mcp-gateway", x509.ExtKeyUsageClientAuth)
	write(p.clientCert, certPEM)
	write(p.clientKey, keyPEM)
	return p
}

// tlsServer is an HTTPS server on 127.0.0.1 with a certificate of a
// testPKI, in front of handler: a real MCP server, or another gateway.
// With mTLS it refuses, in the handshake, a client without a certificate
// the PKI signed. It counts the requests that reached it and records the
// common names of the client certificates they came with, and what
// net/http logged (failed handshakes).
type tlsServer struct {
	url      string // https://127.0.0.1:PORT
	requests atomic.Int32

	mu      sync.Mutex
	clients []string // the client certificate's common name of each request, "" without one
	errLog  *lockedWriter
}

func startTLSServer(t *testing.T, pki *testPKI, handler http.Handler, mTLS bool) *tlsServer {
	t.Helper()
	s := &tlsServer{errLog: &lockedWriter{w: new(bytes.Buffer)}}
	cfg := &tls.Config{Certificates: []tls.Certificate{pki.server}, MinVersion: tls.VersionTLS12}
	if mTLS {
		cfg.ClientAuth, cfg.ClientCAs = tls.RequireAndVerifyClientCert, pki.roots
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s.requests.Add(1)
			cn := ""
			if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
				cn = r.TLS.PeerCertificates[0].Subject.CommonName
			}
			s.mu.Lock()
			s.clients = append(s.clients, cn)
			s.mu.Unlock()
			handler.ServeHTTP(w, r)
		}),
		TLSConfig: cfg,
		ErrorLog:  log.New(s.errLog, "", 0),
	}
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	t.Cleanup(func() { _ = srv.Close() })
	s.url = "https://" + ln.Addr().String()
	return s
}

// clientNames returns the distinct common names of the client
// certificates requests came with ("" for none).
func (s *tlsServer) clientNames() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := slices.Clone(s.clients)
	slices.Sort(out)
	return slices.Compact(out)
}

// log returns what the server's net/http logged.
func (s *tlsServer) log() string {
	s.errLog.mu.Lock()
	defer s.errLog.mu.Unlock()
	return s.errLog.w.String()
}

// whoamiMCP is a go-sdk MCP server whose tool `whoami` answers name:
// legacy (sessionful), or modern-only when stateless. It accepts any Host
// (it is reached by a name the test's DNS server resolves).
func whoamiMCP(name string, stateless bool) http.Handler {
	server := mcp.NewServer(&mcp.Implementation{Name: name, Version: "1"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "whoami", Description: "Names the server."},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: name}}}, nil, nil
		})
	opts := &mcp.StreamableHTTPOptions{Stateless: stateless, DisableLocalhostProtection: true}
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, opts)
}

// transportBlock is an mcp_gateway block in front of one upstream of era,
// with a `transport http` block of lines (none: no transport line).
func transportBlock(upstream, era string, lines ...string) string {
	b := fmt.Sprintf("\t\tupstream %s {\n\t\t\tera %s\n\t\t}", upstream, era)
	if len(lines) > 0 {
		b += "\n\t\ttransport http {\n\t\t\t" + strings.Join(lines, "\n\t\t\t") + "\n\t\t}"
	}
	return b
}

// whoamiCall is a modern tools/call of whoami, as raw HTTP.
func whoamiCall(t *testing.T, id int) (map[string]string, string) {
	t.Helper()
	return modernHeaders(modernVersion, "tools/call", "whoami"),
		rpcBody(t, id, "tools/call", map[string]any{"name": "whoami", "arguments": map[string]any{}, "_meta": meta(modernVersion)})
}

// TestTransportPrivateCA: upstreams behind HTTPS with a certificate a
// private CA signed (made by the test, served by net/http TLS servers in
// front of real go-sdk MCP servers) are reached through `transport http {
// tls_trust_pool file ca.pem }` in every cell: the forward bridge (modern
// client, legacy server, on the bridge's own connections), the pinned
// pass-through (legacy client, legacy server), the reverse bridge (legacy
// client, modern server), the modern pass-through, and the era probe of an
// `auto` upstream.
func TestTransportPrivateCA(t *testing.T) {
	t.Parallel()
	pki := newTestPKI(t)
	legacyUp := startTLSServer(t, pki, whoamiMCP("legacy-tls", false), false)
	modernUp := startTLSServer(t, pki, whoamiMCP("modern-tls", true), false)
	trust := "tls_trust_pool file " + pki.caFile
	toLegacy := startGateway(t, transportBlock(legacyUp.url+"/mcp", "legacy", trust))
	toModern := startGateway(t, transportBlock(modernUp.url+"/mcp", "modern", trust))

	t.Run("forward bridge", func(t *testing.T) {
		if got := whoami(t, connectGo(t, toLegacy.URL, "", nil)); got != "legacy-tls" {
			t.Fatalf("whoami: %q", got)
		}
	})
	t.Run("pinned pass-through", func(t *testing.T) {
		if got := whoami(t, connectGo(t, toLegacy.URL, "2025-11-25", nil)); got != "legacy-tls" {
			t.Fatalf("whoami: %q", got)
		}
	})
	t.Run("reverse bridge", func(t *testing.T) {
		if got := whoami(t, connectGo(t, toModern.URL, "2025-11-25", nil)); got != "modern-tls" {
			t.Fatalf("whoami: %q", got)
		}
	})
	t.Run("modern pass-through", func(t *testing.T) {
		if got := whoami(t, connectGo(t, toModern.URL, "", nil)); got != "modern-tls" {
			t.Fatalf("whoami: %q", got)
		}
	})
	t.Run("probe", func(t *testing.T) {
		// An auto upstream is a candidate only once probed: through TLS.
		g := startGateway(t, transportBlock(modernUp.url+"/mcp", "auto", trust))
		if got := whoami(t, connectGo(t, g.URL, "", nil)); got != "modern-tls" {
			t.Fatalf("whoami: %q", got)
		}
	})
	if n := legacyUp.clientNames(); len(n) > 1 || len(n) == 1 && n[0] != "" {
		t.Errorf("the legacy upstream saw client certificates %q, want none", n)
	}
}

// TestTransportUntrustedUpstream: the same upstreams with a transport that
// lacks the trust pool (and without any transport: the system's roots)
// fail in every cell with 502 and -32603, telling the client nothing of
// the upstream's address; nothing reaches the upstream, and the log says
// why. On main the transport line does not parse: Caddy does not start.
func TestTransportUntrustedUpstream(t *testing.T) {
	t.Parallel()
	pki := newTestPKI(t)
	legacyUp := startTLSServer(t, pki, whoamiMCP("legacy-tls", false), false)
	modernUp := startTLSServer(t, pki, whoamiMCP("modern-tls", true), false)
	for _, tc := range []struct {
		name  string
		lines []string
	}{
		{"transport without trust pool", []string{"dial_timeout 2s"}},
		{"no transport", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			toLegacy := startGateway(t, transportBlock(legacyUp.url+"/mcp", "legacy", tc.lines...))
			toModern := startGateway(t, transportBlock(modernUp.url+"/mcp", "modern", tc.lines...))
			hidden := func(t *testing.T, what, body string) {
				t.Helper()
				for _, up := range []*tlsServer{legacyUp, modernUp} {
					u, _ := url.Parse(up.url)
					if strings.Contains(body, u.Port()) || strings.Contains(body, "x509") || strings.Contains(body, "certificate") {
						t.Errorf("%s: the client was told %q", what, body)
					}
				}
			}

			// Forward bridge: a modern call.
			hdr, body := whoamiCall(t, 1)
			x := postRPC(t, toLegacy.URL, hdr, body, 1)
			if r := checkRPCError(t, x, http.StatusBadGateway, -32603, 1); r != nil {
				hidden(t, "forward bridge", r.Error.Message)
			}
			// Pinned pass-through and reverse bridge: a legacy initialize.
			for _, c := range []struct {
				what string
				g    *gateway
			}{{"pinned pass-through", toLegacy}, {"reverse bridge", toModern}} {
				resp := post(t, c.g.URL, nil, legacyInit)
				raw, _ := io.ReadAll(resp.Body)
				if resp.StatusCode != http.StatusBadGateway {
					t.Errorf("%s: status %d, want 502: %s", c.what, resp.StatusCode, raw)
				}
				if !strings.Contains(string(raw), `"code":-32603`) {
					t.Errorf("%s: want -32603, got %s", c.what, raw)
				}
				hidden(t, c.what, string(raw))
			}
			if n := legacyUp.requests.Load() + modernUp.requests.Load(); n != 0 {
				t.Errorf("%d requests reached the upstreams", n)
			}
			for _, g := range []*gateway{toLegacy, toModern} {
				waitLog(t, g, "certificate signed by unknown authority")
			}
		})
	}
}

// TestTransportClientCertificate: upstreams that require a client
// certificate (mTLS) refuse the gateway without `tls_client_auth` (502,
// nothing reaches them), and serve it, in the forward bridge, the pinned
// pass-through and the reverse bridge, with `tls_client_auth client.pem
// client-key.pem`: each request they receive carries that certificate.
func TestTransportClientCertificate(t *testing.T) {
	t.Parallel()
	pki := newTestPKI(t)
	legacyUp := startTLSServer(t, pki, whoamiMCP("legacy-mtls", false), true)
	modernUp := startTLSServer(t, pki, whoamiMCP("modern-mtls", true), true)
	trust := "tls_trust_pool file " + pki.caFile

	t.Run("without a client certificate", func(t *testing.T) {
		g := startGateway(t, transportBlock(legacyUp.url+"/mcp", "legacy", trust))
		hdr, body := whoamiCall(t, 1)
		checkRPCError(t, postRPC(t, g.URL, hdr, body, 1), http.StatusBadGateway, -32603, 1)
		resp := post(t, g.URL, nil, legacyInit)
		// 502; or 503 when the refusal showed as a reset on write (TLS 1.3
		// lets the gateway write before the upstream refuses the missing
		// certificate): a connection refused, after which no other
		// upstream is left to try (as in hardening_failover_test.go).
		if resp.StatusCode != http.StatusBadGateway && resp.StatusCode != http.StatusServiceUnavailable {
			t.Errorf("pinned initialize: status %d, want 502 (or 503)", resp.StatusCode)
		}
		if n := legacyUp.requests.Load(); n != 0 {
			t.Errorf("%d requests reached the upstream", n)
		}
		if log := legacyUp.log(); !strings.Contains(log, "client didn't provide a certificate") {
			t.Errorf("the upstream's log does not show the refused handshake:\n%s", log)
		}
	})

	auth := fmt.Sprintf("tls_client_auth %s %s", pki.clientCert, pki.clientKey)
	toLegacy := startGateway(t, transportBlock(legacyUp.url+"/mcp", "legacy", trust, auth))
	toModern := startGateway(t, transportBlock(modernUp.url+"/mcp", "modern", trust, auth))
	t.Run("forward bridge", func(t *testing.T) {
		if got := whoami(t, connectGo(t, toLegacy.URL, "", nil)); got != "legacy-mtls" {
			t.Fatalf("whoami: %q", got)
		}
	})
	t.Run("pinned pass-through", func(t *testing.T) {
		if got := whoami(t, connectGo(t, toLegacy.URL, "2025-11-25", nil)); got != "legacy-mtls" {
			t.Fatalf("whoami: %q", got)
		}
	})
	t.Run("reverse bridge", func(t *testing.T) {
		if got := whoami(t, connectGo(t, toModern.URL, "2025-11-25", nil)); got != "modern-mtls" {
			t.Fatalf("whoami: %q", got)
		}
	})
	for _, up := range []*tlsServer{legacyUp, modernUp} {
		if n := up.clientNames(); len(n) != 1 || n[0] != "mcp-gateway" {
			t.Errorf("%s: requests came with client certificates %q, want only mcp-gateway", up.url, n)
		}
	}
}

// TestTransportPeerTLS: an instance of a fleet reached at an https address
// (a TLS terminator in front of it, with a certificate of a private CA,
// that requires a client certificate) is forwarded a parked call's retry
// by another instance only with `peer_transport http { tls_trust_pool …;
// tls_client_auth … }`; without it the client gets 502 naming the owner as
// unreachable, and the owner receives nothing.
func TestTransportPeerTLS(t *testing.T) {
	t.Parallel()
	pki := newTestPKI(t)
	rs := newRecordingServer(t)
	upstream := "\t\tupstream " + rs.url + " {\n\t\t\tera legacy\n\t\t}\n\t\tstate_key " + testKey(fleetKeyByte)
	owner := startGateway(t, upstream+"\n\t\tinstance_id gw-0")
	ownerURL, err := url.Parse(fmt.Sprintf("http://127.0.0.1:%d", owner.Port))
	if err != nil {
		t.Fatal(err)
	}
	front := startTLSServer(t, pki, httputil.NewSingleHostReverseProxy(ownerURL), true)
	peer := "\n\t\tinstance_id gw-1\n\t\tpeer gw-0 " + front.url
	plain := startGateway(t, upstream+peer)
	secured := startGateway(t, upstream+peer+fmt.Sprintf("\n\t\tpeer_transport http {\n\t\t\ttls_trust_pool file %s\n\t\t\ttls_client_auth %s %s\n\t\t}",
		pki.caFile, pki.clientCert, pki.clientKey))
	alice := map[string]string{"Authorization": "Bearer alice"}

	t.Run("without peer_transport", func(t *testing.T) {
		ir := parseInputRequired(t, askCall(t, owner.URL, 1, "tea", nil, alice))
		hdr, body := retryRequest(t, 2, "tea", ir)
		x := postRPC(t, plain.URL, hdr, body, 2)
		if r := checkRPCError(t, x, http.StatusBadGateway, -32603, 2); r != nil && !strings.Contains(r.Error.Message, "gw-0") {
			t.Errorf("message %q, want it to name gw-0", r.Error.Message)
		}
		if n := front.requests.Load(); n != 0 {
			t.Errorf("%d requests reached the owner", n)
		}
	})
	t.Run("with peer_transport", func(t *testing.T) {
		ir := parseInputRequired(t, askCall(t, owner.URL, 3, "coffee", nil, alice))
		hdr, body := retryRequest(t, 4, "coffee", ir)
		if text := checkToolResult(t, postRPC(t, secured.URL, hdr, body, 4), 4); text != "answer: yes" {
			t.Fatalf("the retry forwarded over TLS: %q", text)
		}
		if n := front.clientNames(); len(n) != 1 || n[0] != "mcp-gateway" {
			t.Errorf("forwarded requests came with client certificates %q, want only mcp-gateway", n)
		}
		waitMetrics(t, secured, map[string]float64{
			`caddy_mcp_gateway_instance_forwards_total{direction="sent",outcome="ok"}`: 1,
		})
	})
}

// startDNS runs a DNS server on 127.0.0.1 (UDP) that resolves name (and
// nothing else) to 127.0.0.1, and counts the queries for it.
func startDNS(t *testing.T, name string) (addr string, queries *atomic.Int32) {
	t.Helper()
	queries = new(atomic.Int32)
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, req *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(req)
		for _, q := range req.Question {
			if !strings.EqualFold(q.Name, dns.Fqdn(name)) {
				m.Rcode = dns.RcodeNameError
				continue
			}
			queries.Add(1)
			if q.Qtype == dns.TypeA {
				m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 1},
					A: net.IPv4(127, 0, 0, 1)})
			}
		}
		_ = w.WriteMsg(m)
	})}
	go func() { _ = srv.ActivateAndServe() }()
	t.Cleanup(func() { _ = srv.Shutdown() })
	return pc.LocalAddr().String(), queries
}

// TestTransportResolvers: an upstream known only to a DNS server the test
// runs (mcp.test) is reached through `transport http { resolvers … }` by
// the forward bridge, on its own connections made with the transport's
// dialer, and by the pinned pass-through; with `keepalive off`, which its
// own connections cannot honour, the forward bridge sends through the
// transport itself, and says so in the log.
func TestTransportResolvers(t *testing.T) {
	t.Parallel()
	pki := newTestPKI(t)
	up := startTLSServer(t, pki, whoamiMCP("named", false), false)
	dnsAddr, queries := startDNS(t, "mcp.test")
	u, err := url.Parse(up.url)
	if err != nil {
		t.Fatal(err)
	}
	named := "https://mcp.test:" + u.Port() + "/mcp"
	lines := []string{"tls_trust_pool file " + pki.caFile, "resolvers " + dnsAddr}

	g := startGateway(t, transportBlock(named, "legacy", lines...))
	t.Run("forward bridge", func(t *testing.T) {
		before := queries.Load()
		if got := whoami(t, connectGo(t, g.URL, "", nil)); got != "named" {
			t.Fatalf("whoami: %q", got)
		}
		if queries.Load() == before {
			t.Error("the forward bridge resolved mcp.test without the configured resolver")
		}
	})
	t.Run("pinned pass-through", func(t *testing.T) {
		if got := whoami(t, connectGo(t, g.URL, "2025-11-25", nil)); got != "named" {
			t.Fatalf("whoami: %q", got)
		}
	})
	if strings.Contains(g.Log(), "sends through the transport itself") {
		t.Error("the forward bridge fell back to the transport, want its own connections")
	}

	t.Run("forward bridge through the transport", func(t *testing.T) {
		g := startGateway(t, transportBlock(named, "legacy", append(lines, "keepalive off")...))
		waitLog(t, g, `"because":"keepalive is off"`)
		if got := whoami(t, connectGo(t, g.URL, "", nil)); got != "named" {
			t.Fatalf("whoami: %q", got)
		}
	})
}
