package reverse

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/internal/testkit"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/seal"
)

func TestNegotiateLegacyVersion(t *testing.T) {
	for in, want := range map[string]string{
		"2025-11-25": "2025-11-25", "2025-06-18": "2025-06-18", "2025-03-26": "2025-03-26",
		"2024-11-05": "2025-11-25", "": "2025-11-25", "2026-07-28": "2025-11-25",
	} {
		if got := NegotiateLegacyVersion(in); got != want {
			t.Errorf("NegotiateLegacyVersion(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestModernClientCapabilities(t *testing.T) {
	cases := map[string]string{
		`{"roots":{"listChanged":true},"sampling":{"tools":{}},"elicitation":{"form":{},"url":{}},"tasks":{"list":{}},"experimental":{"x":{}}}`: `{"elicitation":{"form":{},"url":{}},"experimental":{"x":{}},"roots":{},"sampling":{"tools":{}}}`,
		`{}`:                 `{}`,
		`nope`:               `{}`,
		`{"sampling":true}`:  `{}`,
		`{"elicitation":{}}`: `{"elicitation":{}}`,
	}
	for in, want := range cases {
		if got := string(ModernClientCapabilities([]byte(in))); got != want {
			t.Errorf("ModernClientCapabilities(%s) = %s, want %s", in, got, want)
		}
	}
}

func TestBuildInitializeResult(t *testing.T) {
	disc := `{"resultType":"complete","supportedVersions":["2026-07-28"],` +
		`"capabilities":{"tools":{"listChanged":true},"resources":{"subscribe":true,"listChanged":true},"logging":{},"extensions":{"x":{}}},` +
		`"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"s","version":"2"}},"instructions":"be nice","ttlMs":5,"cacheScope":"public"}`
	got, err := BuildInitializeResult("2025-06-18", []byte(disc), false)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"protocolVersion":"2025-06-18","capabilities":{"tools":{},"resources":{},"logging":{}},"serverInfo":{"name":"s","version":"2"},"instructions":"be nice"}`
	if string(got) != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	got, _ = BuildInitializeResult("2025-11-25", []byte(disc), true)
	if !strings.Contains(string(got), `"resources":{"subscribe":true,"listChanged":true}`) || strings.Contains(string(got), "extensions") {
		t.Fatalf("with notifications: %s", got)
	}
	got, _ = BuildInitializeResult("2025-11-25", []byte(`{"capabilities":{}}`), false)
	if !strings.Contains(string(got), `"serverInfo":{"name":"mcp-server","version":"unknown"}`) {
		t.Fatalf("without serverInfo: %s", got)
	}
	if _, err := BuildInitializeResult("2025-11-25", []byte(`{"capabilities":1}`), false); err == nil {
		t.Fatal("non-object capabilities accepted")
	}
}

func TestLegacyResult(t *testing.T) {
	cases := []struct{ method, in, want string }{
		{"tools/call", `{"resultType":"complete","content":[],"structuredContent":[1,2]}`, `{"content":[],"structuredContent":{"result":[1,2]}}`},
		{"tools/call", `{"content":[], "structuredContent": {"a":1}}`, `{"content":[],"structuredContent":{"a":1}}`},
		{"tools/list", `{"resultType":"complete","tools":[{"name":"a","outputSchema":{"type":"array"}},{"name":"b","outputSchema":{"type":"object","properties":{}}},{"name":"c"}],"ttlMs":0}`,
			`{"tools":[{"name":"a","outputSchema":{"type":"object","properties":{"result":{"type":"array"}},"required":["result"]}},{"name":"b","outputSchema":{"type":"object","properties":{}}},{"name":"c"}],"ttlMs":0}`},
		{"prompts/get", `{"resultType":"complete","messages":[],"_meta":{"k":1}}`, `{"messages":[],"_meta":{"k":1}}`},
	}
	for _, c := range cases {
		got, err := LegacyResult(c.method, []byte(c.in))
		if err != nil {
			t.Fatalf("%s %s: %v", c.method, c.in, err)
		}
		if string(got) != c.want {
			t.Errorf("%s %s\ngot  %s\nwant %s", c.method, c.in, got, c.want)
		}
	}
	if _, err := LegacyResult("tools/call", []byte(`{"a":1,"a":2}`)); err == nil {
		t.Error("repeated members accepted")
	}
}

func TestLegacyError(t *testing.T) {
	notFound := `{"code":-32602,"message":"Resource not found","data":{"uri":"test://x"}}`
	if got := string(LegacyError("resources/read", []byte(notFound))); got != `{"code":-32002,"message":"Resource not found","data":{"uri":"test://x"}}` {
		t.Errorf("resource not found: %s", got)
	}
	missing := `{"code":-32021,"message":"needs elicitation","data":{"requiredCapabilities":{"elicitation":{}}}}`
	for _, method := range []string{"tools/call", "prompts/get", "resources/read"} {
		if got := string(LegacyError(method, []byte(missing))); got != `{"code":-32600,"message":"needs elicitation","data":{"requiredCapabilities":{"elicitation":{}}}}` {
			t.Errorf("%s: missing capability: %s", method, got)
		}
	}
	for _, c := range []struct{ method, in string }{
		{"tools/call", notFound},
		{"tools/call", `{"code":-32020,"message":"x"}`},
		{"tools/call", `{"code":-32021.5,"message":"x"}`},
		{"resources/read", `{"code":-32602,"message":"bad"}`},
		{"resources/read", `{"code":-32603,"message":"x","data":{"uri":"u"}}`},
	} {
		if got := string(LegacyError(c.method, []byte(c.in))); got != c.in {
			t.Errorf("%s %s changed to %s", c.method, c.in, got)
		}
	}
}

func TestLegacyFailure(t *testing.T) {
	res, errObj := LegacyFailure("tools/call", `no "input"`)
	if errObj != nil || string(res) != `{"content":[{"type":"text","text":"no \"input\""}],"isError":true}` {
		t.Errorf("tools/call: %s %s", res, errObj)
	}
	res, errObj = LegacyFailure("prompts/get", "x")
	if res != nil || string(errObj) != `{"code":-32603,"message":"x"}` {
		t.Errorf("prompts/get: %s %s", res, errObj)
	}
}

func TestEncodeHeaderValue(t *testing.T) {
	for in, want := range map[string]string{
		"test_simple_text": "test_simple_text",
		"a b":              "a b",
		"":                 "",
		" lead":            "=?base64?IGxlYWQ=?=",
		"trail ":           "=?base64?dHJhaWwg?=",
		"日本":               "=?base64?5pel5pys?=",
		"tab\there":        "=?base64?dGFiCWhlcmU=?=",
		"=?base64?abc?=":   "=?base64?PT9iYXNlNjQ/YWJjPz0=?=",
	} {
		got := EncodeHeaderValue(in)
		if got != want {
			t.Errorf("EncodeHeaderValue(%q) = %q, want %q", in, got, want)
		}
		if back, err := translate.DecodeHeaderValue(got); err != nil || back != in {
			t.Errorf("DecodeHeaderValue(%q) = %q, %v; want %q", got, back, err, in)
		}
	}
}

func TestUpstreamRequest(t *testing.T) {
	s := &Session{ClientSession: seal.ClientSession{
		Capabilities: []byte(`{"elicitation":{},"roots":{"listChanged":true}}`),
		ClientInfo:   []byte(`{"name":"c","version":"1"}`),
	}}
	params := []byte(`{"name":"t","arguments":{"q":"<&>"},"_meta":{"progressToken":"p1"},"requestState":"forged","inputResponses":{"k":1}}`)
	state := `"st\u0061te<&>"` // the raw JSON string, escapes and all
	body, err := upstreamRequest("gw-1", "tools/call", params, s, "info", map[string]json.RawMessage{"k": json.RawMessage(`{"action":"accept"}`)}, state)
	if err != nil {
		t.Fatal(err)
	}
	b := gjson.ParseBytes(body)
	checks := map[string]string{
		"id":                    `"gw-1"`,
		"method":                `"tools/call"`,
		"params.arguments":      `{"q":"<&>"}`,
		"params.requestState":   state,
		"params.inputResponses": `{"k":{"action":"accept"}}`,
		translate.MetaPath("params", "progressToken"):                  `"p1"`,
		translate.MetaPath("params", translate.MetaProtocolVersion):    `"2026-07-28"`,
		translate.MetaPath("params", translate.MetaClientCapabilities): `{"elicitation":{},"extensions":{"io.modelcontextprotocol/tasks":{}},"roots":{}}`,
		translate.MetaPath("params", translate.MetaClientInfo):         `{"name":"c","version":"1"}`,
		translate.MetaPath("params", translate.MetaLogLevel):           `"info"`,
	}
	for path, want := range checks {
		if got := b.Get(path).Raw; got != want {
			t.Errorf("%s = %s, want %s (body %s)", path, got, want, body)
		}
	}
	// Without state, answers or a level, none of them is sent.
	body, _ = upstreamRequest("gw-2", "tools/call", params, s, "", nil, "")
	for _, path := range []string{"params.requestState", "params.inputResponses", translate.MetaPath("params", translate.MetaLogLevel)} {
		if gjson.GetBytes(body, path).Exists() {
			t.Errorf("%s sent: %s", path, body)
		}
	}
	if _, err := upstreamRequest("gw-3", "tools/call", []byte(`[1]`), s, "", nil, ""); err == nil {
		t.Error("array params accepted")
	}
}

func TestInlineOwner(t *testing.T) {
	for id, want := range map[string][2]string{
		"gw:abc:1":                {"abc", ""},
		"gw:0123456789abcdef:42":  {"0123456789abcdef", ""},
		"gw:gw-1:7:SEALED_tag-01": {"gw-1", "SEALED_tag-01"},
	} {
		if inst, tag, ok := inlineOwner(id); !ok || inst != want[0] || tag != want[1] {
			t.Errorf("inlineOwner(%q) = %q, %q, %t", id, inst, tag, ok)
		}
	}
	for _, id := range []string{"gw::1", "gw:abc:", "gw:abc:x", "abc:1", "", "gw:abc", "gw:abc:1:", "gw:abc:x:tag"} {
		if _, _, ok := inlineOwner(id); ok {
			t.Errorf("inlineOwner(%q) accepted", id)
		}
	}
}

// TestAnswerOwner: an answer to another instance's in-line request names
// that instance, with the address only its sealed tag can give.
func TestAnswerOwner(t *testing.T) {
	// tamper changes a character in the middle of a base64 tag: always
	// other bytes (the last characters may carry bits a decoder ignores,
	// and may already be what they would be changed to).
	tamper := func(tag string) string {
		i := len(tag) / 2
		c := byte('A')
		if tag[i] == 'A' {
			c = 'B'
		}
		return tag[:i] + string(c) + tag[i+1:]
	}
	kr := testkit.Keyring(t)
	a := New(http.DefaultClient, reverseOptions(func(o *Options) { o.Keyring, o.Instance, o.Address = kr, "gw-a", "http://10.0.0.1:8080" }))
	b := New(http.DefaultClient, reverseOptions(func(o *Options) { o.Keyring, o.Instance = kr, "gw-b" }))
	idA := a.inlineID(a.defaults)
	if !strings.HasPrefix(idA, "gw:gw-a:") || strings.Count(idA, ":") != 3 {
		t.Fatalf("an advertising instance minted %q, want gw:gw-a:<n>:<tag>", idA)
	}
	idB := b.inlineID(b.defaults)
	if strings.Count(idB, ":") != 2 {
		t.Fatalf("an instance without address minted %q, want gw:gw-b:<n>", idB)
	}
	answer := func(id string) []byte { return []byte(`{"jsonrpc":"2.0","id":"` + id + `","result":{}}`) }
	if o, ok := b.AnswerOwner(&Session{}, answer(idA)); !ok || o != (translate.Owner{Instance: "gw-a", Address: "http://10.0.0.1:8080"}) {
		t.Errorf("b.AnswerOwner(&Session{}, a's id) = %+v, %t", o, ok)
	}
	if o, ok := a.AnswerOwner(&Session{}, answer(idB)); !ok || o != (translate.Owner{Instance: "gw-b"}) {
		t.Errorf("a.AnswerOwner(&Session{}, b's id) = %+v, %t", o, ok)
	}
	if _, ok := a.AnswerOwner(&Session{}, answer(idA)); ok {
		t.Error("an instance's own id is elsewhere")
	}
	tag := idA[strings.LastIndex(idA, ":")+1:]
	other := New(http.DefaultClient, reverseOptions(func(o *Options) {
		o.Keyring, o.Instance, o.Address = testkit.Keyring(t, bytes.Repeat([]byte{9}, seal.KeySize)), "gw-a", "http://evil:1"
	}))
	otherID := other.inlineID(other.defaults)
	for name, id := range map[string]string{
		"tag moved to another instance": "gw:gw-c:1:" + tag,
		"tag tampered":                  "gw:gw-a:1:" + tamper(tag),
		"tag under another key":         otherID,
		"tag not sealed":                "gw:gw-a:1:aHR0cDovL2V2aWw",
	} {
		o, ok := b.AnswerOwner(&Session{}, answer(id))
		if !ok || o.Address != "" {
			t.Errorf("%s: %+v, %t; want the instance without an address", name, o, ok)
		}
	}
	for _, body := range []string{`{"jsonrpc":"2.0","id":7,"result":{}}`, `{"jsonrpc":"2.0","id":"client-1","result":{}}`} {
		if _, ok := b.AnswerOwner(&Session{}, []byte(body)); ok {
			t.Errorf("%s is elsewhere", body)
		}
	}
}

func TestExpiringTable(t *testing.T) {
	tab := newExpiringTable[int, string](3)
	now := time.Unix(1000, 0)
	for i := range 5 {
		tab.put(i, "v", now.Add(time.Hour), now)
	}
	if n := tab.len(); n != 3 {
		t.Fatalf("len %d, want the bound 3", n)
	}
	if _, ok := tab.get(0, now); ok {
		t.Error("the oldest entry survived eviction")
	}
	if v, ok := tab.get(4, now); !ok || v != "v" {
		t.Error("the newest entry is gone")
	}
	tab.put(9, "short", now.Add(time.Second), now)
	if _, ok := tab.get(9, now.Add(2*time.Second)); ok {
		t.Error("an expired entry was returned")
	}
}

func TestStripSubscriptionID(t *testing.T) {
	for in, want := range map[string]string{
		`{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":2},"uri":"test://w"}}`: `{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"test://w"}}`,
		`{"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":"s","k":1}}}`:         `{"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{"_meta":{"k":1}}}`,
		`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`:                                                                                 `{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`,
		`{"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{}}`:                                                                     `{"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{}}`,
	} {
		if got := string(stripSubscriptionID([]byte(in))); got != want {
			t.Errorf("stripSubscriptionID(%s)\n= %s\nwant %s", in, got, want)
		}
	}
}

func TestReverseListenFilter(t *testing.T) {
	caps := gjson.Parse(`{"tools":{"listChanged":true},"prompts":{},"resources":{"subscribe":true}}`)
	if f, ok := reverseListenFilter(caps, []string{"a://1"}); !ok || string(f) != `{"resourceSubscriptions":["a://1"],"toolsListChanged":true}` {
		t.Errorf("filter %s %t", f, ok)
	}
	if f, ok := reverseListenFilter(caps, nil); !ok || string(f) != `{"toolsListChanged":true}` {
		t.Errorf("filter without subscriptions %s %t", f, ok)
	}
	if _, ok := reverseListenFilter(gjson.Parse(`{"tools":{}}`), []string{"a://1"}); ok {
		t.Error("a filter for an upstream that offers no notifications")
	}
}

func TestParamHeaders(t *testing.T) {
	schema := gjson.Parse(`{"type":"object","properties":{
		"region":{"type":"string","x-mcp-header":"Region"},
		"count":{"type":"integer","x-mcp-header":"Count"},
		"dry":{"type":"boolean","x-mcp-header":"Dry-Run"},
		"bad":{"type":"string","x-mcp-header":"Bad Name"},
		"plain":{"type":"string"},
		"nested":{"type":"object","properties":{"zone":{"type":"string","x-mcp-header":"Zone"}}},
		"list":{"type":"array","items":{"type":"string","x-mcp-header":"Item"}}}}`)
	hs := schemaHeaders(schema, nil, nil)
	var names []string
	for _, h := range hs {
		names = append(names, h.name+"="+strings.Join(h.path, "/"))
	}
	if got := strings.Join(names, " "); got != "Region=region Count=count Dry-Run=dry Zone=nested/zone" {
		t.Fatalf("annotations %s", got)
	}
	hdr := http.Header{}
	setParamHeaders(hdr, hs, gjson.Parse(`{"region":"日本","count":42.0,"dry":false,"nested":{"zone":"a"},"plain":"x"}`))
	want := http.Header{"Mcp-Param-Region": {"=?base64?5pel5pys?="}, "Mcp-Param-Count": {"42"}, "Mcp-Param-Dry-Run": {"false"}, "Mcp-Param-Zone": {"a"}}
	if fmt.Sprint(hdr) != fmt.Sprint(want) {
		t.Fatalf("headers %v, want %v", hdr, want)
	}
	hdr = http.Header{}
	setParamHeaders(hdr, hs, gjson.Parse(`{"region":null,"count":1.5}`))
	if len(hdr) != 0 {
		t.Fatalf("null and non-integer values gave headers %v", hdr)
	}
}

// TestRequestMetaNames: requestMeta's tags are translate's _meta names, and
// a client's _meta keeps its own members, in its order, before the
// session's.
func TestRequestMetaNames(t *testing.T) {
	b, err := jsonrpc.Marshal(requestMeta{ClientCapabilities: json.RawMessage(`{}`), ClientInfo: json.RawMessage(`{}`), LogLevel: "info", ProtocolVersion: "v"})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{translate.MetaClientCapabilities, translate.MetaClientInfo, translate.MetaLogLevel, translate.MetaProtocolVersion} {
		if !gjson.GetBytes(b, gjson.Escape(name)).Exists() {
			t.Errorf("%s missing from %s", name, b)
		}
	}
	s := &Session{ClientSession: seal.ClientSession{Capabilities: []byte(`{}`)}}
	params := []byte(`{"_meta":{"z":1,"progressToken":2,"io.modelcontextprotocol/logLevel":"debug"},"name":"t","name2":{"b":1, "a":2}}`)
	body, err := upstreamRequest("gw-1", "prompts/get", params, s, "", nil, "")
	if err != nil {
		t.Fatal(err)
	}
	want := `{"jsonrpc":"2.0","id":"gw-1","method":"prompts/get","params":{"_meta":{"z":1,"progressToken":2,` +
		`"io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/protocolVersion":"2026-07-28"},"name":"t","name2":{"b":1,"a":2}}}`
	if string(body) != want {
		t.Errorf("upstreamRequest = %s\nwant %s", body, want)
	}
}
