package caddymodule

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/certmagic"
	"github.com/tidwall/gjson"
	"go.uber.org/zap"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/seal"
)

// TestParseRESTPath: the routes of the face, names and ids checked
// segment by segment (escaped slashes, dot segments, the charset, the
// length), unknown paths apart.
func TestParseRESTPath(t *testing.T) {
	for path, want := range map[string]restRoute{
		"/tools":                            {kind: "tools"},
		"/resources-templates":              {kind: "resources-templates"},
		"/openapi.json":                     {kind: "openapi"},
		"/resources/My%20File":              {kind: "resource", name: "My File"},
		"/prompts/greet":                    {kind: "prompt", name: "greet"},
		"/tools/ask/calls":                  {kind: "calls", tool: "ask"},
		"/tools/a.b-c_d/calls/ID-9.x":       {kind: "call", tool: "a.b-c_d", id: "ID-9.x"},
		"/tools/ask/calls/x/advance":        {kind: "advance", tool: "ask", id: "x"},
		"/tools/ask/calls/x/cancel":         {kind: "cancel", tool: "ask", id: "x"},
		"/tools/ask/calls/" + longName(128): {kind: "call", tool: "ask", id: restName(longName(128))},
	} {
		got, err := parseRESTPath(path)
		if err != nil || got != want {
			t.Errorf("%s: %+v, %v; want %+v", path, got, err, want)
		}
	}
	for _, path := range []string{"", "/", "/tool", "/tools/ask", "/tools/ask/calls/x/other", "/tools/ask/calls/x/advance/y", "/resources/a/b"} {
		if _, err := parseRESTPath(path); !errors.Is(err, errRESTNotFound) {
			t.Errorf("%s: %v, want not found", path, err)
		}
	}
	for _, path := range []string{
		"/tools/../calls/x", "/tools/ask/calls/..", "/tools/ask/calls/.", "/tools/.ask/calls/x", "/tools/a%2Fb/calls/x",
		"/tools/ask/calls/a%2F..%2F..%2Fb", "/tools/ask/calls/a%00", "/tools/ask/calls/%zz", "/tools/ask/calls/" + longName(129),
		"/tools/ask/calls/%C3%A9", "/tools/ask/calls/a b", "/tools//calls/x", "/resources/a%0Ab",
	} {
		if _, err := parseRESTPath(path); err == nil || errors.Is(err, errRESTNotFound) {
			t.Errorf("%s: %v, want a refusal", path, err)
		}
	}
}

func longName(n int) string { return strings.Repeat("x", n) }

// TestRESTSeen: a running call whose lease lapsed reads as failed, its
// instance lost, with another etag; one whose lease holds is running.
func TestRESTSeen(t *testing.T) {
	now := time.Now()
	c := seal.RESTCall{Status: restRunning, ETag: "e", Lease: now.Add(-time.Second).UnixMilli()}
	if got := restSeen(c, now); got.Status != restFailed || got.ETag == "e" || !strings.Contains(string(got.Error), "was lost") {
		t.Fatalf("lapsed: %+v", got)
	}
	c.Lease = now.Add(time.Second).UnixMilli()
	if got := restSeen(c, now); got.Status != restRunning || got.ETag != "e" {
		t.Fatalf("held: %+v", got)
	}
}

// TestRESTView: a round of several questions is shown one at a time, in
// key order, roots (answered by the gateway) never.
func TestRESTView(t *testing.T) {
	c := seal.RESTCall{Tool: "t", ID: "i", ETag: "e", Status: restAwaitSampling, Inputs: []seal.RESTInput{
		{Key: "a", Method: "roots/list", Answer: json.RawMessage(`{"roots":[]}`)},
		{Key: "b", Method: "elicitation/create", Answer: json.RawMessage(`{"action":"accept"}`)},
		{Key: "c", Method: "sampling/createMessage", Params: json.RawMessage(`{"maxTokens":5}`)},
		{Key: "d", Method: "elicitation/create", Params: json.RawMessage(`{"message":"m"}`)},
	}}
	v := restView(c)
	if v.InputKey != "c" || v.InputsPending != 2 || string(v.SamplingRequest) != `{"maxTokens":5}` || v.ElicitationRequest != nil {
		t.Fatalf("view: %+v", v)
	}
	c.Status = restSuccess
	if v := restView(c); v.InputKey != "" || v.SamplingRequest != nil {
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

// TestCaddyfileREST: the options reach the `rest` object; a base that is
// not a clean path is refused where it is written.
func TestCaddyfileREST(t *testing.T) {
	var h Handler
	in := "mcp_gateway {\n upstream http://127.0.0.1:9/mcp\n rest /api/v1\n rest_wait 2s\n rest_call_ttl 1h\n rest_max_calls_per_principal 7\n}"
	if err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser(in)); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(h)
	if got := gjson.GetBytes(b, "rest").Raw; got != `{"base_path":"/api/v1","wait":2000000000,"call_ttl":3600000000000,"max_calls_per_principal":7}` {
		t.Fatalf("rest: %s", got)
	}
	for _, base := range []string{"api", "/", "/api/", "/a/../b", "/a?x", "/{env.X}", "/a//b"} {
		var h Handler
		err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser("mcp_gateway {\n upstream http://127.0.0.1:9/mcp\n rest " + base + "\n}"))
		if err == nil || !strings.Contains(err.Error(), "rest: the base path") {
			t.Errorf("%q: %v", base, err)
		}
	}
}

// TestProvisionREST: `rest` needs state_key; with one, the face uses
// Caddy's storage and the defaults apply.
func TestProvisionREST(t *testing.T) {
	h := oneUpstream()
	h.REST.BasePath = "/api"
	if err := provisioned(t, h); err == nil || !strings.Contains(err.Error(), "rest needs state_key") {
		t.Fatalf("without state_key: %v", err)
	}
	h = oneUpstream()
	h.REST.BasePath = "/api"
	h.Fleet.StateKeys = []string{testStateKey}
	if err := provisioned(t, h); err != nil {
		t.Fatal(err)
	}
	if err := h.Validate(); err != nil {
		t.Fatal(err)
	}
	if h.rest == nil || h.rest.storage == nil || time.Duration(h.REST.Wait) != defaultRESTWait ||
		time.Duration(h.REST.CallTTL) != defaultRESTCallTTL || h.REST.MaxCallsPerPrincipal != defaultRESTMaxCalls {
		t.Fatalf("provisioned: %+v %+v", h.rest, h.REST)
	}
	for path, want := range map[string]bool{"/api": true, "/api/tools": true, "/apix": false, "/mcp": false} {
		r := httptest.NewRequest(http.MethodGet, path, nil)
		if got := h.isREST(r); got != want {
			t.Errorf("%s: isREST %v", path, got)
		}
	}
	r := httptest.NewRequest(http.MethodPost, "/api/tools", nil)
	r.Header.Set(seal.ForwardedHeader, "x")
	if h.isREST(r) {
		t.Error("a forwarded request was taken for the REST face")
	}
	off := oneUpstream()
	if err := provisioned(t, off); err != nil || off.rest != nil || off.isREST(httptest.NewRequest(http.MethodGet, "/api/tools", nil)) {
		t.Fatalf("rest off: %v %+v", err, off.rest)
	}
}

// TestRESTRunTable: the per-principal bound, a second run of one call
// refused, and a slot freed by end.
func TestRESTRunTable(t *testing.T) {
	tab := &restRunTable{runs: make(map[string]*restRun), counts: make(map[[16]byte]int)}
	a := &restRun{princ: [16]byte{1}, cancel: func(error) {}}
	b := &restRun{princ: [16]byte{1}, cancel: func(error) {}}
	if err := tab.start("k1", a, 1); err != nil {
		t.Fatal(err)
	}
	if err := tab.start("k2", b, 1); !errors.Is(err, errRESTBusy) {
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

// TestRESTSweep: the sweeper deletes the records past rest_call_ttl, and
// leaves the others, the roots and what does not open.
func TestRESTSweep(t *testing.T) {
	kr, err := seal.NewKeyring(make([]byte, seal.KeySize))
	if err != nil {
		t.Fatal(err)
	}
	store := &certmagic.FileStorage{Path: t.TempDir()}
	h := &Handler{keyring: kr, logger: zap.NewNop(), rest: &restFace{base: "/api", storage: store}}
	h.REST.CallTTL = caddy.Duration(time.Hour)
	ctx := context.Background()
	now := time.Now()
	princ := [16]byte{7}
	put := func(tool, id restName, updated time.Time) string {
		key := restCallKey(princ, tool, id)
		if err := h.restSave(ctx, key, seal.RESTCall{Principal: princ, Tool: string(tool), ID: string(id), Status: restSuccess,
			Updated: updated.UnixMilli()}); err != nil {
			t.Fatal(err)
		}
		return key
	}
	old := put("ask", "old", now.Add(-2*time.Hour))
	fresh := put("ask", "fresh", now.Add(-time.Minute))
	other := put("hello", "old", now.Add(-3*time.Hour))
	_ = store.Store(ctx, restRootsKey(princ), []byte("roots"))
	_ = store.Store(ctx, restCallKey(princ, "ask", "foreign"), []byte("not sealed"))
	n, err := h.restSweepOnce(ctx, now)
	if err != nil || n != 2 {
		t.Fatalf("swept %d, %v; want 2", n, err)
	}
	for key, want := range map[string]bool{old: false, other: false, fresh: true, restRootsKey(princ): true,
		restCallKey(princ, "ask", "foreign"): true} {
		if got := store.Exists(ctx, key); got != want {
			t.Errorf("%s: exists %v, want %v", key, got, want)
		}
	}
	if _, err := h.restLoad(ctx, fresh, [16]byte{8}, now); !errors.Is(err, errRESTNoRecord) {
		t.Errorf("another principal's record opened: %v", err)
	}
}

// TestProgressRecorder: progress notifications are found in an SSE answer
// as it is written, in pieces, with LF or CRLF lines; the response is
// found at the end; a JSON answer is not scanned.
func TestProgressRecorder(t *testing.T) {
	var got []string
	rec := &progressRecorder{sagaRecorder: sagaRecorder{header: make(http.Header)}, onProgress: func(p []byte) { got = append(got, string(p)) }}
	rec.header.Set("Content-Type", "text/event-stream")
	stream := "id: 1\ndata: \n\n" +
		"data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progress\":1}}\n\n" +
		"data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"info\"}}\r\n\r\n" +
		"data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\r\ndata: \"params\":{\"progress\":2}}\r\n\r\n" +
		"data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"content\":[]}}\n\n"
	for i := 0; i < len(stream); i += 7 {
		if _, err := rec.Write([]byte(stream[i:min(i+7, len(stream))])); err != nil {
			t.Fatal(err)
		}
	}
	if len(got) != 2 || got[0] != `{"progress":1}` || got[1] != `{"progress":2}` {
		t.Fatalf("progress: %q", got)
	}
	if m, ok := rec.response(); !ok || !m.Get("result").Exists() {
		t.Fatalf("response: %v %s", ok, m.Raw)
	}
	got = nil
	plain := &progressRecorder{sagaRecorder: sagaRecorder{header: make(http.Header)}, onProgress: func(p []byte) { got = append(got, string(p)) }}
	plain.header.Set("Content-Type", "application/json")
	_, _ = plain.Write([]byte(`{"jsonrpc":"2.0","method":"notifications/progress","params":{}}` + "\n\n"))
	if got != nil {
		t.Fatalf("a JSON answer was scanned: %q", got)
	}
}

// TestRESTCacheControl: a result's ttlMs and cacheScope become
// Cache-Control; without ttlMs, no-cache; private unless public.
func TestRESTCacheControl(t *testing.T) {
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
