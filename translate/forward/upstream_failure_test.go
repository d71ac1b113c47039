package forward

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/legacy"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
)

// deadURL is an upstream URL on a loopback port nothing listens on.
func deadURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr + "/mcp"
}

// serveWith serves r and returns the answer and how it was served.
func serveWith(b *Bridge, r Request) (*recordedAnswer, translate.Served) {
	a := &recordedAnswer{}
	return a, b.Serve(context.Background(), r, a)
}

// TestBridgeFailover: a new session the dead upstream refused moves to the
// upstream Failover names, and the call completes there; the hook learns
// why. A retry carrying requestState goes to its parked call, never
// through Failover.
func TestBridgeFailover(t *testing.T) {
	live, _ := legacyUpstream(t)
	dead := deadURL(t)
	b := newTestBridge(t, time.Minute)
	var causes []error
	failover := func(r *Request, cause error) bool {
		causes = append(causes, cause)
		r.Upstream = live
		return true
	}

	r := askRequest(t, dead, 1, 1, "")
	r.Failover = failover
	a, _ := serveWith(b, r)
	state := gjson.GetBytes(a.final, "result.requestState").String()
	if state == "" {
		t.Fatalf("the call did not park on the live upstream: %d %s", a.status, a.final)
	}
	if len(causes) != 1 || !legacy.Refused(causes[0]) {
		t.Fatalf("Failover asked with %v, want one refused connection", causes)
	}

	// The retry names the dead upstream: it must still reach its call.
	retry := askRequest(t, dead, 2, 1, fmt.Sprintf(`,"inputResponses":{"elicitation-1":{"action":"accept","content":{"a":"x"}}},"requestState":%q`, state))
	retry.Failover = func(*Request, error) bool { t.Error("a retry asked for failover"); return false }
	a, _ = serveWith(b, retry)
	if got := gjson.GetBytes(a.final, "result.content.0.text").String(); got != "accept:x" {
		t.Fatalf("retry: %d %s", a.status, a.final)
	}
}

// TestBridgeUpstreamErrorHidden: when no upstream can be reached, the client
// reads a message that names no address; the cause, for the logs, has it.
func TestBridgeUpstreamErrorHidden(t *testing.T) {
	dead := deadURL(t)
	b := newTestBridge(t, time.Minute)
	r := askRequest(t, dead, 1, 1, "")
	asked := 0
	r.Failover = func(*Request, error) bool { asked++; return false }
	a, s := serveWith(b, r)
	if a.status != http.StatusBadGateway || gjson.GetBytes(a.final, "error.message").String() != translate.MsgUpstreamUnavailable {
		t.Fatalf("answer %d %s, want 502 %q", a.status, a.final, translate.MsgUpstreamUnavailable)
	}
	host := strings.TrimSuffix(strings.TrimPrefix(dead, "http://"), "/mcp")
	if s.Cause == nil || !strings.Contains(s.Cause.Error(), host) || asked != 1 {
		t.Fatalf("cause %v after %d failover questions, want one naming %s", s.Cause, asked, host)
	}
}

// TestBridgeNoFailoverOnAnswer: an upstream that answers initialize with an
// HTTP error was reached: no failover, and the client is not told its words.
func TestBridgeNoFailoverOnAnswer(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "internal detail at 10.1.2.3", http.StatusInternalServerError)
	}))
	t.Cleanup(ts.Close)
	b := newTestBridge(t, time.Minute)
	r := askRequest(t, ts.URL, 1, 1, "")
	r.Failover = func(*Request, error) bool { t.Error("failover after an answer"); return false }
	a, s := serveWith(b, r)
	if a.status != http.StatusBadGateway || s.Cause == nil || strings.Contains(string(a.final), "500") {
		t.Fatalf("answer %d %s (cause %v)", a.status, a.final, s.Cause)
	}
}

// TestRPCErrorCause: the cause is logged (Error, Unwrap), never answered.
func TestRPCErrorCause(t *testing.T) {
	cause := fmt.Errorf("dial tcp 10.0.0.7:3001: %w", context.DeadlineExceeded)
	e := translate.UpstreamFailure(translate.MsgUpstreamUnavailable, cause)
	if body := string(jsonrpc.ErrorResponse([]byte("1"), e)); strings.Contains(body, "10.0.0.7") {
		t.Fatalf("the response carries the cause: %s", body)
	}
	if !strings.Contains(e.Error(), "10.0.0.7") || !strings.Contains(e.Detail(), "10.0.0.7") {
		t.Fatalf("Error() %q and detail() %q, want the cause", e.Error(), e.Detail())
	}
	if !errors.Is(e, context.DeadlineExceeded) {
		t.Fatal("Unwrap does not reach the cause")
	}
}
