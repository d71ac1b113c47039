package tests

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// Issue 27: the mistakes of a newcomer's first hour, each named where it
// is made. The parse-time ones are in build_test.go (TestAdaptAndValidate).

// TestWrongUpstreamPath: an upstream URL without the MCP endpoint's path
// (http://host:port instead of http://host:port/mcp) answers both era
// probes 404. The client gets 503 as before; the log now says the status
// and to check the path.
func TestWrongUpstreamPath(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/mcp" {
			http.NotFound(w, r)
			return
		}
		http.Error(w, "not used", http.StatusTeapot)
	}))
	defer up.Close()
	g := startGateway(t, "upstream "+up.URL)

	resp := send(t, http.MethodPost, g.URL, nil, legacyInit)
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("initialize through a wrong upstream path: %d, want 503", resp.StatusCode)
	}
	lines := waitLogLines(t, g, "probing upstream era failed", 1)
	got, _ := lines[0]["error"].(string)
	want := "the upstream answered neither server/discover nor initialize (HTTP 404 to both): check the MCP endpoint's path in the upstream URL (such as /mcp)"
	if got != want {
		t.Fatalf("logged error %q, want %q", got, want)
	}
	if u, _ := lines[0]["upstream"].(string); !strings.HasPrefix(u, up.URL) {
		t.Fatalf("logged upstream %q, want %s", u, up.URL)
	}
}
