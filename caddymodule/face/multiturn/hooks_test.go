package multiturn

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/caddyserver/caddy/v2"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/caddymodule/face"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/seal"
)

// TestNew: off, the face only opens sessions (turning it off ends no
// session); on, it has every hook.
func TestNew(t *testing.T) {
	off, err := New(caddy.Context{}, nil, &testGateway{})
	if err != nil || off == nil {
		t.Fatalf("off: %v %v", off, err)
	}
	if _, ok := off.(face.SessionFace); !ok {
		t.Error("off, the face does not open sessions")
	}
	if _, ok := off.(face.MessageFace); ok {
		t.Error("off, the face serves messages")
	}
	if _, ok := off.(face.RouteFace); ok {
		t.Error("off, the face serves routed requests")
	}
	on, _ := testFace(t)
	var _ interface {
		face.SessionFace
		face.MessageFace
		face.RouteFace
	} = on
}

// openedRequest is a POST of an opted-in session (opened by f), a
// tools/call accepting SSE.
func openedRequest(t *testing.T, f *Face, outer string) *http.Request {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
	r.Header.Set("Mcp-Session-Id", outer)
	r.Header.Set("Accept", "application/json, text/event-stream")
	_, r = f.OpenSession(httptest.NewRecorder(), r)
	if sessionOf(r) == nil {
		t.Fatal("the session did not open")
	}
	return r
}

// sealedSession is an opted-in session id around inner, with caps.
func sealedSession(t *testing.T, kr *seal.Keyring, inner, caps string) string {
	t.Helper()
	id, err := seal.SealTurnSession(kr, seal.TurnSession{Inner: seal.GatewaySessionID(inner), Capabilities: []byte(caps)})
	if err != nil {
		t.Fatal(err)
	}
	return string(id)
}

// TestServeRouted: a tools/call of an opted-in session taking SSE is made
// on the route's upstream (pass-through to a modern one, the forward
// bridge in front of a legacy one), the modern upstream a turn names
// being where failover took the call; what the face cannot carry is left
// to the gateway.
func TestServeRouted(t *testing.T) {
	const turn = `"result":{"resultType":"input_required","inputRequests":{"q":{"method":"elicitation/create","params":{"message":"Sure?"}}},"requestState":"s"}`
	const ask = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"ask","arguments":{"a":1}}}`
	f, gw := testFace(t, turn)
	gw.upstream = "http://b/mcp" // failover
	outer := sealedSession(t, gw.kr, "inner", `{"elicitation":{}}`)
	r := openedRequest(t, f, outer)
	w := httptest.NewRecorder()
	rt := face.Route{Upstream: "http://a/mcp", Modern: true}
	handled, err := f.ServeRouted(w, r, face.Message{Method: "tools/call", Body: []byte(ask)}, []byte("7"), rt)
	if !handled || err != nil || len(gw.on) != 1 || gw.on[0] == nil || *gw.on[0] != rt {
		t.Fatalf("served %v %v on %v", handled, err, gw.on)
	}
	body := w.Body.String()
	token := body[strings.LastIndex(body, "id: ")+4 : strings.LastIndex(body, "\nevent: input_required")]
	st, err := seal.OpenTurn(gw.kr, token, time.Now())
	if err != nil || st.Upstream != "http://b/mcp" || string(st.CallID) != "7" || string(st.Arguments) != `{"a":1}` || st.Session != sessionHash(outer) {
		t.Fatalf("the turn's state: %+v %v", st, err)
	}

	f, gw = testFace(t, turn)
	gw.upstream = "http://b/mcp"
	r = openedRequest(t, f, outer)
	w = httptest.NewRecorder()
	legacy := face.Route{Upstream: "http://a/mcp"}
	if handled, err := f.ServeRouted(w, r, face.Message{Method: "tools/call", Body: []byte(ask)}, []byte("7"), legacy); !handled || err != nil ||
		*gw.on[0] != legacy {
		t.Fatalf("legacy upstream: %v %v on %v", handled, err, gw.on)
	}
	body = w.Body.String()
	token = body[strings.LastIndex(body, "id: ")+4 : strings.LastIndex(body, "\nevent: input_required")]
	if st, err := seal.OpenTurn(gw.kr, token, time.Now()); err != nil || st.Upstream != "" {
		t.Fatalf("a turn through the forward bridge names an upstream: %+v %v", st, err)
	}

	plain := httptest.NewRequest(http.MethodPost, "/mcp", nil)
	plain.Header.Set("Accept", "text/event-stream")
	jsonOnly := openedRequest(t, f, outer)
	jsonOnly.Header.Set("Accept", "application/json")
	for name, c := range map[string]struct {
		r      *http.Request
		method string
		body   string
		id     string
	}{
		"no session":     {plain, "tools/call", ask, "7"},
		"not a call":     {openedRequest(t, f, outer), "tools/list", `{"jsonrpc":"2.0","id":7,"method":"tools/list"}`, "7"},
		"no SSE":         {jsonOnly, "tools/call", ask, "7"},
		"a task":         {openedRequest(t, f, outer), "tools/call", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"ask","task":{}}}`, "7"},
		"long name":      {openedRequest(t, f, outer), "tools/call", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"` + strings.Repeat("n", seal.MaxTurnName+1) + `"}}`, "7"},
		"arguments list": {openedRequest(t, f, outer), "tools/call", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"ask","arguments":[1]}}`, "7"},
		"long id":        {openedRequest(t, f, outer), "tools/call", ask, `"` + strings.Repeat("i", seal.MaxTurnCallID) + `"`},
	} {
		calls := len(gw.seen)
		if handled, err := f.ServeRouted(httptest.NewRecorder(), c.r, face.Message{Method: c.method, Body: []byte(c.body)}, []byte(c.id), legacy); handled || err != nil ||
			len(gw.seen) != calls {
			t.Errorf("%s: served (%v, %v)", name, handled, err)
		}
	}
}

// TestServeAnswersRetry: a turn's answers are the retry's
// inputResponses, made on the modern upstream the token names (else
// routed as any modern request), once.
func TestServeAnswersRetry(t *testing.T) {
	for _, upstream := range []string{"http://a/mcp", ""} {
		f, gw := testFace(t, `"result":{"content":[{"type":"text","text":"done"}]}`)
		outer := sealedSession(t, gw.kr, "inner", `{"elicitation":{}}`)
		st := seal.TurnState{Session: sessionHash(outer), Expires: time.Now().Add(time.Minute), CallID: []byte(`"c"`), Name: "ask",
			RequestState: "s", Upstream: upstream, Inputs: []seal.TurnInput{{Key: "e", Kind: seal.TurnElicitation}}}
		st.ID[0] = byte(len(upstream)) + 1
		token, err := seal.SealTurn(gw.kr, st)
		if err != nil {
			t.Fatal(err)
		}
		answers := []byte(`[{"jsonrpc":"2.0","id":"e","result":{"action":"accept","content":{"a":"b"}}}]`)
		for try := range 2 {
			r := openedRequest(t, f, outer)
			r.Header.Set("Last-Event-ID", token)
			w := httptest.NewRecorder()
			handled, _, err := f.ServeMessage(w, r, face.Message{Body: answers})
			if !handled || err != nil {
				t.Fatalf("%q: not served: %v", upstream, err)
			}
			if try == 1 {
				if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), tokenRefused) || len(gw.seen) != 1 {
					t.Errorf("%q: a used token: %d %s", upstream, w.Code, w.Body)
				}
				continue
			}
			if !strings.Contains(w.Body.String(), `"id":"c","result":{"content":[{"type":"text","text":"done"}]}`) ||
				!bytes.Contains([]byte(gw.seen[0]), []byte(`"inputResponses":{"e":{"action":"accept","content":{"a":"b"}}},"requestState":"s"`)) {
				t.Fatalf("%q: %s\nthe call: %s", upstream, w.Body, gw.seen)
			}
			want := (*face.Route)(nil)
			if upstream != "" {
				want = &face.Route{Upstream: upstream, Modern: true}
			}
			if (gw.on[0] == nil) != (want == nil) || (want != nil && *gw.on[0] != *want) {
				t.Errorf("%q: served on %+v", upstream, gw.on[0])
			}
		}
	}
}

// TestServeAnswersUnrecorded: answers whose token's use cannot be
// recorded (the storage down) are refused with 503, id null, and make no
// call; once the storage is back, the same token is answered.
func TestServeAnswersUnrecorded(t *testing.T) {
	f, gw := testFace(t, `"result":{"content":[{"type":"text","text":"done"}]}`)
	outer := sealedSession(t, gw.kr, "inner", `{"elicitation":{}}`)
	st := seal.TurnState{Session: sessionHash(outer), Expires: time.Now().Add(time.Minute), CallID: []byte(`"c"`), Name: "ask",
		RequestState: "s", Inputs: []seal.TurnInput{{Key: "e", Kind: seal.TurnElicitation}}}
	token, err := seal.SealTurn(gw.kr, st)
	if err != nil {
		t.Fatal(err)
	}
	answers := []byte(`[{"jsonrpc":"2.0","id":"e","result":{"action":"accept","content":{"a":"b"}}}]`)
	serve := func() *httptest.ResponseRecorder {
		r := openedRequest(t, f, outer)
		r.Header.Set("Last-Event-ID", token)
		w := httptest.NewRecorder()
		if handled, _, err := f.ServeMessage(w, r, face.Message{Body: answers}); !handled || err != nil {
			t.Fatalf("not served: %v", err)
		}
		return w
	}
	gw.useErr = fmt.Errorf("%w: locking: disk on fire", face.ErrUseUnrecorded)
	w := serve()
	if w.Code != http.StatusServiceUnavailable || gjson.Get(w.Body.String(), "error.code").Int() != jsonrpc.InternalError ||
		gjson.Get(w.Body.String(), "id").Raw != "null" || !strings.Contains(w.Body.String(), useUnrecorded) || len(gw.seen) != 0 {
		t.Fatalf("storage down: HTTP %d %s, %d calls", w.Code, w.Body, len(gw.seen))
	}
	gw.useErr = nil
	if w := serve(); !strings.Contains(w.Body.String(), `"id":"c","result":{"content":[{"type":"text","text":"done"}]}`) || len(gw.seen) != 1 {
		t.Fatalf("storage back: %s, %d calls", w.Body, len(gw.seen))
	}
}

// TestTurnTrace: a call's first request names its tool and its own span
// (Gateway.Traced), which the turn token carries; the POST of the turn's
// answers names the tool and the span the token carries (its span links
// there), and the next turn's token carries the first request's span on,
// not the answers'.
func TestTurnTrace(t *testing.T) {
	const turn = `"result":{"resultType":"input_required","inputRequests":{"q":{"method":"elicitation/create","params":{"message":"Sure?"}}},"requestState":"s"}`
	const ask = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"ask"}}`
	f, gw := testFace(t, turn)
	first := seal.TraceRef{TraceID: [16]byte{1}, SpanID: [8]byte{2}, Flags: 1}
	gw.span = first
	outer := sealedSession(t, gw.kr, "inner", `{"elicitation":{}}`)
	tokenIn := func(w *httptest.ResponseRecorder) string {
		body := w.Body.String()
		return body[strings.LastIndex(body, "id: ")+4 : strings.LastIndex(body, "\nevent: input_required")]
	}
	tokenOf := func(w *httptest.ResponseRecorder) seal.TurnState {
		t.Helper()
		st, err := seal.OpenTurn(gw.kr, tokenIn(w), time.Now())
		if err != nil {
			t.Fatalf("the turn: %v\n%s", err, w.Body)
		}
		return st
	}
	w := httptest.NewRecorder()
	if handled, err := f.ServeRouted(w, openedRequest(t, f, outer), face.Message{Method: "tools/call", Body: []byte(ask)}, []byte("7"),
		face.Route{Upstream: "http://a/mcp"}); !handled || err != nil {
		t.Fatalf("served %v %v", handled, err)
	}
	st := tokenOf(w)
	if st.Trace != first || len(gw.traced) != 1 || gw.traced[0] != (tracedCall{"ask", seal.TraceRef{}}) {
		t.Fatalf("the first turn carries %+v; traced %+v", st.Trace, gw.traced)
	}

	gw.span = seal.TraceRef{TraceID: [16]byte{3}, SpanID: [8]byte{4}} // the answers' own span
	r := openedRequest(t, f, outer)
	r.Header.Set("Last-Event-ID", tokenIn(w))
	w = httptest.NewRecorder()
	answers := []byte(`[{"jsonrpc":"2.0","id":"q","result":{"action":"accept","content":{}}}]`)
	if handled, _, err := f.ServeMessage(w, r, face.Message{Body: answers}); !handled || err != nil {
		t.Fatalf("the answers: %v %v", handled, err)
	}
	if st := tokenOf(w); st.Trace != first || len(gw.traced) != 2 || gw.traced[1] != (tracedCall{"ask", first}) {
		t.Errorf("the next turn carries %+v; traced %+v", st.Trace, gw.traced)
	}
}
