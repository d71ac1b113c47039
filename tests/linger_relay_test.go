package tests

// Lingering calls relayed home: a call parked holding no stream
// whose retries come back at once keeps its streams open on the instance
// that parked it for resume_linger; a retry that lands on another instance
// meanwhile is relayed there and reads on from the open stream, instead of
// being resumed where it landed (a GET that makes the upstream replay the
// stream, a connection closed and dialed again, the session given back).

import (
	"fmt"
	"strings"
	"testing"
)

// TestLingerRelay: two instances of one fleet. In front of the go-sdk
// server with an event store (two questions a call: the first answer to
// the parking instance, the second to the other), the first call's first
// retry teaches the parking instance that the tool's retries come back at
// once; from then on every round lingers, and every retry that lands on
// the other instance is relayed home: the upstream reopens no stream
// after that first retry, and no session travels back. In front of
// server-everything (TypeScript SDK 1.x, one question, every retry to the
// other instance), the first call's session given back within the linger
// teaches the parking instance the same. Then the parking instance dies
// while a call lingers there: the other instance, finding it unreachable,
// resumes the call itself.
func TestLingerRelay(t *testing.T) {
	t.Parallel()
	const calls = 6
	lingered := `caddy_mcp_gateway_resumable_calls_total{event="lingered"}`
	given := `caddy_mcp_gateway_resumable_calls_total{event="given_back"}`
	sent := `caddy_mcp_gateway_instance_forwards_total{direction="sent",outcome="ok"}`
	t.Run("go-sdk", func(t *testing.T) {
		up := newResumableServer(t)
		upstream := "\t\tupstream " + up.url + " {\n\t\t\tera legacy\n\t\t}\n"
		pair := startFleetOf(t, 2, upstream, "advertise")
		g0, g1 := pair[0], pair[1]
		alice := map[string]string{"Authorization": "Bearer alice"}
		call := func(i int) inputRequired {
			t.Helper()
			first := parseInputRequired(t, askCall(t, g0.URL, 10*i+1, "tea", nil, alice))
			return parseInputRequired(t, askCall(t, g0.URL, 10*i+2, "tea", answerWith(t, first, "yes"), alice))
		}
		for i := range calls {
			x := askCall(t, g1.URL, 10*i+3, "tea", answerWith(t, call(i), fmt.Sprint(i)), alice)
			if x.Resp == nil || x.Resp.Error != nil || !strings.Contains(string(x.Resp.Result), fmt.Sprintf(`"accept:yes,accept:%d"`, i)) {
				t.Fatalf("call %d, its last answer on the other instance: %s", i, x)
			}
		}
		if got := fleetMetric(t, []*gateway{g0}, lingered, 2*calls-1); got != 2*calls-1 {
			t.Fatalf("lingered = %v on the parking instance, want %d (every round but the first)", got, 2*calls-1)
		}
		if got := fleetMetric(t, []*gateway{g1}, sent, calls); got != calls {
			t.Fatalf("forwards sent = %v by the other instance, want %d", got, calls)
		}
		if n, d := up.reopens.Load(), up.deletes.Load(); n != 1 || d != 0 {
			t.Fatalf("the upstream reopened %d call streams and ended %d sessions, want 1 (the first retry) and none", n, d)
		}
		if got := fleetMetric(t, []*gateway{g1}, given, 0); got != 0 {
			t.Fatalf("given_back = %v, want 0: no call ended away from its home", got)
		}

		// The home dies while the call lingers there: resumed where the
		// retry landed.
		ir := call(calls)
		g0.kill(t)
		x := askCall(t, g1.URL, 999, "tea", answerWith(t, ir, "alone"), alice)
		if x.Resp == nil || x.Resp.Error != nil || !strings.Contains(string(x.Resp.Result), `"accept:yes,accept:alone"`) {
			t.Fatalf("the last answer with the parking instance gone: %s", x)
		}
		if n := up.reopens.Load(); n != 2 {
			t.Fatalf("the upstream reopened %d call streams, want 2 (the first retry, and this one)", n)
		}
	})
	t.Run("typescript-sdk", func(t *testing.T) {
		up := startServerEverything(t)
		// The longest linger: the first call's session must be given back
		// while its call still lingers at home, however loaded the machine
		// (the other instance's resume and notice take most of it).
		upstream := "\t\tupstream " + up + " {\n\t\t\tera legacy\n\t\t}\n\t\tresume_linger 1s\n"
		pair := startFleetOf(t, 2, upstream, "peer")
		g0, g1 := pair[0], pair[1]
		for i := range calls {
			tsCallAcross(t, g0, g1, 10*i+1, fmt.Sprintf("Ada Lingers %d", i))
		}
		if got := fleetMetric(t, []*gateway{g1}, given, 1); got != 1 {
			t.Fatalf("given_back = %v, want 1 (the first call: its retry was not relayed)", got)
		}
		if got := fleetMetric(t, []*gateway{g0}, lingered, calls-1); got != calls-1 {
			t.Fatalf("lingered = %v on the parking instance, want %d (every call but the first)", got, calls-1)
		}
	})
}
