package auth

import (
	"errors"
	"fmt"
	"testing"
)

var testRules = ScopeRules{
	{Kind: Tools, Pattern: "deploy_*", Scope: "ops:deploy"},
	{Kind: Tools, Pattern: "*_admin", Scope: "admin"},
	{Kind: Prompts, Pattern: "secret*", Scope: "ops:read"},
	{Kind: Resources, Pattern: "secret://*", Scope: "ops:read"},
}

func TestScopeRulesAllows(t *testing.T) {
	for _, c := range []struct {
		kind    Kind
		name    string
		granted []string
		want    bool
	}{
		{Tools, "echo", nil, true},
		{Tools, "deploy_web", nil, false},
		{Tools, "deploy_web", []string{"mcp", "ops:deploy"}, true},
		{Tools, "deploy_admin", []string{"ops:deploy"}, false}, // both rules match: both scopes
		{Tools, "deploy_admin", []string{"ops:deploy", "admin"}, true},
		{Tools, "secret_x", nil, true}, // a prompt rule, not a tool's
		{Prompts, "secret_x", nil, false},
		{Prompts, "deploy_web", nil, true},
		{Tools, "Deploy_web", nil, true},              // names are case-sensitive
		{Resources, "secret://a/b/c", nil, false},     // '*' spans '/'
		{Resources, "secret://{id}/data", nil, false}, // a template's text
		{Resources, "secret://a", []string{"ops:read"}, true},
		{Resources, "public://secret://", nil, true},
		{Prompts, "secret://a", nil, true}, // the prompt rule's glob: path.Match's '*' stops at '/'
		{Tools, "secret://a", nil, true},
	} {
		if got := testRules.Allows(c.kind, c.name, c.granted); got != c.want {
			t.Errorf("Allows(%d, %q, %v) = %v, want %v", c.kind, c.name, c.granted, got, c.want)
		}
	}
}

func TestScopeRulesCheck(t *testing.T) {
	if err := testRules.Check(); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []ScopeRule{
		{Pattern: "[", Scope: "s"},
		{Pattern: "", Scope: "s"},
		{Pattern: "x", Scope: ""},
		{Pattern: "x", Scope: "a b"},
		{Pattern: "x", Scope: `a"`},
		{Kind: Resources, Pattern: "users://{id}", Scope: "s"},
		{Kind: Resources, Pattern: "a[", Scope: "s"},
	} {
		if err := (ScopeRules{bad}).Check(); err == nil {
			t.Errorf("%+v: no error", bad)
		}
	}
}

// TestScopeRulesRefused: the name is read from the body, every copy of a
// repeated member counted; a batch is refused for any of its messages.
func TestScopeRulesRefused(t *testing.T) {
	for _, c := range []struct {
		name, body string
		refused    string // "" when allowed
	}{
		{"allowed", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}`, ""},
		{"forbidden", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"deploy_web"}}`, "deploy_web"},
		{"escaped", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"dep\u006coy_web"}}`, "deploy_web"},
		{"repeated name, forbidden last", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","name":"deploy_web"}}`, "deploy_web"},
		{"repeated params", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"},"params":{"name":"deploy_web"}}`, "deploy_web"},
		{"escaped method", `{"jsonrpc":"2.0","id":1,"method":"tools\/c\u0061ll","params":{"name":"deploy_web"}}`, "deploy_web"},
		{"repeated method", `{"jsonrpc":"2.0","id":1,"method":"tools/list","method":"tools/call","params":{"name":"deploy_web"}}`, "deploy_web"},
		{"a list names nothing", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"name":"deploy_web"}}`, ""},
		{"prompt", `{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"secret_plan"}}`, "secret_plan"},
		{"completion", `{"jsonrpc":"2.0","id":1,"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"secret_plan"}}}`, "secret_plan"},
		{"batch", `[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}},{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"x_admin"}}]`, "x_admin"},
		{"not a string", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":7}}`, ""},
		{"read", `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"secret://k/1"}}`, "secret://k/1"},
		{"read allowed", `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"public://k"}}`, ""},
		{"read, repeated uri", `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"public://k","uri":"secret://k"}}`, "secret://k"},
		{"subscribe", `{"jsonrpc":"2.0","id":1,"method":"resources/subscribe","params":{"uri":"secret://k"}}`, "secret://k"},
		{"unsubscribe", `{"jsonrpc":"2.0","id":1,"method":"resources/unsubscribe","params":{"uri":"secret://k"}}`, "secret://k"},
		{"completion of a template", `{"jsonrpc":"2.0","id":1,"method":"completion/complete","params":{"ref":{"type":"ref/resource","uri":"secret://{id}"}}}`, "secret://{id}"},
		{"listen", `{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"notifications":{"resourceSubscriptions":["public://a","secret://b"]}}}`, "secret://b"},
		{"listen allowed", `{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"notifications":{"resourceSubscriptions":["public://a"],"toolsListChanged":true}}}`, ""},
		{"a uri elsewhere", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","uri":"secret://k"}}`, ""},
	} {
		_, name, refused := testRules.Refused([]byte(c.body), []string{"mcp"})
		if refused != (c.refused != "") || name != c.refused {
			t.Errorf("%s: Refused = %q %v, want %q", c.name, name, refused, c.refused)
		}
	}
	if _, _, refused := testRules.Refused([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"deploy_web"}}`), []string{"ops:deploy"}); refused {
		t.Error("refused with the scope granted")
	}
}

func TestScopeRulesListKinds(t *testing.T) {
	if k := testRules.ListKinds([]byte(`{"method":"tools/list"}`)); len(k) != 1 || k[0] != Tools {
		t.Errorf("tools/list: %v", k)
	}
	if k := testRules.ListKinds([]byte(`[{"method":"prompts/list"},{"method":"tools/list"}]`)); len(k) != 2 {
		t.Errorf("batch: %v", k)
	}
	if k := (ScopeRules{{Kind: Tools, Pattern: "*", Scope: "s"}}).ListKinds([]byte(`{"method":"prompts/list"}`)); len(k) != 0 {
		t.Errorf("prompts/list without a prompt rule: %v", k)
	}
	if k := testRules.ListKinds([]byte(`[{"method":"resources/list"},{"method":"resources/templates/list"}]`)); len(k) != 1 || k[0] != Resources {
		t.Errorf("resource lists: %v", k)
	}
	if k := testRules.ListKinds([]byte(`{"method":"tools/call"}`)); len(k) != 0 {
		t.Errorf("tools/call: %v", k)
	}
}

func TestScopeRulesFilterList(t *testing.T) {
	for _, c := range []struct {
		name, msg, want string
		kinds           []Kind
	}{
		{"modern", `{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"echo"},{"name":"deploy_web","description":"d"},{"name":"x_admin"}],"resultType":"complete","ttlMs":60000,"cacheScope":"public"}}`,
			`{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"echo"}],"resultType":"complete","ttlMs":60000,"cacheScope":"private"}}`, []Kind{Tools}},
		{"legacy: no cacheScope added", `{"jsonrpc":"2.0","id":"a","result":{"tools":[{"name":"deploy_web"},{"name":"echo"}],"nextCursor":"c"}}`,
			`{"jsonrpc":"2.0","id":"a","result":{"tools":[{"name":"echo"}],"nextCursor":"c"}}`, []Kind{Tools}},
		{"entries without one string name", `{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"echo","name":"deploy_web"},{"name":1},7,{"name":"ok"}]}}`,
			`{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"ok"}]}}`, []Kind{Tools}},
		{"prompts", `{"jsonrpc":"2.0","id":1,"result":{"prompts":[{"name":"secret_plan"},{"name":"hello"}]}}`,
			`{"jsonrpc":"2.0","id":1,"result":{"prompts":[{"name":"hello"}]}}`, []Kind{Prompts}},
		{"a kind not asked", `{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"deploy_web"}]}}`,
			`{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"deploy_web"}]}}`, []Kind{Prompts}},
		{"an error", `{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"m"}}`, `{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"m"}}`, []Kind{Tools}},
		{"resources: by uri", `{"jsonrpc":"2.0","id":1,"result":{"resources":[{"uri":"secret://a/b","name":"ok"},{"uri":"public://a","name":"secret_x"},{"uri":"public://b","uri":"secret://b"},{"name":"no uri"}],"cacheScope":"public"}}`,
			`{"jsonrpc":"2.0","id":1,"result":{"resources":[{"uri":"public://a","name":"secret_x"}],"cacheScope":"private"}}`, []Kind{Resources}},
		{"templates: by their text", `{"jsonrpc":"2.0","id":1,"result":{"resourceTemplates":[{"uriTemplate":"secret://{id}","name":"t"},{"uriTemplate":"public://{id}","name":"u"}]}}`,
			`{"jsonrpc":"2.0","id":1,"result":{"resourceTemplates":[{"uriTemplate":"public://{id}","name":"u"}]}}`, []Kind{Resources}},
		{"resources not asked", `{"jsonrpc":"2.0","id":1,"result":{"resources":[{"uri":"secret://a"}]}}`,
			`{"jsonrpc":"2.0","id":1,"result":{"resources":[{"uri":"secret://a"}]}}`, []Kind{Tools}},
	} {
		got, err := testRules.FilterList([]byte(c.msg), c.kinds, []string{"mcp"})
		if err != nil || string(got) != c.want {
			t.Errorf("%s:\n got %s %v\nwant %s", c.name, got, err, c.want)
		}
	}
	for _, msg := range []string{
		`{"jsonrpc":"2.0","id":1,"result":{"tools":[]},"result":{"tools":[{"name":"deploy_web"}]}}`,
		`{"jsonrpc":"2.0","id":1,"result":{"tools":[],"tools":[{"name":"deploy_web"}]}}`,
	} {
		if _, err := testRules.FilterList([]byte(msg), []Kind{Tools}, nil); !errors.Is(err, ErrUnfilterable) {
			t.Errorf("%s: %v, want ErrUnfilterable", msg, err)
		}
	}
}

// benchRules are three rules, as a deployment might have.
var benchRules = ScopeRules{
	{Kind: Tools, Pattern: "deploy_*", Scope: "ops:deploy"},
	{Kind: Tools, Pattern: "*_admin", Scope: "admin"},
	{Kind: Tools, Pattern: "billing__*", Scope: "finance"},
}

// BenchmarkScopeRulesRefused: the check every POST pays once rules exist
// (a tools/call of an allowed tool, the common case).
func BenchmarkScopeRulesRefused(b *testing.B) {
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hello"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, refused := benchRules.Refused(body, []string{"mcp"}); refused {
			b.Fatal("refused")
		}
	}
}

// BenchmarkScopeRulesFilterList: a tools/list answer of 100 tools with
// schemas, 10 of them hidden.
func BenchmarkScopeRulesFilterList(b *testing.B) {
	msg := []byte(`{"jsonrpc":"2.0","id":1,"result":{"tools":[`)
	for i := range 100 {
		if i > 0 {
			msg = append(msg, ',')
		}
		name := fmt.Sprintf("tool_%d", i)
		if i%10 == 0 {
			name = fmt.Sprintf("deploy_%d", i)
		}
		msg = append(msg, fmt.Sprintf(`{"name":%q,"description":"Does thing %d.","inputSchema":{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"integer"}},"required":["a"]}}`, name, i)...)
	}
	msg = append(msg, `],"resultType":"complete","ttlMs":60000,"cacheScope":"public"}}`...)
	b.SetBytes(int64(len(msg)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := benchRules.FilterList(msg, []Kind{Tools}, []string{"mcp"}); err != nil {
			b.Fatal(err)
		}
	}
}

func TestScopeRulesHidesUpdate(t *testing.T) {
	for _, c := range []struct {
		msg  string
		want bool
	}{
		{`{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"secret://k"}}`, true},
		{`{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"public://k"}}`, false},
		{`{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"public://k","uri":"secret://k"}}`, true},
		{`{"jsonrpc":"2.0","method":"notifications/message","params":{"uri":"secret://k"}}`, false},
		{`{"jsonrpc":"2.0","id":1,"result":{"uri":"secret://k"}}`, false},
	} {
		if got := testRules.HidesUpdate([]byte(c.msg), []string{"mcp"}); got != c.want {
			t.Errorf("%s: %v, want %v", c.msg, got, c.want)
		}
	}
	if testRules.HidesUpdate([]byte(`{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"secret://k"}}`), []string{"ops:read"}) {
		t.Error("hidden with the scope granted")
	}
}
