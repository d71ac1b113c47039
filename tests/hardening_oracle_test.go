package tests

// Refusals of a requestState must not tell anyone
// whether a token is genuine, nor whose it is not. Every requestState that
// is not valid for its caller — forged, tampered, another principal's,
// another request's, already used, expired (even another principal's
// expired one) — gets one answer: same status, code and message. The
// reasons go to the debug log only.

import (
	"encoding/base64"
	"net/http"
	"strings"
	"testing"
	"time"
)

// stateRefused is the one message of every refused requestState.
const stateRefused = "Invalid params: requestState is not valid for this request (invalid, expired, already used, or not yours): send the request again without it"

// oracleProbe is one retry an attacker (or a confused client) sends.
type oracleProbe struct {
	name  string
	topic string
	state string
	hdr   map[string]string
}

// sendProbes sends every probe with the same JSON-RPC id and the same
// answer, and requires byte-identical refusals (400, -32602,
// stateRefused).
func sendProbes(t *testing.T, g *gateway, key string, probes []oracleProbe) {
	t.Helper()
	var first rpcExchange
	for i, p := range probes {
		extra := map[string]any{"requestState": p.state, "inputResponses": map[string]any{key: acceptAnswer}}
		x := askCall(t, g.URL, 77, p.topic, extra, p.hdr)
		if r := checkRPCError(t, x, http.StatusBadRequest, -32602, 77); r != nil && r.Error.Message != stateRefused {
			t.Errorf("%s: refused with %q, want the one message for every invalid requestState", p.name, r.Error.Message)
		}
		if i == 0 {
			first = x
			continue
		}
		if x.Status != first.Status || x.Raw != first.Raw {
			t.Errorf("%s: answered %s; %s was answered %s: the refusals differ", p.name, x, probes[0].name, first)
		}
	}
}

// forgedState is a well-formed token that opens under no key.
func forgedState() string {
	b := make([]byte, 120)
	for i := range b {
		b[i] = byte(i * 7)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

func tamper(state string) string {
	b := []byte(state)
	b[len(b)/2] ^= 0x01
	return string(b)
}

// TestHardeningStateOracleHeld: a legacy server whose call parks holding
// its stream (go-sdk without an event store).
func TestHardeningStateOracleHeld(t *testing.T) {
	t.Parallel()
	rs := newRecordingServer(t)
	g := startGateway(t, "\t\tupstream "+rs.url+" {\n\t\t\tera legacy\n\t\t}\n\t\tpark_ttl 5s")
	alice := map[string]string{"Authorization": "Bearer alice"}
	mallory := map[string]string{"Authorization": "Bearer mallory"}

	ir := parseInputRequired(t, askCall(t, g.URL, 1, "tea", nil, alice))
	var key string
	for k := range ir.InputRequests {
		key = k
	}
	probes := []oracleProbe{
		{"forged", "tea", forgedState(), alice},
		{"tampered", "tea", tamper(ir.RequestState), alice},
		{"another principal's", "tea", ir.RequestState, mallory},
		{"another principal's (anonymous)", "tea", ir.RequestState, nil},
		{"another request's", "coffee", ir.RequestState, alice},
	}
	before := rs.requests.Load()
	sendProbes(t, g, key, probes)
	if n := rs.requests.Load() - before; n != 0 {
		t.Fatalf("the upstream received %d requests for refused retries", n)
	}
	// The call goes on with its real retry; then its state is used.
	retry := map[string]any{"inputResponses": map[string]any{key: acceptAnswer}, "requestState": ir.RequestState}
	if got := checkToolResult(t, askCall(t, g.URL, 2, "tea", retry, alice), 2); got != "answer: yes" {
		t.Fatalf("the real retry: %q", got)
	}
	late := parseInputRequired(t, askCall(t, g.URL, 3, "late", nil, alice))
	before = rs.requests.Load()
	sendProbes(t, g, key, []oracleProbe{
		probes[0],
		{"already used", "tea", ir.RequestState, alice},
		{"already used, another principal's", "tea", ir.RequestState, mallory},
	})
	if n := rs.requests.Load() - before; n != 0 {
		t.Fatalf("the upstream received %d requests for refused retries", n)
	}
	time.Sleep(5500 * time.Millisecond) // late expires, and is cancelled upstream
	before = rs.requests.Load()
	sendProbes(t, g, key, []oracleProbe{
		probes[0],
		{"expired", "late", late.RequestState, alice},
		{"expired, another principal's", "late", late.RequestState, mallory},
	})
	if n := rs.requests.Load() - before; n != 0 {
		t.Fatalf("the upstream received %d requests for refused retries", n)
	}
	if log := g.Log(); strings.Contains(log, "another principal") {
		t.Fatalf("the reasons reached the log above debug level:\n%s", log)
	}
}

// TestHardeningStateOracleResumable: a legacy server whose streams are
// resumable (go-sdk with an event store), so that the call parks holding
// nothing and the whole call is sealed into its requestState.
func TestHardeningStateOracleResumable(t *testing.T) {
	t.Parallel()
	up := newResumableServer(t)
	g := startGateway(t, "\t\tupstream "+up.url+" {\n\t\t\tera legacy\n\t\t}\n\t\tpark_ttl 5s\n\t\tresume_linger -1")
	alice := map[string]string{"Authorization": "Bearer alice"}
	mallory := map[string]string{"Authorization": "Bearer mallory"}

	ir := parseInputRequired(t, askCall(t, g.URL, 1, "tea", nil, alice))
	var key string
	for k := range ir.InputRequests {
		key = k
	}
	sendProbes(t, g, key, []oracleProbe{
		{"forged", "tea", forgedState(), alice},
		{"tampered", "tea", tamper(ir.RequestState), alice},
		{"another principal's", "tea", ir.RequestState, mallory},
		{"another request's", "coffee", ir.RequestState, alice},
	})
	// The real retry: the second question. The first state is now used.
	second := parseInputRequired(t, askCall(t, g.URL, 2, "tea", answerWith(t, ir, "yes"), alice))
	late := parseInputRequired(t, askCall(t, g.URL, 3, "late", nil, alice))
	sendProbes(t, g, key, []oracleProbe{
		{"forged", "tea", forgedState(), alice},
		{"already used", "tea", ir.RequestState, alice},
	})
	time.Sleep(5500 * time.Millisecond)
	sendProbes(t, g, key, []oracleProbe{
		{"forged", "tea", forgedState(), alice},
		{"expired", "late", late.RequestState, alice},
		{"expired, another principal's", "late", late.RequestState, mallory},
		{"expired second round", "tea", second.RequestState, alice},
	})
}
