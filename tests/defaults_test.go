package tests

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestKeepAliveOff: `keepalive_interval -1` (Caddy's "off", as
// reverse_proxy's `flush_interval -1`) really sends no keep-alive: an idle
// legacy GET stream through the gateway stays silent for ten times the
// short interval of the positive control, and stays open. Then, with
// `keepalive_interval 200ms` on the same gateway (a reload), a new idle
// stream gets a `: keep-alive` comment.
func TestKeepAliveOff(t *testing.T) {
	t.Parallel()
	block := "\t\tupstream " + startDemoServer(t)
	g := startGateway(t, block+"\n\t\tkeepalive_interval -1")
	lines := openGetStream(t, g.URL, openLegacySession(t, g.URL))
	silence := time.After(2 * time.Second) // 10× the control's interval
	for quiet := false; !quiet; {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("the idle stream ended before the deadline: nothing was checked")
			}
			if l == ": keep-alive" {
				t.Fatal("a keep-alive comment arrived with keepalive_interval -1 (off)")
			}
		case <-silence:
			quiet = true
		}
	}

	// Positive control: the same stream, with a short interval.
	g.reload(t, block+"\n\t\tkeepalive_interval 200ms")
	lines = openGetStream(t, g.URL, openLegacySession(t, g.URL))
	deadline := time.After(5 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("the stream ended before a keep-alive")
			}
			if l == ": keep-alive" {
				return
			}
		case <-deadline:
			t.Fatal("no keep-alive comment in 5s with keepalive_interval 200ms")
		}
	}
}

// TestValidateOffAndRange: `caddy validate` accepts `-1` (off) for the
// durations that can be turned off, and refuses a value out of range with
// a message naming the option, in the Caddyfile and in JSON.
func TestValidateOffAndRange(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	validate := func(t *testing.T, name, adapter, cfg string) (string, error) {
		t.Helper()
		file := filepath.Join(dir, name)
		if err := os.WriteFile(file, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		args := []string{"validate", "--config", file}
		if adapter != "" {
			args = append(args, "--adapter", adapter)
		}
		return caddyCmd(t, dir, args...)
	}
	caddyfile := func(opts string) string {
		return ":9999 {\n\tmcp_gateway {\n\t\tupstream http://127.0.0.1:9/mcp\n" + opts + "\t}\n}\n"
	}

	off := "\t\tkeepalive_interval -1\n\t\twrite_timeout -1\n\t\tgather_window -1s\n\t\thealth_interval -1\n"
	if out, err := validate(t, "off", "caddyfile", caddyfile(off)); err != nil {
		t.Fatalf("caddy validate refused -1 (off): %v\n%s", err, out)
	}

	refused := map[string]string{
		"park_ttl -1s":          "park_ttl: must be positive, got -1s",
		"session_lifetime -1":   "session_lifetime: must be positive, got -1ns",
		"fail_duration -2s":     "fail_duration: must be positive, got -2s",
		"health_timeout -1":     "health_timeout: must be positive, got -1ns",
		"stream_close_delay -1": "stream_close_delay: must not be negative, got -1ns",
	}
	for opt, want := range refused {
		t.Run(opt, func(t *testing.T) {
			out, err := validate(t, strings.ReplaceAll(opt, " ", "_"), "caddyfile", caddyfile("\t\t"+opt+"\n"))
			if err == nil || !strings.Contains(out, want) {
				t.Fatalf("caddy validate (err %v) said:\n%s\nwant it to contain %q", err, out, want)
			}
		})
	}

	// JSON reaches Validate with what the Caddyfile refuses while parsing.
	for field, want := range map[string]string{
		`"parking": {"max_rounds": -2}`:                   "max_rounds: must be at least 1, got -2",
		`"parking": {"max_buffered_notifications": 5000}`: "max_buffered_notifications: must be at most 4096",
		`"security": {"max_request_body": -1}`:            "max_request_body: must be at least 1, got -1",
		`"sessions": {"max_sessions_per_principal": -1}`:  "max_sessions_per_principal: must be at least 1, got -1",
		`"health": {"active": {"fails": -1}}`:             "health_fails: must be at least 1, got -1",
	} {
		t.Run(field, func(t *testing.T) {
			cfg := `{"apps":{"http":{"servers":{"s":{"listen":[":9999"],"routes":[{"handle":[{"handler":"mcp_gateway",` +
				`"upstreams":[{"url":"http://127.0.0.1:9/mcp"}],` + field + `}]}]}}}}}`
			out, err := validate(t, "config.json", "", cfg)
			if err == nil || !strings.Contains(out, want) {
				t.Fatalf("caddy validate (err %v) said:\n%s\nwant it to contain %q", err, out, want)
			}
		})
	}
}
