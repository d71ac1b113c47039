package multiturn

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"
	"go.uber.org/zap"

	"github.com/caddyserver/caddy/v2"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/caddymodule/face"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/seal"
)

// testGateway is a face.Gateway with a keyring whose internal requests
// get canned answers, one per request (the last one again once they run
// out), each recorded with the route it was asked to be served on.
type testGateway struct {
	kr      *seal.Keyring
	answers []string
	// upstream is what Request reports as the upstream that served a
	// request ("": the route's, when there is one).
	upstream string
	seen     []string
	on       []*face.Route
	// used are the token ids used (UseOnce), useErr what UseOnce answers
	// instead when set.
	used   map[[16]byte]bool
	useErr error
	// span is what Traced names as a request's own span; traced records
	// each Traced call's tool and first.
	span   seal.TraceRef
	traced []tracedCall
}

// tracedCall is a call of testGateway.Traced.
type tracedCall struct {
	tool  string
	first seal.TraceRef
}

func (g *testGateway) Traced(_ *http.Request, tool string, first seal.TraceRef) seal.TraceRef {
	g.traced = append(g.traced, tracedCall{tool, first})
	if first == (seal.TraceRef{}) {
		return g.span
	}
	return first
}

func (g *testGateway) UseOnce(_ context.Context, _ string, id [16]byte, _ time.Time) error {
	switch {
	case g.useErr != nil:
		return g.useErr
	case g.used[id]:
		return face.ErrUsed
	}
	if g.used == nil {
		g.used = make(map[[16]byte]bool)
	}
	g.used[id] = true
	return nil
}

func (g *testGateway) Request(_ context.Context, _ *http.Request, in face.Internal, rec http.ResponseWriter) (string, *face.Failure) {
	b, err := jsonrpc.Marshal(jsonrpc.NewRequest(face.RequestID, in.Method, in.Params))
	if err != nil {
		return "", &face.Failure{Status: http.StatusInternalServerError, Detail: "the request could not be encoded"}
	}
	g.seen, g.on = append(g.seen, string(b)), append(g.on, in.On)
	if len(g.answers) == 0 {
		return "", &face.Failure{Status: http.StatusBadGateway, Detail: "no upstream in this test"}
	}
	rec.Header().Set("Content-Type", "application/json")
	_, _ = rec.Write([]byte(`{"jsonrpc":"2.0","id":1,` + g.answers[min(len(g.seen), len(g.answers))-1] + `}`))
	up := g.upstream
	if up == "" && in.On != nil {
		up = in.On.Upstream
	}
	return up, nil
}
func (g *testGateway) Principal(*http.Request) [16]byte             { return [16]byte{} }
func (g *testGateway) CheckRequest(*http.Request) *jsonrpc.RPCError { return nil }
func (g *testGateway) ReadBody(http.ResponseWriter, *http.Request) ([]byte, *jsonrpc.RPCError) {
	return nil, nil
}
func (g *testGateway) Keyring() *seal.Keyring               { return g.kr }
func (g *testGateway) Instance() string                     { return "test" }
func (g *testGateway) Logger() *zap.Logger                  { return zap.NewNop() }
func (g *testGateway) Limits() face.Limits                  { return face.Limits{MaxRounds: 3, ParkTTL: time.Minute} }
func (g *testGateway) Track(context.CancelCauseFunc) func() { return func() {} }
func (g *testGateway) Stopping() bool                       { return false }

// testFace is the face, on, over a testGateway answering answers.
func testFace(t *testing.T, answers ...string) (*Face, *testGateway) {
	t.Helper()
	kr, err := seal.NewKeyring(bytes.Repeat([]byte{9}, seal.KeySize))
	if err != nil {
		t.Fatal(err)
	}
	gw := &testGateway{kr: kr, answers: answers}
	f, err := New(caddy.Context{}, &Config{}, gw)
	if err != nil {
		t.Fatal(err)
	}
	return f.(*Face), gw
}

// TestOptIn: an initialize with the capability gets its session id sealed
// into a TurnSession, which opens back to the inner id and the client's
// capabilities; one without keeps its id as it is; the sealed id goes back
// to the client wherever an answer names the inner one.
func TestOptIn(t *testing.T) {
	f, _ := testFace(t)
	in := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25",` +
		`"capabilities":{"elicitation":{}, "experimental":{"` + capability + `":{}}},"clientInfo":{"name":"c","version":"1"}}}`
	rec := httptest.NewRecorder()
	handled, w, err := f.ServeMessage(rec, httptest.NewRequest(http.MethodPost, "/mcp", nil), face.Message{Method: "initialize", Body: []byte(in)})
	if handled || err != nil {
		t.Fatalf("an initialize was served by the face: %v", err)
	}
	w.Header().Set("Mcp-Session-Id", "inner-id")
	w.WriteHeader(http.StatusOK)
	outer := rec.Header().Get("Mcp-Session-Id")
	if !seal.IsTurnSession(outer) {
		t.Fatalf("an opted-in session id: %q", outer)
	}

	for _, caps := range []string{`{"elicitation":{}}`, `{"experimental":{"` + capability + `":true}}`, `{"experimental":{"io":{"modelcontextprotocol/multi-turn-sse":{}}}}`} {
		body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"capabilities":` + caps + `}}`
		if w := f.optInWriter(httptest.NewRecorder(), []byte(body)); w != nil {
			if _, wrapped := w.(*sessionWriter); wrapped {
				t.Errorf("%s opted in", caps)
			}
		}
	}

	r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
	r.Header.Set("Mcp-Session-Id", outer)
	rec = httptest.NewRecorder()
	w, r2 := f.OpenSession(rec, r)
	s := sessionOf(r2)
	if s == nil || s.outer != outer || r2.Header.Get("Mcp-Session-Id") != "inner-id" || r.Header.Get("Mcp-Session-Id") != outer ||
		string(s.Capabilities) != `{"elicitation":{},"experimental":{"`+capability+`":{}}}` || string(s.ClientInfo) != `{"name":"c","version":"1"}` {
		t.Fatalf("opened %+v, header %q", s, r2.Header.Get("Mcp-Session-Id"))
	}
	w.Header().Set("Mcp-Session-Id", "inner-id")
	_, _ = w.Write([]byte("{}"))
	if got := rec.Header().Get("Mcp-Session-Id"); got != outer {
		t.Fatalf("the answer names %q", got)
	}

	// Not a turn session, or one that does not open: left as it is, and
	// not the session of the request it is made on behalf of (an
	// internal request, whose context is that request's).
	for _, sid := range []string{"plain-id", seal.TurnSessionPrefix + "AAAA", outer[:len(outer)-2]} {
		in := r2.Clone(r2.Context())
		in.Header.Set("Mcp-Session-Id", sid)
		if _, in2 := f.OpenSession(rec, in); sessionOf(in2) != nil || in2.Header.Get("Mcp-Session-Id") != sid {
			t.Errorf("%q opened", sid)
		}
	}
}

// TestTurnInputs: an input_required's requests become the turn's inputs
// and the JSON-RPC requests the client is sent (its key as id, a URL-mode
// elicitation given an elicitationId); what the client did not declare,
// or a turn cannot carry, fails the call.
func TestTurnInputs(t *testing.T) {
	caps := []byte(`{"elicitation":{"form":{},"url":{}},"sampling":{},"roots":{}}`)
	reqs := gjson.Parse(`{"host":{"method":"elicitation/create","params":{"message":"Who?"}},
		"toast":{"method":"sampling/createMessage","params":{"maxTokens":5}},
		"r":{"method":"roots/list"},
		"go":{"method":"elicitation/create","params":{"mode":"url","url":"https://x","message":"Go"}}}`)
	inputs, msgs, fail := readInputs(reqs, caps)
	if fail != "" || len(inputs) != 4 || inputs[1] != (seal.TurnInput{Key: "toast", Kind: seal.TurnSampling}) || inputs[2].Kind != seal.TurnRoots {
		t.Fatalf("inputs %+v, fail %q", inputs, fail)
	}
	if string(msgs[0]) != `{"jsonrpc":"2.0","id":"host","method":"elicitation/create","params":{"message":"Who?"}}` ||
		string(msgs[2]) != `{"jsonrpc":"2.0","id":"r","method":"roots/list"}` ||
		gjson.GetBytes(msgs[3], "params.elicitationId").String() == "" || jsonrpc.ValidJSON(msgs[3]) != nil {
		t.Fatalf("messages: %s", bytes.Join(msgs, []byte("\n")))
	}
	for name, c := range map[string]struct{ reqs, caps, want string }{
		"no capability":  {`{"s":{"method":"sampling/createMessage","params":{}}}`, `{"elicitation":{}}`, "did not declare the capability"},
		"unknown method": {`{"x":{"method":"tools/list","params":{}}}`, string(caps), "unknown kind"},
		"no params":      {`{"x":{"method":"elicitation/create"}}`, string(caps), "has no params"},
		"long key":       {`{"` + strings.Repeat("k", seal.MaxTurnKey+1) + `":{"method":"roots/list"}}`, string(caps), "longer than"},
		"not an object":  {`[1]`, string(caps), "not an object"},
	} {
		if _, _, fail := readInputs(gjson.Parse(c.reqs), []byte(c.caps)); !strings.Contains(fail, c.want) {
			t.Errorf("%s: %q, want %q", name, fail, c.want)
		}
	}
	if inputs, _, fail := readInputs(gjson.Result{}, caps); fail != "" || len(inputs) != 0 {
		t.Errorf("no inputRequests: %+v %q", inputs, fail)
	}
}

// TestTurnResponses: the client's responses map onto inputResponses by
// id; errors decline an elicitation, give no roots and refuse sampling;
// unknown, repeated, missing or invalid answers are refused.
func TestTurnResponses(t *testing.T) {
	inputs := []seal.TurnInput{{Key: "e", Kind: seal.TurnElicitation}, {Key: "s", Kind: seal.TurnSampling}, {Key: "r", Kind: seal.TurnRoots}}
	errResp := func(id string) string {
		return `{"jsonrpc":"2.0","id":"` + id + `","error":{"code":-1,"message":"no"}}`
	}
	out, refused, rerr := inputResponses(inputs, gjson.Parse(`[`+errResp("r")+`,`+errResp("e")+`,`+
		`{"jsonrpc":"2.0","id":"s","result":{"role":"assistant","content":{"type":"text","text":"hi"},"model":"m"}}]`))
	if rerr != nil || refused != nil || string(out["e"]) != `{"action":"decline"}` || string(out["r"]) != `{"roots":[]}` || !strings.Contains(string(out["s"]), `"hi"`) {
		t.Fatalf("out %s, refused %+v, err %v", out, refused, rerr)
	}
	_, refused, rerr = inputResponses(inputs, gjson.Parse(`[`+errResp("r")+`,`+errResp("e")+`,`+errResp("s")+`]`))
	if rerr != nil || refused == nil || refused.id != "s" || refused.message != "no" {
		t.Fatalf("a refused sampling: %+v %v", refused, rerr)
	}
	ok := `{"jsonrpc":"2.0","id":"e","result":{"action":"accept","content":{"a":"b"}}}`
	for name, c := range map[string]struct {
		answers, want string
		code          int
	}{
		"unknown id":    {`[{"jsonrpc":"2.0","id":"x","result":{}}]`, "no request of this turn", jsonrpc.InvalidParams},
		"numeric id":    {`[{"jsonrpc":"2.0","id":1,"result":{}}]`, "no request of this turn", jsonrpc.InvalidParams},
		"twice":         {`[` + ok + `,` + ok + `]`, "answered twice", jsonrpc.InvalidParams},
		"missing":       {`[` + ok + `]`, `no response for id "s"`, jsonrpc.InvalidParams},
		"invalid":       {`[{"jsonrpc":"2.0","id":"e","result":{"action":"maybe"}}]`, "action", jsonrpc.InvalidParams},
		"a request":     {`[{"jsonrpc":"2.0","id":"e","method":"x"}]`, "not a JSON-RPC 2.0 response", jsonrpc.InvalidRequest},
		"both":          {`[{"jsonrpc":"2.0","id":"e","result":{},"error":{}}]`, "not a JSON-RPC 2.0 response", jsonrpc.InvalidRequest},
		"not 2.0":       {`[{"id":"e","result":{}}]`, "not a JSON-RPC 2.0 response", jsonrpc.InvalidRequest},
		"error string":  {`[{"jsonrpc":"2.0","id":"e","error":"no"}]`, "error must be an object", jsonrpc.InvalidParams},
		"result string": {`[{"jsonrpc":"2.0","id":"e","result":"yes"}]`, "result must be an object", jsonrpc.InvalidParams},
	} {
		_, _, rerr := inputResponses(inputs, gjson.Parse(c.answers))
		if rerr == nil || rerr.Code != c.code || rerr.HTTPStatus != http.StatusBadRequest || !strings.Contains(rerr.Message, c.want) {
			t.Errorf("%s: %v, want %d %q", name, rerr, c.code, c.want)
		}
	}
}

// TestServeTurnAnswersRefusals: what is refused before anything is used,
// with HTTP 400 and id null; a token of another session or principal, or
// expired, with one message.
func TestServeTurnAnswersRefusals(t *testing.T) {
	f, gw := testFace(t)
	s := &session{outer: "mt1.session"}
	st := seal.TurnState{Session: sessionHash(s.outer), Expires: time.Now().Add(time.Minute), CallID: []byte("7"), Name: "x",
		Inputs: []seal.TurnInput{{Key: "e", Kind: seal.TurnElicitation}}}
	st.Principal = gw.Principal(httptest.NewRequest(http.MethodPost, "/mcp", nil))
	good, err := seal.SealTurn(gw.kr, st)
	if err != nil {
		t.Fatal(err)
	}
	other := st
	other.Session = sessionHash("mt1.other")
	otherSession, _ := seal.SealTurn(gw.kr, other)
	other = st
	other.Principal[0] ^= 1
	otherPrincipal, _ := seal.SealTurn(gw.kr, other)
	answer := `[{"jsonrpc":"2.0","id":"e","result":{"action":"accept","content":{"a":"b"}}}]`
	for name, c := range map[string]struct {
		token, body, want string
		code              int
	}{
		"not JSON":        {good, `[{`, "Parse error", jsonrpc.ParseError},
		"an object":       {good, `{"jsonrpc":"2.0","id":"e","result":{}}`, "JSON array", jsonrpc.InvalidRequest},
		"empty":           {good, `[]`, "JSON array", jsonrpc.InvalidRequest},
		"too many":        {good, "[" + strings.Repeat("{},", seal.MaxTurnInputs) + "{}]", "JSON array", jsonrpc.InvalidRequest},
		"forged":          {"AAAA", answer, tokenRefused, jsonrpc.InvalidParams},
		"other session":   {otherSession, answer, tokenRefused, jsonrpc.InvalidParams},
		"other principal": {otherPrincipal, answer, tokenRefused, jsonrpc.InvalidParams},
		"unknown id":      {good, `[{"jsonrpc":"2.0","id":"x","result":{}}]`, "no request of this turn", jsonrpc.InvalidParams},
	} {
		w := httptest.NewRecorder()
		r := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(c.body))
		r.Header.Set("Last-Event-ID", c.token)
		if err := f.serveAnswers(w, r, []byte(c.body), s); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if w.Code != http.StatusBadRequest || gjson.Get(w.Body.String(), "error.code").Int() != int64(c.code) ||
			!strings.Contains(w.Body.String(), c.want) || gjson.Get(w.Body.String(), "id").Raw != "null" {
			t.Errorf("%s: HTTP %d %s, want 400 %d %q", name, w.Code, w.Body, c.code, c.want)
		}
	}
	if len(gw.used) != 0 {
		t.Errorf("a refusal used a token (%d used)", len(gw.used))
	}
	if len(gw.seen) != 0 {
		t.Errorf("a refusal made a call: %v", gw.seen)
	}
}

// TestAcceptsEventStream: only an Accept listing text/event-stream.
func TestAcceptsEventStream(t *testing.T) {
	for accept, want := range map[string]bool{
		"application/json, text/event-stream": true,
		"text/event-stream;q=0.5":             true,
		"application/json":                    false,
		"":                                    false,
		"*/*":                                 false,
	} {
		r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
		r.Header.Set("Accept", accept)
		if got := acceptsEventStream(r); got != want {
			t.Errorf("%q: %v", accept, got)
		}
	}
}

// TestRunTurns: the modern call's answers, as the gateway gives them (a
// test Gateway's canned ones), become the legacy client's: a result
// without resultType, an error, a turn of SSE events with a sealed
// Last-Event-ID, a load-shedding round retried with its state, and what a
// turn cannot carry.
func TestRunTurns(t *testing.T) {
	s := &session{TurnSession: seal.TurnSession{Capabilities: []byte(`{"elicitation":{}}`)}, outer: "mt1.s"}
	run := func(accept string, f *Face) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
		r.Header.Set("Accept", accept)
		w := httptest.NewRecorder()
		if err := f.run(w, r, s, call{id: []byte(`"c"`), ToolCall: face.ToolCall{Name: "ask", Args: []byte(`{"a":1}`)}}, nil); err != nil {
			t.Fatal(err)
		}
		return w
	}
	const both = "application/json, text/event-stream"

	f, gw := testFace(t, `"result":{"content":[],"resultType":"complete"}`)
	if w := run("application/json", f); w.Code != 200 || w.Body.String() != `{"jsonrpc":"2.0","id":"c","result":{"content":[]}}` {
		t.Errorf("result as JSON: %d %s", w.Code, w.Body)
	}
	if !strings.Contains(gw.seen[0], `"arguments":{"a":1}`) || !strings.Contains(gw.seen[0], `"io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}`) {
		t.Errorf("the call: %s", gw.seen[0])
	}
	f, _ = testFace(t, `"error":{"code":-32602,"message":"no tool"}`)
	if w := run(both, f); w.Header().Get("Content-Type") != "text/event-stream" || !strings.Contains(w.Body.String(), `data: {"jsonrpc":"2.0","id":"c","error":{"code":-32602`) {
		t.Errorf("error on a stream: %s", w.Body)
	}
	f, gw = testFace(t, `"result":{"resultType":"input_required","requestState":"s1"}`,
		`"result":{"resultType":"input_required","inputRequests":{"q":{"method":"elicitation/create","params":{"message":"Sure?"}}},"requestState":"s2"}`)
	w := run(both, f)
	body := w.Body.String()
	if len(gw.seen) != 2 || !strings.Contains(gw.seen[1], `"requestState":"s1"`) || !strings.HasPrefix(body, "id: mt-") ||
		!strings.Contains(body, "\nevent: buffer_input\n\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":\"q\",\"method\":\"elicitation/create\"") ||
		!strings.HasSuffix(body, "\nevent: input_required\n\n") {
		t.Fatalf("a turn after a load-shedding round: %v\n%s", gw.seen, body)
	}
	token := body[strings.LastIndex(body, "id: ")+4 : strings.LastIndex(body, "\nevent: input_required")]
	st, err := seal.OpenTurn(gw.kr, token, time.Now())
	if err != nil || string(st.CallID) != `"c"` || st.RequestState != "s2" || st.Name != "ask" || len(st.Inputs) != 1 || st.Inputs[0].Key != "q" ||
		st.Session != sessionHash("mt1.s") {
		t.Fatalf("the turn's state: %+v %v", st, err)
	}
	if w := run("application/json", f); w.Code != http.StatusNotAcceptable {
		t.Errorf("a turn without an event stream: %d %s", w.Code, w.Body)
	}

	for name, c := range map[string]struct {
		answer, want string
		status       int
	}{
		"a task":           {`"result":{"resultType":"task","task":{}}`, `"isError":true`, 200},
		"no capability":    {`"result":{"resultType":"input_required","inputRequests":{"s":{"method":"sampling/createMessage","params":{}}}}`, `"isError":true`, 200},
		"nothing to retry": {`"result":{"resultType":"input_required"}`, "neither inputRequests nor requestState", 502},
		"shedding forever": {`"result":{"resultType":"input_required","requestState":"s"}`, "more than max_rounds", 502},
		"not an object":    {`"result":[1]`, "Internal error: the upstream gave no answer", 502},
	} {
		f, _ := testFace(t, c.answer)
		if w := run("application/json", f); w.Code != c.status || !strings.Contains(w.Body.String(), c.want) {
			t.Errorf("%s: %d %s", name, w.Code, w.Body)
		}
	}
	f, gw = testFace(t)
	if w := run("application/json", f); w.Code != 502 || !strings.Contains(w.Body.String(), "Internal error: no upstream in this test") || len(gw.seen) != 1 {
		t.Errorf("a failed call: %d %s", w.Code, w.Body)
	}
}

// FuzzTurnAnswers: whatever a client POSTs as a turn's answers, the
// mapping never panics, and what it accepts answers every request of the
// turn, each with a JSON object.
func FuzzTurnAnswers(f *testing.F) {
	f.Add(`[{"jsonrpc":"2.0","id":"e","result":{"action":"accept","content":{"a":"b"}}},{"jsonrpc":"2.0","id":"s","error":{"code":-1}}]`)
	f.Add(`[{"jsonrpc":"2.0","id":"r","result":{"roots":[{"uri":"file:///x"}]}},{}]`)
	f.Add(`[[],1,"x",null]`)
	inputs := []seal.TurnInput{{Key: "e", Kind: seal.TurnElicitation}, {Key: "s", Kind: seal.TurnSampling}, {Key: "r", Kind: seal.TurnRoots}}
	f.Fuzz(func(t *testing.T, body string) {
		if jsonrpc.ValidJSON([]byte(body)) != nil {
			return // dispatch and serveTurnAnswers refuse it before
		}
		out, refused, rerr := inputResponses(inputs, gjson.Parse(body))
		if rerr != nil {
			if rerr.HTTPStatus != http.StatusBadRequest {
				t.Fatalf("refused with HTTP %d", rerr.HTTPStatus)
			}
			return
		}
		for _, in := range inputs {
			v, ok := out[in.Key]
			if (!ok || !gjson.ParseBytes(v).IsObject()) && (refused == nil || in.Kind != seal.TurnSampling) {
				t.Fatalf("accepted %s without an answer to %q: %s", body, in.Key, out)
			}
		}
	})
}
