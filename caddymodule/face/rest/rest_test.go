package rest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/certmagic"
	"github.com/tidwall/gjson"
	"go.uber.org/zap"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/caddymodule/face"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/seal"
)

// testGateway is a face.Gateway whose internal requests serve answers
// (nil: every request fails, as without an upstream).
type testGateway struct {
	kr     *seal.Keyring
	shared bool // state_key configured
	// answer serves an internal request into w.
	answer func(in face.Internal, w http.ResponseWriter)
}

func (g testGateway) Request(_ context.Context, _ *http.Request, in face.Internal, rec http.ResponseWriter) (string, *face.Failure) {
	if g.answer == nil {
		return "", &face.Failure{Status: http.StatusBadGateway, Detail: "no upstream in this test"}
	}
	g.answer(in, rec)
	return "http://upstream.test/mcp", nil
}
func (g testGateway) Principal(*http.Request) [16]byte             { return [16]byte{7} }
func (g testGateway) CheckRequest(*http.Request) *jsonrpc.RPCError { return nil }
func (g testGateway) ReadBody(http.ResponseWriter, *http.Request) ([]byte, *jsonrpc.RPCError) {
	return nil, nil
}
func (g testGateway) Keyring() *seal.Keyring { return g.kr }
func (g testGateway) Instance() string       { return "test" }
func (g testGateway) Logger() *zap.Logger    { return zap.NewNop() }
func (g testGateway) Limits() face.Limits {
	return face.Limits{MaxRounds: 3, Lease: 15 * time.Second, MaxResult: 1 << 20, SharedKey: g.shared}
}
func (g testGateway) Track(context.CancelCauseFunc) func() { return func() {} }
func (g testGateway) Stopping() bool                       { return false }

func (g testGateway) Traced(_ *http.Request, _ string, first seal.TraceRef) seal.TraceRef {
	return first
}

// UseOnce: the REST face has no tokens to use once.
func (g testGateway) UseOnce(context.Context, string, [16]byte, time.Time) error { return nil }

// testKeyring is a keyring of a fixed key.
func testKeyring(t *testing.T) *seal.Keyring {
	t.Helper()
	kr, err := seal.NewKeyring(make([]byte, seal.KeySize))
	if err != nil {
		t.Fatal(err)
	}
	return kr
}

// TestParsePath: the routes of the face, names and ids checked segment
// by segment (escaped slashes, dot segments, the charset, the length),
// unknown paths apart.
func TestParsePath(t *testing.T) {
	for path, want := range map[string]route{
		"/tools":                            {kind: "tools"},
		"/resources-templates":              {kind: "resources-templates"},
		"/openapi.json":                     {kind: "openapi"},
		"/resources/My%20File":              {kind: "resource", name: "My File"},
		"/prompts/greet":                    {kind: "prompt", name: "greet"},
		"/tools/ask/calls":                  {kind: "calls", tool: "ask"},
		"/tools/a.b-c_d/calls/ID-9.x":       {kind: "call", tool: "a.b-c_d", id: "ID-9.x"},
		"/tools/ask/calls/x/advance":        {kind: "advance", tool: "ask", id: "x"},
		"/tools/ask/calls/x/cancel":         {kind: "cancel", tool: "ask", id: "x"},
		"/tools/ask/calls/" + longName(128): {kind: "call", tool: "ask", id: pathName(longName(128))},
	} {
		got, err := parsePath(path)
		if err != nil || got != want {
			t.Errorf("%s: %+v, %v; want %+v", path, got, err, want)
		}
	}
	for _, path := range []string{"", "/", "/tool", "/tools/ask", "/tools/ask/calls/x/other", "/tools/ask/calls/x/advance/y", "/resources/a/b"} {
		if _, err := parsePath(path); !errors.Is(err, errNotFound) {
			t.Errorf("%s: %v, want not found", path, err)
		}
	}
	for _, path := range []string{
		"/tools/../calls/x", "/tools/ask/calls/..", "/tools/ask/calls/.", "/tools/.ask/calls/x", "/tools/a%2Fb/calls/x",
		"/tools/ask/calls/a%2F..%2F..%2Fb", "/tools/ask/calls/a%00", "/tools/ask/calls/%zz", "/tools/ask/calls/" + longName(129),
		"/tools/ask/calls/%C3%A9", "/tools/ask/calls/a b", "/tools//calls/x", "/resources/a%0Ab",
	} {
		if _, err := parsePath(path); err == nil || errors.Is(err, errNotFound) {
			t.Errorf("%s: %v, want a refusal", path, err)
		}
	}
}

func longName(n int) string { return strings.Repeat("x", n) }

// TestSeen: a running call whose lease lapsed reads as failed, its
// instance lost, with another etag; one whose lease holds is running.
func TestSeen(t *testing.T) {
	now := time.Now()
	c := seal.RESTCall{Status: statusRunning, ETag: "e", Lease: now.Add(-time.Second).UnixMilli()}
	if got := seen(c, now); got.Status != statusFailed || got.ETag == "e" || !strings.Contains(string(got.Error), "was lost") {
		t.Fatalf("lapsed: %+v", got)
	}
	c.Lease = now.Add(time.Second).UnixMilli()
	if got := seen(c, now); got.Status != statusRunning || got.ETag != "e" {
		t.Fatalf("held: %+v", got)
	}
}

// TestView: a round of several questions is shown one at a time, in key
// order, roots (answered by the gateway) never.
func TestView(t *testing.T) {
	c := seal.RESTCall{Tool: "t", ID: "i", ETag: "e", Status: statusAwaitSampling, Inputs: []seal.RESTInput{
		{Key: "a", Method: "roots/list", Answer: json.RawMessage(`{"roots":[]}`)},
		{Key: "b", Method: "elicitation/create", Answer: json.RawMessage(`{"action":"accept"}`)},
		{Key: "c", Method: "sampling/createMessage", Params: json.RawMessage(`{"maxTokens":5}`)},
		{Key: "d", Method: "elicitation/create", Params: json.RawMessage(`{"message":"m"}`)},
	}}
	v := view(c)
	if v.InputKey != "c" || v.InputsPending != 2 || string(v.SamplingRequest) != `{"maxTokens":5}` || v.ElicitationRequest != nil {
		t.Fatalf("view: %+v", v)
	}
	c.Status = statusSuccess
	if v := view(c); v.InputKey != "" || v.SamplingRequest != nil {
		t.Fatalf("an ended call shows a question: %+v", v)
	}
}

// TestEtagMatches: lists, weak tags and * match.
func TestEtagMatches(t *testing.T) {
	for h, want := range map[string]bool{`"e"`: true, `W/"e"`: true, `"x", "e"`: true, `*`: true, `"x"`: false, ``: false, `"ee"`: false} {
		if got := etagMatches(h, "e"); got != want {
			t.Errorf("%q: %v", h, got)
		}
	}
}

// parseOptions parses the lines of an mcp_gateway block with the face's
// options, as the handler hands them over.
func parseOptions(t *testing.T, block string) (*Config, error) {
	t.Helper()
	var cfg *Config
	d := caddyfile.NewTestDispenser(block)
	for d.Next() {
		parse, ok := Options[d.Val()]
		if !ok {
			t.Fatalf("not an option of the face: %s", d.Val())
		}
		if err := parse(d, &cfg); err != nil {
			return cfg, err
		}
	}
	return cfg, nil
}

// TestOptions: the Caddyfile options reach the config; a base that is not
// a clean path is refused where it is written; an option given twice is
// refused.
func TestOptions(t *testing.T) {
	cfg, err := parseOptions(t, "rest /api/v1\nrest_wait 2s\nrest_call_ttl 1h\nrest_max_calls_per_principal 7\n"+
		"rest_max_records_per_principal 10\nrest_max_bytes_per_principal 1MiB\nrest_max_records 100\nrest_max_bytes 1GB")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(cfg)
	if string(b) != `{"base_path":"/api/v1","wait":2000000000,"call_ttl":3600000000000,"max_calls_per_principal":7,`+
		`"max_records_per_principal":10,"max_bytes_per_principal":1048576,"max_records":100,"max_bytes":1000000000}` {
		t.Fatalf("rest: %s", b)
	}
	for _, base := range []string{"api", "/", "/api/", "/a/../b", "/a?x", "/{env.X}", "/a//b"} {
		if _, err := parseOptions(t, "rest "+base); err == nil || !strings.Contains(err.Error(), "rest: the base path") {
			t.Errorf("%q: %v", base, err)
		}
	}
	for block, want := range map[string]string{
		"rest /a\nrest /b":               "rest already specified",
		"rest_wait 1s\nrest_wait 2s":     "rest_wait already specified",
		"rest_wait -1s":                  "rest_wait: must be positive",
		"rest_call_ttl soon":             "invalid rest_call_ttl",
		"rest_max_calls_per_principal 0": "want a positive whole number",
		"rest_max_calls_per_principal 1\nrest_max_calls_per_principal 2": "already specified",
		"rest_max_records_per_principal 0":                               "want a positive whole number",
		"rest_max_bytes much":                                            "want a size",
	} {
		if _, err := parseOptions(t, block); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", block, err, want)
		}
	}
}

// runningCaddy starts Caddy once, for the contexts New is given.
var runningCaddy = sync.OnceValue(func() error {
	off := false
	return caddy.Run(&caddy.Config{Admin: &caddy.AdminConfig{Disabled: true, Config: &caddy.ConfigSettings{Persist: &off}}})
})

// caddyContext is a caddy.Context with Caddy's storage, ended with the
// test.
func caddyContext(t *testing.T) caddy.Context {
	t.Helper()
	if err := runningCaddy(); err != nil {
		t.Fatalf("starting caddy: %v", err)
	}
	ctx, cancel := caddy.NewContext(caddy.ActiveContext())
	t.Cleanup(cancel)
	return ctx
}

// TestNew: `rest` needs state_key and a base path; with them, the face
// uses Caddy's storage, the defaults apply, and it serves the paths under
// its base, and no other; off, there is no face.
func TestNew(t *testing.T) {
	ctx := caddyContext(t)
	gw := testGateway{kr: testKeyring(t)}
	if _, err := New(ctx, &Config{BasePath: "/api"}, gw); err == nil || !strings.Contains(err.Error(), "rest needs state_key") {
		t.Fatalf("without state_key: %v", err)
	}
	gw.shared = true
	for name, bad := range map[string]Config{
		"no base":  {Wait: caddy.Duration(time.Second)},
		"bad base": {BasePath: "/api/"},
		"calls":    {BasePath: "/api", MaxCallsPerPrincipal: -1},
		"wait":     {BasePath: "/api", Wait: -1},
	} {
		if _, err := New(ctx, &bad, gw); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	cfg := &Config{BasePath: "/api"}
	ff, err := New(ctx, cfg, gw)
	if err != nil {
		t.Fatal(err)
	}
	f, ok := ff.(*Face)
	if !ok || f.storage == nil || time.Duration(cfg.Wait) != defaultWait ||
		time.Duration(cfg.CallTTL) != defaultCallTTL || cfg.MaxCallsPerPrincipal != defaultMaxCalls || f.cfg != *cfg {
		t.Fatalf("made: %+v %+v", ff, cfg)
	}
	for path, want := range map[string]bool{"/api": true, "/api/tools": true, "/apix": false, "/mcp": false} {
		w := httptest.NewRecorder()
		served, err := f.ServePath(w, httptest.NewRequest(http.MethodGet, path, nil))
		if err != nil || served != want {
			t.Errorf("%s: served %v, %v", path, served, err)
		}
		if served && w.Header().Get("Content-Type") != "application/problem+json" {
			t.Errorf("%s: %d %s", path, w.Code, w.Body)
		}
	}
	if off, err := New(ctx, nil, gw); err != nil || off != nil {
		t.Fatalf("rest off: %v %v", off, err)
	}
}

// TestRunTable: the per-principal bound, a second run of one call
// refused, and a slot freed by end.
func TestRunTable(t *testing.T) {
	tab := &runTable{runs: make(map[string]*running), counts: make(map[[16]byte]int)}
	a := &running{princ: [16]byte{1}, cancel: func(error) {}}
	b := &running{princ: [16]byte{1}, cancel: func(error) {}}
	if err := tab.start("k1", a, 1); err != nil {
		t.Fatal(err)
	}
	if err := tab.start("k2", b, 1); !errors.Is(err, errBusy) {
		t.Fatalf("over the bound: %v", err)
	}
	if err := tab.start("k1", b, 5); err == nil {
		t.Fatal("a call ran twice")
	}
	tab.end("k1", a)
	if err := tab.start("k2", b, 1); err != nil {
		t.Fatal(err)
	}
}

// testFace is a face on a temporary file_system storage, its internal
// requests answered by answer.
func testFace(t *testing.T, answer func(in face.Internal, w http.ResponseWriter)) (*Face, *certmagic.FileStorage) {
	t.Helper()
	store := &certmagic.FileStorage{Path: t.TempDir()}
	cfg := Config{BasePath: "/api", CallTTL: caddy.Duration(time.Hour)}
	cfg.setDefaults()
	return &Face{gw: testGateway{kr: testKeyring(t), shared: true, answer: answer}, cfg: cfg, storage: store, usage: newUsage()}, store
}

// TestSweep: the sweeper deletes the records past rest_call_ttl (read
// only when last written before it), leaves the others, the roots and
// what does not open, and counts what is left.
func TestSweep(t *testing.T) {
	f, store := testFace(t, nil)
	ctx := context.Background()
	now := time.Now()
	princ := [16]byte{7}
	put := func(tool, id pathName, updated time.Time) string {
		key := f.callKey(princ, tool, id)
		if err := f.save(ctx, key, seal.RESTCall{Principal: princ, Tool: string(tool), ID: string(id), Status: statusSuccess,
			Updated: updated.UnixMilli()}); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(store.Filename(key), updated, updated); err != nil {
			t.Fatal(err)
		}
		return key
	}
	old := put("ask", "old", now.Add(-2*time.Hour))
	fresh := put("ask", "fresh", now.Add(-time.Minute))
	other := put("hello", "old", now.Add(-3*time.Hour))
	_ = store.Store(ctx, f.rootsKey(princ), []byte("roots"))
	foreign := f.callKey(princ, "ask", "foreign")
	_ = store.Store(ctx, foreign, []byte("not sealed"))
	_ = os.Chtimes(store.Filename(foreign), now.Add(-2*time.Hour), now.Add(-2*time.Hour))
	n, err := f.sweepOnce(ctx, now)
	if err != nil || n != 2 {
		t.Fatalf("swept %d, %v; want 2", n, err)
	}
	if records := f.usage.store.records; records != 3 {
		t.Errorf("counted %d records after the sweep, want the fresh call, the roots and the foreign one", records)
	}
	for key, want := range map[string]bool{old: false, other: false, fresh: true, f.rootsKey(princ): true, foreign: true} {
		if got := store.Exists(ctx, key); got != want {
			t.Errorf("%s: exists %v, want %v", key, got, want)
		}
	}
	if _, err := f.load(ctx, fresh, [16]byte{8}, now); !errors.Is(err, errNoRecord) {
		t.Errorf("another principal's record opened: %v", err)
	}
}

// writeSSE writes stream as an SSE answer, in pieces.
func writeSSE(t *testing.T, w http.ResponseWriter, stream string) {
	w.Header().Set("Content-Type", "text/event-stream")
	for i := 0; i < len(stream); i += 7 {
		if _, err := w.Write([]byte(stream[i:min(i+7, len(stream))])); err != nil {
			t.Error(err)
		}
	}
}

// TestProgress: a call's progress notifications are found in an SSE
// answer as it is written, in pieces, with LF or CRLF lines; the response
// is found at the end; a JSON answer is not scanned.
func TestProgress(t *testing.T) {
	stream := "id: 1\ndata: \n\n" +
		"data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progress\":1}}\n\n" +
		"data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"info\"}}\r\n\r\n" +
		"data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\r\ndata: \"params\":{\"progress\":2}}\r\n\r\n" +
		"data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"content\":[]}}\n\n"
	var got []string
	f, _ := testFace(t, func(in face.Internal, w http.ResponseWriter) {
		if p, ok := in.Params.(face.CallParams); !ok || gjson.Get(mustJSON(t, p.Meta), "progressToken").String() != progressToken {
			t.Errorf("the call asks for no progress: %+v", in.Params)
		}
		writeSSE(t, w, stream)
	})
	p := &progress{}
	c := face.Client{GW: f.gw, OnProgress: func(b []byte) { got = append(got, string(b)); p.set(b) }}
	a, fail := c.Do(context.Background(), httptest.NewRequest(http.MethodPut, "/api/tools/t/calls/i", nil), face.ToolCall{Name: "t"}.Internal(toolCallMeta))
	if fail != nil || !a.Result().Exists() {
		t.Fatalf("response: %v %s", fail, a.Response.Raw)
	}
	if len(got) != 2 || got[0] != `{"progress":1}` || got[1] != `{"progress":2}` || string(p.get()) != `{"progress":2}` {
		t.Fatalf("progress: %q", got)
	}
	got = nil
	f.gw = testGateway{answer: func(_ face.Internal, w http.ResponseWriter) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"jsonrpc":"2.0","method":"notifications/progress","params":{}}` + "\n\n"))
	}}
	_, _ = f.toolCall(context.Background(), httptest.NewRequest(http.MethodPut, "/", nil), face.ToolCall{Name: "t"}, p)
	if got != nil {
		t.Fatalf("a JSON answer was scanned: %q", got)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestRounds: a round that asks only for roots is answered with the
// principal's roots and retried; a round with the client's questions
// waits for them, roots answered; an error answer fails the call, with
// the HTTP status of a refusal to try later; too many rounds of roots
// fail it.
func TestRounds(t *testing.T) {
	const rootsRound = `{"resultType":"input_required","requestState":"s1","inputRequests":{"r":{"method":"roots/list"}}}`
	var calls []face.CallParams
	answers := []string{}
	f, _ := testFace(t, func(in face.Internal, w http.ResponseWriter) {
		calls = append(calls, in.Params.(face.CallParams))
		w.Header().Set("Content-Type", "application/json")
		if len(answers) == 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"busy"}}`))
			return
		}
		_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":` + answers[0] + `}`))
		answers = answers[1:]
	})
	r := httptest.NewRequest(http.MethodPut, "/api/tools/t/calls/i", nil)
	rec := seal.RESTCall{Principal: [16]byte{7}, Tool: "t", Status: statusRunning}
	call := face.ToolCall{Name: "t", Args: json.RawMessage(`{"a":1}`)}

	answers = []string{rootsRound, `{"content":[{"type":"text","text":"ok"}]}`}
	got := f.rounds(context.Background(), r, rec, call, &running{})
	if got.Status != statusSuccess || len(calls) != 2 || string(calls[1].InputResponses["r"]) != `{"roots":[]}` ||
		calls[1].RequestState != "s1" || string(calls[1].Arguments) != `{"a":1}` || got.Inputs != nil {
		t.Fatalf("roots round: %+v %+v", got, calls)
	}

	calls = nil
	answers = []string{`{"resultType":"input_required","requestState":"s2","inputRequests":{
		"r":{"method":"roots/list"},"e":{"method":"elicitation/create","params":{"message":"m"}}}}`}
	got = f.rounds(context.Background(), r, rec, call, &running{})
	if got.Status != statusAwaitElicitation || got.RequestState != "s2" || len(got.Inputs) != 2 ||
		got.Inputs[0].Key != "e" || string(got.Inputs[1].Answer) != `{"roots":[]}` {
		t.Fatalf("the client's round: %+v", got)
	}

	calls, answers = nil, nil
	got = f.rounds(context.Background(), r, rec, call, &running{})
	if got.Status != statusFailed || gjson.GetBytes(got.Error, "data.httpStatus").Int() != http.StatusServiceUnavailable {
		t.Fatalf("error: %+v %s", got, got.Error)
	}

	answers = []string{rootsRound, rootsRound, rootsRound, rootsRound}
	got = f.rounds(context.Background(), r, rec, call, &running{})
	if got.Status != statusFailed || !strings.Contains(string(got.Error), "max_rounds") {
		t.Fatalf("too many rounds: %+v %s", got, got.Error)
	}

	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errCanceled)
	answers = []string{`{"content":[]}`}
	if got = f.rounds(ctx, r, rec, call, &running{}); got.Status != statusCanceled {
		t.Fatalf("cancelled: %+v", got)
	}
}

// TestCacheControl: a result's ttlMs and cacheScope become Cache-Control;
// without ttlMs, no-cache; private unless public.
func TestCacheControl(t *testing.T) {
	for res, want := range map[string]string{
		`{}`:                                     "private, no-cache",
		`{"ttlMs":60000,"cacheScope":"public"}`:  "public, max-age=60",
		`{"ttlMs":1500,"cacheScope":"private"}`:  "private, max-age=1",
		`{"ttlMs":-5}`:                           "private, max-age=0",
		`{"ttlMs":"soon","cacheScope":"public"}`: "private, no-cache",
	} {
		if got := cacheOf(gjson.Parse(res)).header(); got != want {
			t.Errorf("%s: %q, want %q", res, got, want)
		}
	}
}

// TestRecordMoved: after a rotation of state_key (a new first key), a
// call's record is still found under the name the old key gave its
// principal: read where it is without the lock (peek), moved under the
// new name by a reader that holds it (load), the old one deleted.
func TestRecordMoved(t *testing.T) {
	f, store := testFace(t, nil)
	ctx := context.Background()
	now := time.Now()
	princ := [16]byte{7}
	oldKey := f.callKey(princ, "ask", "c1")
	if err := f.save(ctx, oldKey, seal.RESTCall{Principal: princ, Tool: "ask", ID: "c1", Status: statusSuccess, Updated: now.UnixMilli()}); err != nil {
		t.Fatal(err)
	}
	rotated, err := seal.NewKeyring(bytes.Repeat([]byte{1}, seal.KeySize), make([]byte, seal.KeySize))
	if err != nil {
		t.Fatal(err)
	}
	f.gw = testGateway{kr: rotated, shared: true}
	key := f.callKey(princ, "ask", "c1")
	if key == oldKey {
		t.Fatal("a new key names the principal alike")
	}
	if c, err := f.peek(ctx, key, princ, now); err != nil || c.ID != "c1" || store.Exists(ctx, key) {
		t.Fatalf("peek: %+v %v (moved: %v)", c, err, store.Exists(ctx, key))
	}
	if c, err := f.load(ctx, key, princ, now); err != nil || c.ID != "c1" || !store.Exists(ctx, key) || store.Exists(ctx, oldKey) {
		t.Fatalf("load: %+v %v (at the new key: %v, at the old: %v)", c, err, store.Exists(ctx, key), store.Exists(ctx, oldKey))
	}
	if c, err := f.peek(ctx, key, princ, now); err != nil || c.ID != "c1" {
		t.Fatalf("the moved record: %+v %v", c, err)
	}
}
