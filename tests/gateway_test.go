package tests

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// gateway is a real Caddy process, built from caddymodule/cmd/caddy, running
// the mcp_gateway module on loopback ports.
type gateway struct {
	URL       string // the MCP endpoint, http://127.0.0.1:PORT/mcp
	Port      int
	AdminAddr string
	globals   string // extra global options
	site      string // extra site directives
	config    string
	cmd       *exec.Cmd
	log       *bytes.Buffer
	done      chan struct{}
}

var (
	caddyOnce sync.Once
	caddyPath string
	caddyErr  error
)

// caddyBinary builds the custom Caddy once per test run.
func caddyBinary(t *testing.T) string {
	t.Helper()
	caddyOnce.Do(func() {
		dir, err := os.MkdirTemp("", "mcp-gateway-caddy-")
		if err != nil {
			caddyErr = err
			return
		}
		caddyPath = filepath.Join(dir, "caddy")
		cmd := exec.Command("go", "build", "-o", caddyPath, "./caddymodule/cmd/caddy")
		cmd.Dir = repoRoot(t)
		if out, err := cmd.CombinedOutput(); err != nil {
			caddyErr = fmt.Errorf("building caddy: %v\n%s", err, out)
		}
	})
	if caddyErr != nil {
		t.Fatal(caddyErr)
	}
	return caddyPath
}

// gatewayConfig renders a Caddyfile serving mcp_gateway at /mcp on port,
// with body as the directive's block, globals among the global options and
// site among the site's directives.
func gatewayConfig(port int, admin, globals, site, body string) string {
	return fmt.Sprintf(`{
	admin %s
	grace_period 10s
	persist_config off
%s
}

:%d {
	bind 127.0.0.1
%s
	mcp_gateway /mcp {
%s
	}
}
`, admin, globals, port, site, body)
}

// startGateway runs Caddy with an mcp_gateway block (the lines inside
// `mcp_gateway /mcp { ... }`) and waits until it serves.
func startGateway(t *testing.T, block string) *gateway {
	t.Helper()
	return launchGateway(t, freePort(t), "", "", block)
}

// startGatewayWith is startGateway with extra global options and site
// directives.
func startGatewayWith(t *testing.T, globals, site, block string) *gateway {
	t.Helper()
	return launchGateway(t, freePort(t), globals, site, block)
}

// startGatewayOn is startGateway on a port chosen beforehand (so that
// instances of a fleet can name each other).
func startGatewayOn(t *testing.T, port int, block string) *gateway {
	t.Helper()
	return launchGateway(t, port, "", "", block)
}

func launchGateway(t *testing.T, port int, globals, site, block string) *gateway {
	t.Helper()
	g := newGateway(t, port, fmt.Sprintf("127.0.0.1:%d", freePort(t)))
	g.globals, g.site = globals, site
	g.writeConfig(t, block)
	g.run(t)
	return g
}

// launchCaddyfile runs Caddy with a whole Caddyfile, as it is, serving on
// port with its admin API at admin, with env added to its environment, and
// waits until it serves.
func launchCaddyfile(t *testing.T, port int, admin, caddyfile string, env ...string) *gateway {
	t.Helper()
	g := newGateway(t, port, admin)
	if err := os.WriteFile(g.config, []byte(caddyfile), 0o600); err != nil {
		t.Fatal(err)
	}
	g.run(t, env...)
	return g
}

// newGateway is a gateway on port with its admin API at admin, its
// Caddyfile (not written yet) in a folder of its own.
func newGateway(t *testing.T, port int, admin string) *gateway {
	t.Helper()
	g := &gateway{Port: port, AdminAddr: admin, log: new(bytes.Buffer), done: make(chan struct{})}
	g.URL = fmt.Sprintf("http://127.0.0.1:%d/mcp", g.Port)
	g.config = filepath.Join(t.TempDir(), "Caddyfile")
	return g
}

// run starts Caddy with g's Caddyfile (its data and config folders beside
// it, env added to its environment), kills it when the test ends, and waits
// until it serves.
func (g *gateway) run(t *testing.T, env ...string) {
	t.Helper()
	dir := filepath.Dir(g.config)
	g.cmd = exec.Command(caddyBinary(t), "run", "--config", g.config, "--adapter", "caddyfile")
	g.cmd.Dir = dir
	g.cmd.Env = append(append(os.Environ(), "HOME="+dir, "XDG_DATA_HOME="+dir, "XDG_CONFIG_HOME="+dir), env...)
	g.cmd.Stdout = &lockedWriter{w: g.log}
	g.cmd.Stderr = g.cmd.Stdout
	g.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := g.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = g.cmd.Wait(); close(g.done) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-g.cmd.Process.Pid, syscall.SIGKILL)
		<-g.done
		if t.Failed() {
			t.Logf("caddy log:\n%s", g.Log())
		}
	})
	waitHTTP(t, fmt.Sprintf("http://127.0.0.1:%d/", g.Port), 20*time.Second)
}

func (g *gateway) writeConfig(t *testing.T, block string) {
	t.Helper()
	if err := os.WriteFile(g.config, []byte(gatewayConfig(g.Port, g.AdminAddr, g.globals, g.site, block)), 0o600); err != nil {
		t.Fatal(err)
	}
}

// Log returns what Caddy printed so far.
func (g *gateway) Log() string {
	w := g.cmd.Stdout.(*lockedWriter)
	w.mu.Lock()
	defer w.mu.Unlock()
	return g.log.String()
}

// reload writes a new block and runs `caddy reload` against the process.
func (g *gateway) reload(t *testing.T, block string) {
	t.Helper()
	g.writeConfig(t, block)
	out, err := exec.Command(caddyBinary(t), "reload", "--config", g.config, "--adapter", "caddyfile", "--address", g.AdminAddr, "--force").CombinedOutput()
	if err != nil {
		t.Fatalf("caddy reload: %v\n%s", err, out)
	}
	// The old server closes its idle connections: a request sent on one
	// of them as it does so fails (EOF). Clients of their own do the same.
	http.DefaultClient.CloseIdleConnections()
	g.waitOldListenerClosed(t)
}

// waitOldListenerClosed waits until one socket listens on the gateway's
// port. On Linux Caddy binds each configuration's listener with
// SO_REUSEPORT, and `caddy reload` returns once the old server has been
// told to shut down, not once its listener has closed (caddyhttp.App.stop):
// until it closes, the kernel hands some new connections to the old socket,
// and those still in its accept queue when it closes are reset. A test
// request sent in that instant fails with "connection reset by peer"
// (TestSecurityKeyRotation did, once in ~6 full runs), so the reload helper
// waits for the event — the old socket gone from /proc/net/tcp — with a
// deadline. Where /proc/net/tcp cannot be read it returns at once.
func (g *gateway) waitOldListenerClosed(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, err := listeningSockets(g.Port)
		if err != nil || n <= 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d sockets still listen on port %d 10s after caddy reload", n, g.Port)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// listeningSockets counts the TCP sockets in state LISTEN on port, from
// /proc/net/tcp and /proc/net/tcp6.
func listeningSockets(port int) (int, error) {
	n := 0
	for _, name := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		data, err := os.ReadFile(name)
		if err != nil {
			return 0, err
		}
		local := fmt.Sprintf(":%04X", port)
		for _, line := range strings.Split(string(data), "\n")[1:] {
			f := strings.Fields(line)
			// sl local_address rem_address st …; st 0A is LISTEN.
			if len(f) > 3 && strings.HasSuffix(f[1], local) && f[3] == "0A" {
				n++
			}
		}
	}
	return n, nil
}

// stop runs `caddy stop` and returns how long the process took to exit.
func (g *gateway) stop(t *testing.T) time.Duration {
	t.Helper()
	start := time.Now()
	out, err := exec.Command(caddyBinary(t), "stop", "--address", g.AdminAddr).CombinedOutput()
	if err != nil {
		t.Fatalf("caddy stop: %v\n%s", err, out)
	}
	select {
	case <-g.done:
	case <-time.After(30 * time.Second):
		t.Fatal("caddy did not exit within 30s of caddy stop")
	}
	return time.Since(start)
}

// freeze stops the process (SIGSTOP) and waits until every one of its
// threads has stopped. kill returns once the signal is sent: a thread
// running on the other CPU goes on until it takes it, which on a busy
// machine was long enough for a frozen owner to answer a forwarded
// tasks/get (TestTaskAttackOwnerGone, 1 run in 8 with two busy loops).
func (g *gateway) freeze(t *testing.T) {
	t.Helper()
	pid := g.cmd.Process.Pid
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, fmt.Sprintf("every thread of caddy (pid %d) stopped", pid), func() bool { return stopped(pid) })
}

// stopped reports whether every thread of pid is in the stopped state (T
// in /proc/PID/task/TID/stat). Without /proc it cannot tell, and says yes.
func stopped(pid int) bool {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		_, noProc := os.Stat("/proc/self")
		return noProc != nil
	}
	for _, task := range tasks {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", pid, task.Name()))
		if err != nil {
			return false
		}
		// "tid (comm) state ...": comm may hold spaces and parentheses.
		s := string(stat)
		i := strings.LastIndexByte(s, ')')
		if i < 0 || i+2 >= len(s) || s[i+2] != 'T' {
			return false
		}
	}
	return true
}

// send makes one request to the gateway with the usual MCP headers (an
// "Accept" fitting the method, "Content-Type" for a body) and hdr; a "Host"
// entry in hdr sets the Host header. The response body is closed when the
// test ends.
func send(t *testing.T, method, url string, hdr map[string]string, body string) *http.Response {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/json, text/event-stream")
	if method == http.MethodGet {
		req.Header.Set("Accept", "text/event-stream")
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// tryPost posts body to url with the usual MCP headers and hdr, and returns
// what the client got, error included (for a gateway that may be dead).
func tryPost(url string, hdr map[string]string, body string) (*http.Response, error) {
	return tryPostContext(context.Background(), url, hdr, body)
}

// tryPostContext is tryPost bounded by ctx.
func tryPostContext(ctx context.Context, url string, hdr map[string]string, body string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	return http.DefaultClient.Do(req)
}

// post sends one JSON-RPC message with the given headers and returns the
// response (to read, whether JSON or SSE).
func post(t *testing.T, url string, hdr map[string]string, body string) *http.Response {
	t.Helper()
	return send(t, http.MethodPost, url, hdr, body)
}

type lockedWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func base64Std(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
