package tests

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/tests/support"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/seal"
)

// TestUpstreamAuthFleet: `upstream_auth exchange` across a fleet. Two
// instances with the same `auth` (tokens of oauth2-mock-server) and
// `upstream_auth exchange` (the RFC 8693 fixture token endpoint), in front
// of a go-sdk server with an event store behind a recorder of the
// Authorization it gets. A lingering call's retry landing on the other
// instance is relayed home, which exchanges the client's token; a retry
// whose home dies after reading it is resumed on the other instance, which
// exchanges the same token itself: the upstream gets the exchanged token of
// the same subject every time, never none, and the token endpoint makes one
// exchange per instance. Another subject's valid token cannot resume the
// call; a forwarding header signed with the fleet's key for alice's
// principal over mallory's token cannot make the home exchange mallory's
// token for alice's call (403, nothing exchanged, nothing upstream).
func TestUpstreamAuthFleet(t *testing.T) {
	t.Parallel()
	f := startExchangeFleet(t, "\t\tresume_linger 1s", "", false)
	home, other, up, rec, ts := f.fleet[0], f.fleet[1], f.up, f.rec, f.ts
	aliceToken, malloryToken := f.token(t, "alice"), f.token(t, "mallory")
	alice := map[string]string{"Authorization": "Bearer " + aliceToken}
	mallory := map[string]string{"Authorization": "Bearer " + malloryToken}
	exchanged := "Bearer exchanged:mcp-server:" + aliceToken
	call := func(url string, id int, extra map[string]any, hdr map[string]string) rpcExchange {
		t.Helper()
		return elicitingCall(t, url, id, "ask", map[string]any{}, extra, hdr)
	}
	result := func(x rpcExchange, want string) {
		t.Helper()
		if x.Resp == nil || x.Resp.Error != nil || !strings.Contains(string(x.Resp.Result), want) {
			t.Fatalf("want the result %q, got %s", want, x)
		}
	}

	// The first call, answered where it parked, teaches the home that the
	// tool's retries come back at once: later calls linger there.
	up.release <- struct{}{}
	ir := parseInputRequired(t, call(home.URL, 1, nil, alice))
	result(call(home.URL, 2, answerWith(t, ir, "first"), alice), "got first")
	wait(t, up.answered, 5*time.Second, "the first answer upstream")

	// (1) A lingering call's retry on the other instance, relayed home:
	// the home exchanged alice's token (once, for both calls), the other
	// instance nothing.
	up.release <- struct{}{}
	ir = parseInputRequired(t, call(home.URL, 3, nil, alice))
	result(call(other.URL, 4, answerWith(t, ir, "second"), alice), "got second")
	wait(t, up.answered, 5*time.Second, "the second answer upstream")
	waitMetrics(t, other, map[string]float64{`caddy_mcp_gateway_instance_forwards_total{direction="sent",outcome="ok"}`: 1})
	rec.only(t, exchanged, "relayed home")
	if n := ts.Count("mcp-server", aliceToken); n != 1 {
		t.Fatalf("%d exchanges of alice's token, want 1 (the home's)", n)
	}

	// The attack: a forwarding header signed with the fleet's key for
	// alice's principal, over mallory's valid token, sent to the home with
	// the retry of alice's lingering call.
	up.release <- struct{}{} // were the forged retry served, the tool would finish
	ir = parseInputRequired(t, call(home.URL, 5, nil, alice))
	m := meta(modernVersion)
	m["io.modelcontextprotocol/clientCapabilities"] = map[string]any{"elicitation": map[string]any{}}
	params := map[string]any{"name": "ask", "arguments": map[string]any{}, "_meta": m}
	for k, v := range answerWith(t, ir, "forged") {
		params[k] = v
	}
	body := rpcBody(t, 6, "tools/call", params)
	hdr := mergeHeaders(modernHeaders(modernVersion, "tools/call", "ask"), mallory)
	hdr[seal.ForwardedHeader] = fleetAuth(t, fleetKeyByte).Sign("gw-0", seal.ForwardedRequest{Method: http.MethodPost, URI: "/mcp",
		Body: []byte(body), Authorization: mallory["Authorization"], Principal: translate.PrincipalHash(f.auth.issuer + " alice")}, time.Now())
	before := rec.only(t, exchanged, "before the forged retry")
	if r := checkRPCError(t, postRPC(t, home.URL, hdr, body, 6), http.StatusForbidden, -32600, 6); r != nil && !strings.Contains(r.Error.Message, "not the principal's") {
		t.Errorf("the forged retry: %q", r.Error.Message)
	}
	if n := ts.Count("mcp-server", malloryToken); n != 0 {
		t.Errorf("the home exchanged mallory's token %d times for alice's call", n)
	}
	if after := rec.only(t, exchanged, "after the forged retry"); after != before {
		t.Errorf("the upstream got %d requests of the forged retry", after-before)
	}

	// (2) The next call's retry, on the other instance, is relayed home,
	// which posts the answer upstream and dies before it answers: the
	// other instance resumes the call itself, exchanging alice's token.
	ir = parseInputRequired(t, call(home.URL, 7, nil, alice))
	answer := make(chan rpcExchange, 1)
	go func() { answer <- call(other.URL, 8, answerWith(t, ir, "third"), alice) }()
	if got := wait(t, up.answered, 10*time.Second, "the answer upstream, posted by the home"); got != "third" {
		t.Fatalf("answer upstream %q", got)
	}
	before = rec.only(t, exchanged, "before the home's death")
	home.kill(t)
	var x rpcExchange
	select {
	case x = <-answer:
	case <-time.After(30 * time.Second):
		t.Fatal("no answer to the retry within 30s of the home's death")
	}
	result(x, "got third")
	if after := rec.only(t, exchanged, "resumed on the other instance"); after == before {
		t.Fatal("the other instance sent the upstream nothing: the call was not resumed there")
	}
	if n := ts.Count("mcp-server", aliceToken); n != 2 {
		t.Errorf("%d exchanges of alice's token, want 2 (one per instance)", n)
	}

	// (3) Mallory's valid token cannot resume alice's call on the other
	// instance either.
	ir = parseInputRequired(t, call(other.URL, 9, nil, alice))
	before = rec.only(t, exchanged, "before mallory's retry")
	if r := checkRPCError(t, call(other.URL, 10, answerWith(t, ir, "mallory"), mallory), http.StatusBadRequest, -32602, 10); r != nil && r.Error.Message != stateRefused {
		t.Errorf("mallory's retry: %q", r.Error.Message)
	}
	if after := rec.only(t, exchanged, "after mallory's retry"); after != before {
		t.Errorf("the upstream got %d requests of mallory's retry", after-before)
	}
	if n := ts.Count("mcp-server", malloryToken); n != 0 {
		t.Errorf("mallory's token was exchanged %d times", n)
	}
	for _, secret := range []string{aliceToken, malloryToken, "exchanged:", "gateway-secret"} {
		if strings.Contains(other.Log(), secret) {
			t.Errorf("the gateway's log holds %q", secret)
		}
	}
}

// TestUpstreamAuthFleetTask: a task the gateway hosts, in the fleet of
// TestUpstreamAuthFleet sharing Caddy's storage, taken over once its owner
// died: the instance that takes it over (at alice's tasks/get) reopens
// the call's stream upstream with alice's token exchanged there, and the
// task completes. The task's own requests before that (its run, the
// answer tasks/update posted) went on the owner's upstream session, with
// the credential exchanged for the request that created it.
func TestUpstreamAuthFleetTask(t *testing.T) {
	t.Parallel()
	storage := t.TempDir()
	f := startExchangeFleet(t, "\t\ttask ask required 0\n\t\ttask_lease 1s\n\t\ttask_poll_interval 200ms", "\tstorage file_system "+storage, false)
	owner, other, up, ts := f.fleet[0], f.fleet[1], f.up, f.ts
	aliceToken := f.token(t, "alice")
	exchanged := "Bearer exchanged:mcp-server:" + aliceToken
	alice := &taskClient{t: t, auth: "Bearer " + aliceToken}

	created := parseTask(t, alice.callTool(owner.URL, "ask", map[string]any{}))
	v := alice.until(owner.URL, created.TaskID, func(v taskView) bool { return v.Status == "input_required" }, "the task's question")
	written := taskRecord(storage)
	if x := alice.answerTask(owner.URL, v, "answer", "task"); x.Resp == nil || x.Resp.Error != nil {
		t.Fatalf("tasks/update: %s", x)
	}
	if got := wait(t, up.answered, 10*time.Second, "the task's answer upstream"); got != "task" {
		t.Fatalf("answer upstream %q", got)
	}
	poll(3*time.Second, func() bool { return taskRecord(storage) != written })
	before := f.rec.only(t, exchanged, "the task on its owner")
	owner.kill(t)

	up.release <- struct{}{}
	waitForWithin(t, 30*time.Second, "the task taken over to complete", func() bool {
		x := alice.task(other.URL, "tasks/get", created.TaskID, nil)
		if x.Status != http.StatusOK {
			t.Fatalf("tasks/get with the owner gone: %s", x)
		}
		v = parseTask(t, x)
		return v.Status != "working" && v.Status != "input_required"
	})
	if v.Status != "completed" || v.Result == nil || len(v.Result.Content) == 0 || v.Result.Content[0].Text != "got task" {
		t.Fatalf("the task taken over: %+v", v)
	}
	if after := f.rec.only(t, exchanged, "the task taken over"); after == before {
		t.Fatal("the instance that took the task over sent the upstream nothing")
	}
	if n := ts.Count("mcp-server", aliceToken); n != 2 {
		t.Errorf("%d exchanges of alice's token, want 2 (one per instance)", n)
	}
}

// TestUpstreamAuthFleetREST: the REST face in the fleet of
// TestUpstreamAuthFleet: a call started with a PUT on one instance and
// advanced (its question answered) on the other reaches the upstream with
// alice's exchanged token every time; the face's internal requests are
// served as the client request they are made for.
func TestUpstreamAuthFleetREST(t *testing.T) {
	t.Parallel()
	f := startExchangeFleet(t, "\t\trest /api\n\t\trest_wait 2s", "\tstorage file_system "+t.TempDir(), true)
	aliceToken := f.token(t, "alice")
	alice := map[string]string{"Authorization": "Bearer " + aliceToken}
	call := func(i int) string { return fmt.Sprintf("http://127.0.0.1:%d/api/tools/ask/calls/r1", f.fleet[i].Port) }

	first := wantCall(t, restDo(t, "PUT", call(0), withHeaders(alice, "Idempotency-Key", "k"), `{"arguments":{}}`),
		http.StatusCreated, "awaitingElicitationResult")
	f.up.release <- struct{}{}
	done := wantCall(t, restDo(t, "POST", call(1)+"/advance", withHeaders(alice, "If-Match", `"`+first.ETag+`"`),
		`{"action":"accept","content":{"answer":"rest"}}`), http.StatusOK, "success")
	if !strings.Contains(string(done.Result), "got rest") {
		t.Fatalf("the REST call's result: %s", done.Result)
	}
	if got := wait(t, f.up.answered, 5*time.Second, "the REST call's answer upstream"); got != "rest" {
		t.Fatalf("answer upstream %q", got)
	}
	if n := f.rec.only(t, "Bearer exchanged:mcp-server:"+aliceToken, "the REST call"); n == 0 {
		t.Fatal("the upstream received nothing")
	}
	if n := f.ts.Count("mcp-server", aliceToken); n < 1 || n > 2 {
		t.Errorf("%d exchanges of alice's token, want one per instance at most", n)
	}
}

// exchangeFleet is two instances of one fleet (ids gw-0 and gw-1, peers)
// with the same `auth` (tokens of oauth2-mock-server, for audience
// exchangeAudience) and `upstream_auth exchange` (the fixture token
// endpoint, audience mcp-server), in front of a holdingServer with an
// event store behind an authRecorder.
type exchangeFleet struct {
	fleet []*gateway
	auth  *authServer
	up    *holdingServer
	rec   *authRecorder
	ts    *support.TokenExchange
}

// exchangeAudience is the fleet's one public URL, its tokens' audience.
const exchangeAudience = "https://mcp.example.test/mcp"

// startExchangeFleet starts an exchangeFleet, with extra in each
// mcp_gateway block and globals in each Caddyfile's global options; with
// rest, the block also serves the REST face at /api (`rest /api` in extra).
func startExchangeFleet(t *testing.T, extra, globals string, rest bool) *exchangeFleet {
	t.Helper()
	f := &exchangeFleet{auth: startAuthServer(t), up: newHoldingServer(t, true), ts: support.ServeTokenExchange(t, "gateway", "gateway-secret")}
	f.rec = newAuthRecorder(t, f.up.url)
	ports := []int{freePort(t), freePort(t)}
	for i, port := range ports {
		block := fleetBlock(t, "\t\tupstream "+f.rec.url+" {\n\t\t\tera legacy\n\t\t}\n"+extra, "peer", ports, i) +
			fmt.Sprintf("\n\t\tauth {\n\t\t\tissuer %s\n\t\t\taudience %s\n\t\t\trequire_scope mcp\n\t\t}", f.auth.issuer, exchangeAudience) +
			"\n\t\tupstream_auth exchange {\n\t\t\ttoken_endpoint " + f.ts.URL +
			"\n\t\t\tclient_id gateway\n\t\t\tclient_secret gateway-secret\n\t\t\taudience mcp-server\n\t\t}"
		site := ""
		if rest {
			site = "\troute /api/* {\n\t\tmcp_gateway {\n" + block + "\n\t\t}\n\t}"
		}
		f.fleet = append(f.fleet, launchGateway(t, port, globals, site, block))
	}
	return f
}

// token mints a token of subject for the fleet.
func (f *exchangeFleet) token(t *testing.T, subject string) string {
	return f.auth.mint(t, map[string]any{"sub": subject, "aud": exchangeAudience, "scope": "mcp"}, nil, 600)
}

// only fails the test unless every request the upstream got so far
// carried want as Authorization; it returns how many there were.
func (rec *authRecorder) only(t *testing.T, want, when string) int {
	t.Helper()
	got := rec.authorizations("/mcp")
	for _, v := range got {
		if v != want {
			t.Fatalf("%s: the upstream received Authorization %q, want %q", when, v, want)
		}
	}
	return len(got)
}
