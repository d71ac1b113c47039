package tests

// Sessions given back: an instance that finishes a call another
// instance parked holding no stream gives the call's upstream session back
// to that instance's pool (a signed notice) instead of ending it, so the
// upstream keeps one session for a principal's calls wherever their
// retries land.

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// TestGiveBack: two instances, each call of one principal parked on the
// first and finished on the second, which gives the session back; the
// first takes each back (finished_elsewhere), and initializes one upstream
// session for all the calls. In front of the go-sdk server with an event
// store (two questions a call: both rounds on the first instance, the
// answer to the second on the second instance; instances found by
// advertise), the upstream holds those sessions and got no DELETE. In
// front of server-everything (TypeScript SDK 1.x, one question; instances
// found by a peer list), the same from the gateways' metrics. A client
// that sends the notice itself, unsigned, is refused (400) and frees
// nothing. The calls do not linger (resume_linger -1): a retry that comes
// back at once to an instance whose call lingers elsewhere is relayed to
// it instead (TestLingerRelay).
func TestGiveBack(t *testing.T) {
	t.Parallel()
	const calls = 8
	given := `caddy_mcp_gateway_resumable_calls_total{event="given_back"}`
	finished := `caddy_mcp_gateway_resumable_calls_total{event="finished_elsewhere"}`
	check := func(t *testing.T, g0, g1 *gateway, upstream string) {
		t.Helper()
		if got := fleetMetric(t, []*gateway{g1}, given, calls); got != calls {
			t.Fatalf("given_back = %v on the second instance, want %d", got, calls)
		}
		if got := fleetMetric(t, []*gateway{g0}, finished, calls); got != calls {
			t.Fatalf("finished_elsewhere = %v on the first instance, want %d", got, calls)
		}
		// The notice goes after the call's answer: the next call may
		// start before the session is back, and take a second one.
		inits := fmt.Sprintf(`caddy_mcp_gateway_upstream_session_initializations_total{upstream=%q}`, upstream)
		if got := fleetMetric(t, []*gateway{g0}, inits, 1); got < 1 || got > 2 {
			t.Fatalf("the first instance initialized %v upstream sessions for %d calls, want 1 or 2", got, calls)
		}
	}
	t.Run("go-sdk", func(t *testing.T) {
		up := newResumableServer(t)
		upstream := "\t\tupstream " + up.url + " {\n\t\t\tera legacy\n\t\t}\n\t\tresume_linger -1\n"
		pair := startFleetOf(t, 2, upstream, "advertise")
		g0, g1 := pair[0], pair[1]
		alice := map[string]string{"Authorization": "Bearer alice"}
		for i := range calls {
			first := parseInputRequired(t, askCall(t, g0.URL, 10*i+1, "tea", nil, alice))
			second := parseInputRequired(t, askCall(t, g0.URL, 10*i+2, "tea", answerWith(t, first, "yes"), alice))
			x := askCall(t, g1.URL, 10*i+3, "tea", answerWith(t, second, "sure"), alice)
			if x.Resp == nil || x.Resp.Error != nil || !strings.Contains(string(x.Resp.Result), `"accept:yes,accept:sure"`) {
				t.Fatalf("call %d on the other instance: %s", i, x)
			}
		}
		check(t, g0, g1, up.url)
		if n, d := up.sessions(), up.deletes.Load(); n < 1 || n > 2 || d != 0 {
			t.Fatalf("the upstream holds %d sessions and got %d DELETEs, want 1 or 2 and none", n, d)
		}

		// A notice from a client: refused, and the parked call stays.
		parseInputRequired(t, askCall(t, g0.URL, 200, "tea", nil, alice))
		notice := `{"jsonrpc":"2.0","method":"notifications/mcp-gateway/session_returned","params":` +
			`{"place":"00000000000000000000000000000000","upstream":"` + up.url + `","session":"x"}}`
		x := postRPC(t, g0.URL, alice, notice, nil)
		if x.Status != http.StatusBadRequest || x.Resp == nil || x.Resp.Error == nil || x.Resp.Error.Code != -32600 {
			t.Fatalf("a client's own notice: %s, want 400 -32600", x)
		}
		if got := fleetMetric(t, []*gateway{g0}, "caddy_mcp_gateway_resumable_parked_calls", 1); got != 1 {
			t.Fatalf("resumable_parked_calls = %v after a client's notice, want the parked call", got)
		}
	})
	t.Run("typescript-sdk", func(t *testing.T) {
		up := startServerEverything(t)
		upstream := "\t\tupstream " + up + " {\n\t\t\tera legacy\n\t\t}\n\t\tresume_linger -1\n"
		pair := startFleetOf(t, 2, upstream, "peer")
		g0, g1 := pair[0], pair[1]
		for i := range calls {
			tsCallAcross(t, g0, g1, 10*i+1, fmt.Sprintf("Ada Home %d", i))
		}
		check(t, g0, g1, up)
	})
}
