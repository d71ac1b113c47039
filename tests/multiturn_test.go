package tests

// Multi-turn SSE (SEP-1858, option `multi_turn_sse on`): a legacy client
// that opts in with capabilities.experimental
// ["io.modelcontextprotocol/multi-turn-sse"] gets a tool call's input
// requests between `buffer_input` and `input_required` events, the stream
// ending there, and POSTs its buffered answers with Last-Event-ID to any
// instance of a fleet sharing state_key. The client here is raw HTTP with
// its own SSE reader: no SDK speaks SEP-1858.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// mtCaps are the capabilities of a client that opts in.
const mtCaps = `{"elicitation":{},"sampling":{},"experimental":{"io.modelcontextprotocol/multi-turn-sse":{}}}`

// mtEvent is one SSE event as the client reads it.
type mtEvent struct {
	typ, id, data  string
	hasID, hasData bool
}

// readEvents reads a whole event stream (LF line ends, as the gateway
// writes them), without the gateway's own SSE reader.
func readEvents(t *testing.T, body io.Reader) []mtEvent {
	t.Helper()
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var out []mtEvent
	var ev mtEvent
	started := false
	for sc.Scan() {
		line := sc.Text()
		name, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch {
		case line == "":
			if started {
				out = append(out, ev)
			}
			ev, started = mtEvent{}, false
		case name == "":
			// a comment (keep-alive)
		case name == "event":
			ev.typ, started = value, true
		case name == "id":
			ev.id, ev.hasID, started = value, true, true
		case name == "data":
			if ev.hasData {
				ev.data += "\n"
			}
			ev.data, ev.hasData, started = ev.data+value, true, true
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("reading the event stream: %v", err)
	}
	if started {
		t.Fatalf("the stream ended inside an event: %+v", ev)
	}
	return out
}

// mtRequest is a request of the server's the client is sent in a turn.
type mtRequest struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

// mtAnswer is what a tools/call or a turn's answers got: a turn (token and
// requests) or the final JSON-RPC response.
type mtAnswer struct {
	status int
	ctype  string
	token  string
	reqs   []mtRequest
	final  *rpcResponse
	raw    string
}

func (a mtAnswer) String() string {
	return fmt.Sprintf("HTTP %d %s token %q, %d requests, final %v: %s", a.status, a.ctype, a.token, len(a.reqs), a.final != nil, tail(a.raw, 2000))
}

// mtRead reads the answer of resp: a JSON response, or an event stream of
// a turn (buffer_input with an id and no data, message events of
// requests, input_required with an id, nothing after) or of the final
// response.
func mtRead(t *testing.T, resp *http.Response) mtAnswer {
	t.Helper()
	// A stream that does not end (a request in-line, waiting for its
	// answer) fails the test rather than hanging it.
	stop := time.AfterFunc(15*time.Second, func() { resp.Body.Close() })
	defer stop.Stop()
	a := mtAnswer{status: resp.StatusCode, ctype: resp.Header.Get("Content-Type")}
	if !strings.HasPrefix(a.ctype, "text/event-stream") {
		b, _ := io.ReadAll(resp.Body)
		a.raw = string(b)
		var r rpcResponse
		if json.Unmarshal(b, &r) == nil && (r.Result != nil || r.Error != nil) {
			a.final = &r
		}
		return a
	}
	evs := readEvents(t, resp.Body)
	a.raw = fmt.Sprintf("%+v", evs)
	if len(evs) > 0 && evs[0].typ == "buffer_input" {
		last := evs[len(evs)-1]
		if !evs[0].hasID || evs[0].id == "" || evs[0].hasData || last.typ != "input_required" || !last.hasID || last.id == "" || last.hasData {
			t.Fatalf("not a turn: %s", a)
		}
		a.token = last.id
		for _, ev := range evs[1 : len(evs)-1] {
			var r mtRequest
			if ev.typ != "message" || json.Unmarshal([]byte(ev.data), &r) != nil || r.Method == "" || r.ID == nil {
				t.Fatalf("a turn's event is not a request: %+v", ev)
			}
			a.reqs = append(a.reqs, r)
		}
		return a
	}
	for _, ev := range evs {
		var r rpcResponse
		if ev.hasData && json.Unmarshal([]byte(ev.data), &r) == nil && (r.Result != nil || r.Error != nil) {
			a.final = &r
		}
	}
	return a
}

// mtOpen initializes a session with caps and returns its id.
func mtOpen(t *testing.T, url, caps string) string {
	t.Helper()
	x := readRPC(t, post(t, url, nil, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25",`+
		`"capabilities":`+caps+`,"clientInfo":{"name":"raw-sep1858","version":"1"}}}`), 1)
	sid := x.Header.Get("Mcp-Session-Id")
	if x.Status != http.StatusOK || x.Resp == nil || x.Resp.Error != nil || sid == "" {
		t.Fatalf("initialize: %s", x)
	}
	if r := post(t, url, legacyHeaders(sid), `{"jsonrpc":"2.0","method":"notifications/initialized"}`); r.StatusCode != http.StatusAccepted {
		t.Fatalf("notifications/initialized: status %d", r.StatusCode)
	}
	return sid
}

// mtCall POSTs a tools/call of the session.
func mtCall(t *testing.T, url, sid string, id any, tool string, args map[string]any) mtAnswer {
	t.Helper()
	return mtRead(t, post(t, url, legacyHeaders(sid), rpcBody(t, id, "tools/call", map[string]any{"name": tool, "arguments": args})))
}

// mtAnswers POSTs a turn's answers (a JSON array) with Last-Event-ID;
// extra headers go on top.
func mtAnswers(t *testing.T, url, sid, token string, answers []map[string]any, extra map[string]string) mtAnswer {
	t.Helper()
	hdr := legacyHeaders(sid)
	hdr["Last-Event-ID"] = token
	for k, v := range extra {
		hdr[k] = v
	}
	b, err := json.Marshal(answers)
	if err != nil {
		t.Fatal(err)
	}
	return mtRead(t, post(t, url, hdr, string(b)))
}

// mtResult answers request r with result.
func mtResult(r mtRequest, result map[string]any) map[string]any {
	return map[string]any{"jsonrpc": "2.0", "id": r.ID, "result": result}
}

func mtAccept(r mtRequest, content map[string]any) map[string]any {
	return mtResult(r, map[string]any{"action": "accept", "content": content})
}

// mtTurn checks that a is a turn of requests of the given methods, whose
// params contain want (when not "").
func mtTurn(t *testing.T, a mtAnswer, want string, methods ...string) mtAnswer {
	t.Helper()
	if a.status != http.StatusOK || a.token == "" || len(a.reqs) != len(methods) {
		t.Fatalf("want a turn of %v, got %s", methods, a)
	}
	for i, m := range methods {
		if a.reqs[i].Method != m {
			t.Fatalf("request %d: want %s, got %s", i, m, a.reqs[i].Method)
		}
	}
	if want != "" && !strings.Contains(string(a.reqs[0].Params), want) {
		t.Fatalf("want %q in %s", want, a.reqs[0].Params)
	}
	return a
}

// mtFinal checks that a is the final result of call id, containing want.
func mtFinal(t *testing.T, a mtAnswer, id, want string) {
	t.Helper()
	if a.status != http.StatusOK || a.final == nil || a.final.Error != nil || string(a.final.ID) != id ||
		!strings.Contains(string(a.final.Result), want) || strings.Contains(string(a.final.Result), "resultType") {
		t.Fatalf("want the result of %s with %q, got %s", id, want, a)
	}
}

// mtRefused checks a JSON error of the POST itself.
func mtRefused(t *testing.T, a mtAnswer, code int, want string) {
	t.Helper()
	if a.status != http.StatusBadRequest || a.final == nil || a.final.Error == nil || a.final.Error.Code != code ||
		!strings.Contains(a.final.Error.Message, want) || string(a.final.ID) != "null" {
		t.Fatalf("want %d %q, got %s", code, want, a)
	}
}

// TestMultiTurnLegacy: in front of a legacy server (the forward bridge
// parks the call): a tool that elicits twice, each turn's answers POSTed
// to the other instance; a used Last-Event-ID refused; bad answers
// refused without using the token; answers with an error (the tool sees a
// decline), the last as JSON for a client without text/event-stream.
func TestMultiTurnLegacy(t *testing.T) {
	t.Parallel()
	up := newResumableServer(t)
	fleet := startFleet(t, "\t\tupstream "+up.url+" {\n\t\t\tera legacy\n\t\t}\n\t\tmulti_turn_sse on", "peer")
	a, b := fleet[0].URL, fleet[1].URL
	sid := mtOpen(t, a, mtCaps)
	if !strings.HasPrefix(sid, "mt1.") {
		t.Fatalf("an opted-in session id: %q", sid)
	}

	first := mtTurn(t, mtCall(t, a, sid, "call-7", "ask", map[string]any{"topic": "tea"}), "About tea?", "elicitation/create")
	second := mtTurn(t, mtAnswers(t, b, sid, first.token, []map[string]any{mtAccept(first.reqs[0], map[string]any{"answer": "yes"})}, nil),
		"Sure?", "elicitation/create")
	last := []map[string]any{mtAccept(second.reqs[0], map[string]any{"answer": "sure"})}
	mtFinal(t, mtAnswers(t, a, sid, second.token, last, nil), `"call-7"`, "accept:yes,accept:sure")

	// Used: refused where it was used; elsewhere (these instances share no
	// storage: see once_test.go), the call it resumed is over.
	mtRefused(t, mtAnswers(t, a, sid, second.token, last, nil), -32602, "Last-Event-ID is not valid")
	if x := mtAnswers(t, b, sid, second.token, last, nil); x.final == nil || x.final.Error == nil || x.token != "" {
		t.Fatalf("a used Last-Event-ID on another instance: %s", x)
	}

	// Bad answers leave the token usable; another session's, a tampered
	// token are refused.
	third := mtTurn(t, mtCall(t, b, sid, 8, "ask", map[string]any{"topic": "jam"}), "About jam?", "elicitation/create")
	req := third.reqs[0]
	ok := mtAccept(req, map[string]any{"answer": "x"})
	for _, c := range []struct {
		answers []map[string]any
		code    int
		want    string
	}{
		{nil, -32600, "JSON array"},
		{[]map[string]any{}, -32600, "JSON array"},
		{[]map[string]any{{"jsonrpc": "2.0", "id": "nope", "result": map[string]any{"action": "accept"}}}, -32602, "no request of this turn"},
		{[]map[string]any{ok, ok}, -32602, "answered twice"},
		{[]map[string]any{mtResult(req, map[string]any{"action": "maybe"})}, -32602, "action"},
		{[]map[string]any{{"jsonrpc": "2.0", "id": req.ID, "method": "x"}}, -32600, "not a JSON-RPC 2.0 response"},
	} {
		mtRefused(t, mtAnswers(t, a, sid, third.token, c.answers, nil), c.code, c.want)
	}
	other := mtOpen(t, b, mtCaps)
	mtRefused(t, mtAnswers(t, a, other, third.token, []map[string]any{ok}, nil), -32602, "Last-Event-ID is not valid")
	tampered := []byte(third.token)
	tampered[len(tampered)/2] ^= 'A' ^ 'B'
	mtRefused(t, mtAnswers(t, a, sid, string(tampered), []map[string]any{ok}, nil), -32602, "Last-Event-ID is not valid")

	// Errors from the client: the tool is told the user declined, and
	// answers. The last answers want JSON: the result comes as JSON.
	refuse := func(r mtRequest) map[string]any {
		return map[string]any{"jsonrpc": "2.0", "id": r.ID, "error": map[string]any{"code": -1, "message": "user said no"}}
	}
	fourth := mtTurn(t, mtAnswers(t, b, sid, third.token, []map[string]any{refuse(req)}, nil), "Sure?", "elicitation/create")
	x := mtAnswers(t, a, sid, fourth.token, []map[string]any{refuse(fourth.reqs[0])}, map[string]string{"Accept": "application/json"})
	if !strings.HasPrefix(x.ctype, "application/json") {
		t.Fatalf("want JSON, got %s", x)
	}
	mtFinal(t, x, "8", "decline:,decline:")
}

// TestMultiTurnLegacyHeld: the same two turns in front of a legacy server
// whose streams are not resumable: the retry is relayed to the instance
// holding the parked call, whichever instance the answers reached.
func TestMultiTurnLegacyHeld(t *testing.T) {
	t.Parallel()
	fleet := startFleet(t, "\t\tupstream "+newHeldServer(t)+" {\n\t\t\tera legacy\n\t\t}\n\t\tmulti_turn_sse on", "peer")
	a, b := fleet[0].URL, fleet[1].URL
	sid := mtOpen(t, a, mtCaps)
	first := mtTurn(t, mtCall(t, a, sid, 1, "ask", map[string]any{"topic": "tea"}), "About tea?", "elicitation/create")
	second := mtTurn(t, mtAnswers(t, b, sid, first.token, []map[string]any{mtAccept(first.reqs[0], map[string]any{"answer": "yes"})}, nil),
		"Sure?", "elicitation/create")
	mtFinal(t, mtAnswers(t, a, sid, second.token, []map[string]any{mtAccept(second.reqs[0], map[string]any{"answer": "sure"})}, nil),
		"1", "accept:yes,accept:sure")
	// A tool that asks nothing answers at once, on the stream.
	mtFinal(t, mtCall(t, b, sid, 2, "hello", map[string]any{"name": "Caddy"}), "2", "Hello, Caddy!")
	// Roots are asked as any request, of a client that declared them.
	rsid := mtOpen(t, b, `{"elicitation":{},"roots":{},"experimental":{"io.modelcontextprotocol/multi-turn-sse":{}}}`)
	r := mtTurn(t, mtCall(t, b, rsid, 4, "roots_ask", nil), "", "roots/list")
	r = mtTurn(t, mtAnswers(t, a, rsid, r.token, []map[string]any{mtResult(r.reqs[0], map[string]any{"roots": []map[string]any{{"uri": "file:///tmp"}}})}, nil),
		"Go?", "elicitation/create")
	mtFinal(t, mtAnswers(t, b, rsid, r.token, []map[string]any{mtAccept(r.reqs[0], map[string]any{"answer": "go"})}, nil), "4", "roots:1 accept:go")

	// The session's other requests are served as without the opt-in.
	l := readRPC(t, post(t, b, legacyHeaders(sid), rpcBody(t, 3, "tools/list", nil)), 3)
	if l.Status != http.StatusOK || l.Resp == nil || l.Resp.Error != nil || !strings.Contains(string(l.Resp.Result), `"roots_ask"`) {
		t.Fatalf("tools/list: %s", l)
	}
	if got := l.Header.Get("Mcp-Session-Id"); got != "" && got != sid {
		t.Fatalf("tools/list named the session %q", got)
	}
}

// TestMultiTurnModern: in front of a modern server (the TypeScript SDK 2.x
// fixture), passed through: plan_party's three rounds (elicitation,
// sampling, elicitation) are three turns, each answered on the other
// instance; a sampling request answered with an error ends the call.
func TestMultiTurnModern(t *testing.T) {
	t.Parallel()
	fixture := startModernFixture(t)
	fleet := startFleet(t, "\t\tupstream "+fixture+" {\n\t\t\tera modern\n\t\t}\n\t\tmulti_turn_sse on", "peer")
	a, b := fleet[0].URL, fleet[1].URL
	sid := mtOpen(t, a, mtCaps)

	s := mtTurn(t, mtCall(t, a, sid, 1, "plan_party", map[string]any{"occasion": "picnic"}), "", "elicitation/create")
	s = mtTurn(t, mtAnswers(t, b, sid, s.token, []map[string]any{mtAccept(s.reqs[0], map[string]any{"name": "Ada"})}, nil),
		"Ada's picnic", "sampling/createMessage")
	s = mtTurn(t, mtAnswers(t, a, sid, s.token, []map[string]any{mtResult(s.reqs[0], map[string]any{"role": "assistant",
		"content": map[string]any{"type": "text", "text": "To Ada!"}, "model": "test-llm"})}, nil), "", "elicitation/create")
	mtFinal(t, mtAnswers(t, b, sid, s.token, []map[string]any{mtAccept(s.reqs[0], map[string]any{"send": true})}, nil),
		"1", `hosted by Ada; toast: \"To Ada!\"; invitations sent: true`)

	// A next turn needs an event stream: without one, the call ends (406).
	s = mtTurn(t, mtCall(t, b, sid, 3, "plan_party", map[string]any{"occasion": "tea"}), "", "elicitation/create")
	x := mtAnswers(t, a, sid, s.token, []map[string]any{mtAccept(s.reqs[0], map[string]any{"name": "Bo"})}, map[string]string{"Accept": "application/json"})
	if x.status != http.StatusNotAcceptable || x.final == nil || x.final.Error == nil || x.final.Error.Code != -32600 || string(x.final.ID) != "3" {
		t.Fatalf("a next turn without an event stream: %s", x)
	}

	s = mtTurn(t, mtCall(t, b, sid, 2, "test_sampling", map[string]any{"prompt": "Hi?"}), "", "sampling/createMessage")
	x = mtAnswers(t, a, sid, s.token, []map[string]any{{"jsonrpc": "2.0", "id": s.reqs[0].ID, "error": map[string]any{"code": -1, "message": "no LLM today"}}}, nil)
	mtFinal(t, x, "2", "no LLM today")
	if !strings.Contains(string(x.final.Result), `"isError":true`) {
		t.Fatalf("refused sampling: %s", x)
	}
}

// TestMultiTurnDualEra: in front of a dual-era server (the Go SDK's
// stateless everything-server, era auto), whose legacy sessions the
// gateway pins to it, an opted-in session's call is passed through as the
// modern call it is, declaring the session's capabilities. Through the
// forward bridge, as a legacy call, it failed: that server keeps no
// legacy session between POSTs, so it forgets the capabilities of the
// bridge's initialize and refuses to elicit ("client does not support
// elicitation"), as it does to any legacy client.
func TestMultiTurnDualEra(t *testing.T) {
	t.Parallel()
	g := startGateway(t, "\t\tupstream "+startGoEverything(t, true)+"\n\t\tmulti_turn_sse on")
	sid := mtOpen(t, g.URL, mtCaps)
	s := mtTurn(t, mtCall(t, g.URL, sid, 1, "test_input_required_result_elicitation", nil), "What is your name?", "elicitation/create")
	mtFinal(t, mtAnswers(t, g.URL, sid, s.token, []map[string]any{mtAccept(s.reqs[0], map[string]any{"name": "Ada"})}, nil),
		"1", "Hello, Ada!")
}

// TestMultiTurnNotOptedIn: with multi_turn_sse on, a client that does not
// opt in is served as before: its session id is a plain one, and the
// tool's elicitation arrives in-line on the call's stream, answered by a
// POST of its own (202). With the option off, a client that opts in gets
// a plain session too.
func TestMultiTurnNotOptedIn(t *testing.T) {
	t.Parallel()
	up := newResumableServer(t)
	g := startGateway(t, "\t\tupstream "+up.url+" {\n\t\t\tera legacy\n\t\t}\n\t\tmulti_turn_sse on")
	sid := mtOpen(t, g.URL, `{"elicitation":{}}`)
	if strings.HasPrefix(sid, "mt1.") {
		t.Fatalf("a session that did not opt in: %q", sid)
	}
	resp := post(t, g.URL, legacyHeaders(sid), rpcBody(t, 3, "tools/call", map[string]any{"name": "ask", "arguments": map[string]any{"topic": "tea"}}))
	ch := readSSE(resp.Body)
	for _, answer := range []string{"yes", "sure"} {
		m := nextData(t, ch)
		var r mtRequest
		if err := json.Unmarshal([]byte(m.data), &r); err != nil || r.Method != "elicitation/create" {
			t.Fatalf("want an in-line elicitation, got %q", m.data)
		}
		b, _ := json.Marshal(mtAccept(r, map[string]any{"answer": answer}))
		if x := post(t, g.URL, legacyHeaders(sid), string(b)); x.StatusCode != http.StatusAccepted {
			t.Fatalf("the answer: status %d", x.StatusCode)
		}
	}
	if m := nextData(t, ch); !strings.Contains(m.data, "accept:yes,accept:sure") || !strings.Contains(m.data, `"id":3`) {
		t.Fatalf("the result: %q", m.data)
	}

	off := startGateway(t, "\t\tupstream "+up.url+" {\n\t\t\tera legacy\n\t\t}")
	if sid := mtOpen(t, off.URL, mtCaps); strings.HasPrefix(sid, "mt1.") {
		t.Fatalf("multi_turn_sse off gave an opted-in session: %q", sid)
	}
}

// TestReadmeCurlMultiTurn runs the multi-turn curl example of docs/faces.md, as
// written (the demo's URL replaced with the test gateway's), against the
// demo server behind a gateway with multi_turn_sse on: a turn, its answer,
// and the result docs/faces.md shows.
func TestReadmeCurlMultiTurn(t *testing.T) {
	t.Parallel()
	scripts, readme := readmeCurlScripts(t)
	script, ok := scripts["multi-turn"]
	if !ok || !strings.Contains(script, readmeDemoURL) {
		t.Fatalf("no <!-- curl: multi-turn --> block using %s in docs/faces.md", readmeDemoURL)
	}
	g := startGateway(t, "\t\tupstream "+startDemoServer(t)+" {\n\t\t\tera auto\n\t\t}\n\t\tmulti_turn_sse on")
	out := runReadmeScript(t, strings.ReplaceAll(script, readmeDemoURL, g.URL))
	for _, w := range []string{"event: buffer_input\n", `"method":"elicitation/create"`, `"message":"How many people, and when?"`, "event: input_required\n"} {
		if !strings.Contains(out, w) {
			t.Errorf("the output lacks %q:\n%s", w, out)
		}
	}
	last := ""
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if strings.HasPrefix(l, "data: ") {
			last = l
		}
	}
	if !strings.Contains(last, `"id":2,"result":{"content":[{"type":"text","text":"Booked Chez Caddy for 2 on 2026-12-24."}]`) ||
		!strings.Contains(readme, last+"\n") {
		t.Errorf("docs/faces.md does not show the result its multi-turn curl example gets:\n%s", last)
	}
}

// TestMultiTurnExpired: a turn's Last-Event-ID lives park_ttl; then it is
// refused.
func TestMultiTurnExpired(t *testing.T) {
	t.Parallel()
	g := startGateway(t, "\t\tupstream "+newHeldServer(t)+" {\n\t\t\tera legacy\n\t\t}\n\t\tmulti_turn_sse on\n\t\tpark_ttl 1s")
	sid := mtOpen(t, g.URL, mtCaps)
	s := mtTurn(t, mtCall(t, g.URL, sid, 1, "ask", map[string]any{"topic": "tea"}), "About tea?", "elicitation/create")
	time.Sleep(2500 * time.Millisecond)
	mtRefused(t, mtAnswers(t, g.URL, sid, s.token, []map[string]any{mtAccept(s.reqs[0], map[string]any{"answer": "late"})}, nil),
		-32602, "Last-Event-ID is not valid")
}
