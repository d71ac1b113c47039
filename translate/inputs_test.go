package translate

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
	"github.com/tidwall/gjson"
)

const (
	formParams = `{"message":"Your name?","requestedSchema":{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}}`
	urlParams  = `{"mode":"url","message":"Sign in","url":"https://example.com/login","elicitationId":"550e8400"}`
	sampParams = `{"messages":[{"role":"user","content":{"type":"text","text":"Capital of France?"}}],"maxTokens":100}`
)

// withHint returns elicitation params carrying the key hint value hint (raw
// JSON) and extra _meta members.
func withHint(hint, extraMeta string) []byte {
	meta := `"io.github.caddy-mcp-gateway/inputKey":` + hint
	if extraMeta != "" {
		meta += "," + extraMeta
	}
	return []byte(`{"message":"m","requestedSchema":{"type":"object","properties":{}},"_meta":{` + meta + `}}`)
}

func TestNewInputRequestKeys(t *testing.T) {
	type step struct {
		method  string
		params  []byte
		wantKey string
	}
	long := strings.Repeat("k", MaxInputKeyLen)
	tests := []struct {
		name  string
		steps []step
	}{
		{name: "derived keys per method", steps: []step{
			{MethodElicit, []byte(formParams), "elicitation-1"},
			{MethodSample, []byte(sampParams), "sampling-1"},
			{MethodElicit, []byte(formParams), "elicitation-2"},
			{MethodListRoots, nil, "roots-1"},
			{MethodListRoots, []byte(`{}`), "roots-2"},
		}},
		{name: "hint used", steps: []step{
			{MethodElicit, withHint(`"user_name"`, ""), "user_name"},
			{MethodElicit, withHint(`"`+long+`"`, ""), long},
		}},
		{name: "hint counts toward ordinal", steps: []step{
			{MethodElicit, withHint(`"user_name"`, ""), "user_name"},
			{MethodElicit, []byte(formParams), "elicitation-2"},
		}},
		{name: "duplicate hint derived", steps: []step{
			{MethodElicit, withHint(`"user_name"`, ""), "user_name"},
			{MethodElicit, withHint(`"user_name"`, ""), "elicitation-2"},
		}},
		{name: "hint takes a derived key", steps: []step{
			{MethodElicit, withHint(`"elicitation-2"`, ""), "elicitation-2"},
			{MethodElicit, []byte(formParams), "elicitation-3"},
			{MethodElicit, withHint(`"elicitation-4"`, ""), "elicitation-4"},
		}},
		{name: "derived key taken by hint is skipped", steps: []step{
			{MethodSample, []byte(`{"messages":[],"maxTokens":1,"_meta":{"io.github.caddy-mcp-gateway/inputKey":"elicitation-1"}}`), "elicitation-1"},
			{MethodElicit, []byte(formParams), "elicitation-2"},
		}},
		{name: "invalid hints ignored", steps: []step{
			{MethodElicit, withHint(`""`, ""), "elicitation-1"},
			{MethodElicit, withHint(`"has space"`, ""), "elicitation-2"},
			{MethodElicit, withHint(`"caf\u00e9"`, ""), "elicitation-3"},
			{MethodElicit, withHint(`"tab\t"`, ""), "elicitation-4"},
			{MethodElicit, withHint(`"`+long+`x"`, ""), "elicitation-5"},
			{MethodElicit, withHint(`42`, ""), "elicitation-6"},
			{MethodElicit, withHint(`null`, ""), "elicitation-7"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var kc KeyCounter
			seen := map[string]bool{}
			for i, s := range tt.steps {
				r, err := NewInputRequest(s.method, s.params, &kc)
				if err != nil {
					t.Fatalf("step %d: %v", i, err)
				}
				if r.Key != s.wantKey || r.Method != s.method {
					t.Errorf("step %d: key %q method %q, want %q %q", i, r.Key, r.Method, s.wantKey, s.method)
				}
				if seen[r.Key] || !kc.Used(r.Key) {
					t.Errorf("step %d: key %q repeated or not recorded", i, r.Key)
				}
				seen[r.Key] = true
				if strings.Contains(string(r.Params), InputKeyHint) {
					t.Errorf("step %d: hint left in params %s", i, r.Params)
				}
			}
		})
	}
}

func TestKeyCounterAcrossRounds(t *testing.T) {
	var kc KeyCounter // lives as long as the upstream call
	var got []string
	for round := 0; round < 3; round++ {
		for _, m := range []string{MethodElicit, MethodSample} {
			p := formParams
			if m == MethodSample {
				p = sampParams
			}
			r, err := NewInputRequest(m, []byte(p), &kc)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, r.Key)
		}
	}
	want := "elicitation-1 sampling-1 elicitation-2 sampling-2 elicitation-3 sampling-3"
	if strings.Join(got, " ") != want {
		t.Errorf("keys %v, want %s", got, want)
	}
	// A refused request uses up no ordinal.
	if _, err := NewInputRequest(MethodElicit, []byte(`{"message":1}`), &kc); err == nil {
		t.Fatal("invalid request accepted")
	}
	if r, _ := NewInputRequest(MethodElicit, []byte(formParams), &kc); r.Key != "elicitation-4" {
		t.Errorf("key after refusal = %q, want elicitation-4", r.Key)
	}
	// nil counter: a fresh one.
	if r, err := NewInputRequest(MethodListRoots, nil, nil); err != nil || r.Key != "roots-1" {
		t.Errorf("nil counter: %q %v", r.Key, err)
	}
}

func TestNewInputRequestParams(t *testing.T) {
	tests := []struct {
		name, method, in, want string
		wantErr                bool
	}{
		{name: "form verbatim", method: MethodElicit, in: " " + formParams + " ", want: formParams},
		{name: "form with mode verbatim", method: MethodElicit, in: `{"mode":"form","message":"m","requestedSchema":{"type":"object"}}`, want: `{"mode":"form","message":"m","requestedSchema":{"type":"object"}}`},
		{name: "url elicitationId stripped", method: MethodElicit, in: urlParams, want: `{"mode":"url","message":"Sign in","url":"https://example.com/login"}`},
		{name: "task stripped from elicitation", method: MethodElicit, in: `{"message":"m","task":{"ttl":60000},"requestedSchema":{ "type" : "object" }}`, want: `{"message":"m","requestedSchema":{ "type" : "object" }}`},
		{name: "task stripped from sampling", method: MethodSample, in: `{"messages":[],"task":{},"maxTokens":5,"elicitationId":"kept"}`, want: `{"messages":[],"maxTokens":5,"elicitationId":"kept"}`},
		{name: "hint removed, meta emptied", method: MethodElicit, in: string(withHint(`"k"`, "")), want: `{"message":"m","requestedSchema":{"type":"object","properties":{}}}`},
		{name: "hint removed, meta kept", method: MethodElicit, in: string(withHint(`"k"`, `"progressToken":7`)), want: `{"message":"m","requestedSchema":{"type":"object","properties":{}},"_meta":{"progressToken":7}}`},
		{name: "invalid hint removed too", method: MethodElicit, in: string(withHint(`{}`, `"a":1`)), want: `{"message":"m","requestedSchema":{"type":"object","properties":{}},"_meta":{"a":1}}`},
		{name: "empty meta without hint kept", method: MethodListRoots, in: `{"_meta":{}}`, want: `{"_meta":{}}`},
		{name: "roots hint", method: MethodListRoots, in: `{"_meta":{"io.github.caddy-mcp-gateway/inputKey":"r"}}`, want: `{}`},
		{name: "roots task kept", method: MethodListRoots, in: `{"task":1}`, want: `{"task":1}`},
		{name: "roots null params", method: MethodListRoots, in: `null`, want: `{}`},
		{name: "sampling tools kept", method: MethodSample, in: `{"messages":[],"maxTokens":5,"tools":[{"name":"t","inputSchema":{"type":"object"}}],"toolChoice":{"mode":"auto"}}`,
			want: `{"messages":[],"maxTokens":5,"tools":[{"name":"t","inputSchema":{"type":"object"}}],"toolChoice":{"mode":"auto"}}`},

		{name: "unknown method", method: "ping", in: `{}`, wantErr: true},
		{name: "elicitation without params", method: MethodElicit, in: ``, wantErr: true},
		{name: "sampling null params", method: MethodSample, in: `null`, wantErr: true},
		{name: "params array", method: MethodListRoots, in: `[]`, wantErr: true},
		{name: "params invalid json", method: MethodElicit, in: `{"message":`, wantErr: true},
		{name: "duplicate member", method: MethodElicit, in: `{"message":"a","message":"b","requestedSchema":{}}`, wantErr: true},
		{name: "form without schema", method: MethodElicit, in: `{"message":"m"}`, wantErr: true},
		{name: "without message", method: MethodElicit, in: `{"requestedSchema":{}}`, wantErr: true},
		{name: "url without url", method: MethodElicit, in: `{"mode":"url","message":"m"}`, wantErr: true},
		{name: "unknown mode", method: MethodElicit, in: `{"mode":"voice","message":"m","requestedSchema":{}}`, wantErr: true},
		{name: "sampling without maxTokens", method: MethodSample, in: `{"messages":[]}`, wantErr: true},
		{name: "sampling messages object", method: MethodSample, in: `{"messages":{},"maxTokens":1}`, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := NewInputRequest(tt.method, []byte(tt.in), new(KeyCounter))
			if tt.wantErr {
				if !errors.Is(err, ErrInputRequest) {
					t.Fatalf("err = %v, want ErrInputRequest", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(r.Params) != tt.want {
				t.Errorf("params %s\nwant   %s", r.Params, tt.want)
			}
			if r.Params != nil && !json.Valid(r.Params) {
				t.Errorf("params not valid JSON: %s", r.Params)
			}
		})
	}
}

func TestCapabilities(t *testing.T) {
	const (
		form     = `{"message":"m","requestedSchema":{}}`
		formMode = `{"mode":"form","message":"m","requestedSchema":{}}`
		url      = `{"mode":"url","message":"m","url":"https://x"}`
		samp     = `{"messages":[],"maxTokens":1}`
		sampTool = `{"messages":[],"maxTokens":1,"tools":[]}`
		sampTC   = `{"messages":[],"maxTokens":1,"toolChoice":{"mode":"none"}}`
	)
	tests := []struct {
		caps, method, params string
		want                 bool
	}{
		{`{"elicitation":{}}`, MethodElicit, form, true},
		{`{"elicitation":{}}`, MethodElicit, formMode, true},
		{`{"elicitation":{}}`, MethodElicit, url, false},
		{`{"elicitation":{"form":{}}}`, MethodElicit, form, true},
		{`{"elicitation":{"form":{}}}`, MethodElicit, url, false},
		{`{"elicitation":{"url":{}}}`, MethodElicit, form, false},
		{`{"elicitation":{"url":{}}}`, MethodElicit, url, true},
		{`{"elicitation":{"form":{},"url":{}}}`, MethodElicit, url, true},
		{`{"elicitation":{"form":{},"url":{}}}`, MethodElicit, form, true},
		{`{"elicitation":{"other":{}}}`, MethodElicit, form, true},
		{`{"elicitation":true}`, MethodElicit, form, false},
		{`{"elicitation":{"url":true}}`, MethodElicit, url, false},
		{`{"sampling":{}}`, MethodElicit, form, false},
		{`{}`, MethodElicit, form, false},
		{`{"sampling":{}}`, MethodSample, samp, true},
		{`{"sampling":{}}`, MethodSample, sampTool, false},
		{`{"sampling":{}}`, MethodSample, sampTC, false},
		{`{"sampling":{"tools":{}}}`, MethodSample, sampTool, true},
		{`{"sampling":{"tools":{}}}`, MethodSample, sampTC, true},
		{`{"sampling":{"context":{}}}`, MethodSample, `{"messages":[],"maxTokens":1,"includeContext":"thisServer"}`, true},
		{`{"elicitation":{},"roots":{}}`, MethodSample, samp, false},
		{`{"roots":{}}`, MethodListRoots, ``, true},
		{`{"roots":{"listChanged":true}}`, MethodListRoots, `{}`, true},
		{`{"sampling":{},"elicitation":{}}`, MethodListRoots, ``, false},
		{`{"roots":{}}`, "ping", ``, false},
		{`[]`, MethodListRoots, ``, false},
		{``, MethodListRoots, ``, false},
		{`{"roots":`, MethodListRoots, ``, false},
	}
	for _, tt := range tests {
		t.Run(tt.caps+" "+tt.method+" "+tt.params, func(t *testing.T) {
			if got := ClientSupports([]byte(tt.caps), tt.method, []byte(tt.params)); got != tt.want {
				t.Errorf("ClientSupports = %v, want %v", got, tt.want)
			}
			// What RequiredCapability asks for is always enough.
			if req := RequiredCapability(tt.method, []byte(tt.params)); req != nil && !ClientSupports(req, tt.method, []byte(tt.params)) {
				t.Errorf("RequiredCapability %s does not satisfy ClientSupports", req)
			}
		})
	}
	for _, tt := range []struct{ method, params, want string }{
		{MethodElicit, form, `{"elicitation":{}}`},
		{MethodElicit, url, `{"elicitation":{"url":{}}}`},
		{MethodSample, samp, `{"sampling":{}}`},
		{MethodSample, sampTool, `{"sampling":{"tools":{}}}`},
		{MethodSample, sampTC, `{"sampling":{"tools":{}}}`},
		{MethodListRoots, ``, `{"roots":{}}`},
		{"tools/call", `{}`, ``},
	} {
		if got := RequiredCapability(tt.method, []byte(tt.params)); string(got) != tt.want {
			t.Errorf("RequiredCapability(%s, %s) = %s, want %s", tt.method, tt.params, got, tt.want)
		}
	}
}

func TestValidateInputResponse(t *testing.T) {
	tests := []struct {
		method, resp string
		ok           bool
	}{
		// elicitation/create
		{MethodElicit, `{"action":"accept","content":{"name":"Alice"}}`, true},
		{MethodElicit, `{"action":"accept","content":{"s":"x","n":1.5,"b":false,"a":["x","y"],"e":[]}}`, true},
		{MethodElicit, `{"action":"decline"}`, true},
		{MethodElicit, `{"action":"cancel","_meta":{}}`, true},
		{MethodElicit, `{"action":"accept"}`, true},
		{MethodElicit, ` {"action":"accept"} `, true},
		{MethodElicit, `12345`, false}, // conformance A15
		{MethodElicit, `null`, false},  // conformance A15 (inputResponses:null)
		{MethodElicit, ``, false},
		{MethodElicit, `"accept"`, false},
		{MethodElicit, `[]`, false},
		{MethodElicit, `{}`, false},
		{MethodElicit, `{"action":"ok"}`, false},
		{MethodElicit, `{"action":"Accept"}`, false},
		{MethodElicit, `{"action":1}`, false},
		{MethodElicit, `{"action":"accept","content":"x"}`, false},
		{MethodElicit, `{"action":"accept","content":null}`, false},
		{MethodElicit, `{"action":"accept","content":{"o":{}}}`, false},
		{MethodElicit, `{"action":"accept","content":{"n":null}}`, false},
		{MethodElicit, `{"action":"accept","content":{"a":[1]}}`, false},
		{MethodElicit, `{"action":"accept","action":"decline"}`, false},
		{MethodElicit, `{"action":"accept"`, false},
		// sampling/createMessage
		{MethodSample, `{"role":"assistant","content":{"type":"text","text":"Paris"},"model":"m","stopReason":"endTurn"}`, true},
		{MethodSample, `{"role":"user","content":[{"type":"text","text":"a"},{"type":"tool_use","id":"1","name":"t","input":{}}],"model":"m"}`, true},
		{MethodSample, `{"role":"assistant","content":[],"model":"m"}`, true},
		{MethodSample, `{"role":"system","content":{"type":"text"},"model":"m"}`, false},
		{MethodSample, `{"content":{"type":"text"},"model":"m"}`, false},
		{MethodSample, `{"role":"assistant","content":{"text":"x"},"model":"m"}`, false},
		{MethodSample, `{"role":"assistant","content":"Paris","model":"m"}`, false},
		{MethodSample, `{"role":"assistant","content":[{"type":"text"},1],"model":"m"}`, false},
		{MethodSample, `{"role":"assistant","content":{"type":"text"}}`, false},
		{MethodSample, `{"role":"assistant","content":{"type":"text"},"model":1}`, false},
		{MethodSample, `{"role":"assistant","content":{"type":"text"},"model":"m","stopReason":1}`, false},
		{MethodSample, `12345`, false},
		{MethodSample, `null`, false},
		// roots/list
		{MethodListRoots, `{"roots":[{"uri":"file:///test/root","name":"Test Root"}]}`, true},
		{MethodListRoots, `{"roots":[]}`, true},
		{MethodListRoots, `{"roots":[{"uri":"file:///a"},{"uri":"file:///b","_meta":{}}]}`, true},
		{MethodListRoots, `{"roots":[{"uri":"https://x"}]}`, false},
		{MethodListRoots, `{"roots":[{"uri":"FILE:///x"}]}`, false},
		{MethodListRoots, `{"roots":[{"name":"n"}]}`, false},
		{MethodListRoots, `{"roots":[{"uri":"file:///a","name":1}]}`, false},
		{MethodListRoots, `{"roots":["file:///a"]}`, false},
		{MethodListRoots, `{"roots":{}}`, false},
		{MethodListRoots, `{}`, false},
		{MethodListRoots, `null`, false},
		// unknown method
		{"tools/call", `{}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.resp, func(t *testing.T) {
			err := ValidateInputResponse(tt.method, []byte(tt.resp))
			if (err == nil) != tt.ok {
				t.Fatalf("ValidateInputResponse = %v, want ok=%v", err, tt.ok)
			}
			if err != nil && !errors.Is(err, ErrInputResponse) {
				t.Errorf("error %v does not wrap ErrInputResponse", err)
			}
		})
	}
}

func TestInputRequiredResult(t *testing.T) {
	reqs := []InputRequest{
		{Key: "zeta", Method: MethodElicit, Params: []byte(formParams)},
		{Key: "alpha", Method: MethodSample, Params: []byte(sampParams)},
		{Key: `q"uote`, Method: MethodListRoots},
	}
	got := InputRequiredResult(reqs, "tok-1")
	want := `{"resultType":"input_required","inputRequests":{"zeta":{"method":"elicitation/create","params":` + formParams +
		`},"alpha":{"method":"sampling/createMessage","params":` + sampParams + `},"q\"uote":{"method":"roots/list"}},"requestState":"tok-1"}`
	if string(got) != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if !json.Valid(got) {
		t.Fatalf("invalid JSON: %s", got)
	}
	var keys []string
	gjson.GetBytes(got, "inputRequests").ForEach(func(k, _ gjson.Result) bool {
		keys = append(keys, k.Str)
		return true
	})
	if strings.Join(keys, ",") != `zeta,alpha,q"uote` {
		t.Errorf("key order %v", keys)
	}
	if got := InputRequiredResult(reqs[:1], ""); gjson.GetBytes(got, "requestState").Exists() || !json.Valid(got) {
		t.Errorf("empty state not omitted: %s", got)
	}
	if got := string(InputRequiredResult(nil, "s")); got != `{"resultType":"input_required","requestState":"s"}` {
		t.Errorf("state only: %s", got)
	}
	// ReshapeResult completes it with serverInfo and no cache hints.
	out, err := ReshapeResult("resources/read", InputRequiredResult(reqs[:1], "s"), ReshapeOptions{ServerInfo: []byte(testServerInfo)})
	if err != nil || gjson.GetBytes(out, "ttlMs").Exists() || !gjson.GetBytes(out, MetaPath("", MetaServerInfo)).Exists() {
		t.Errorf("reshaped input_required: %s (%v)", out, err)
	}
}

func TestCancelAnswer(t *testing.T) {
	tests := []struct {
		method, result, errObj string
	}{
		{MethodElicit, `{"action":"cancel"}`, ""},
		{MethodSample, "", `{"code":-1,"message":"User rejected sampling request"}`},
		{MethodListRoots, "", `{"code":-32603,"message":"Internal error: the client did not answer the roots/list request"}`},
		{"ping", "", `{"code":-32601,"message":"Method not found"}`},
	}
	for _, tt := range tests {
		t.Run(tt.method, func(t *testing.T) {
			res, e := CancelAnswer(tt.method)
			if string(res) != tt.result || string(e) != tt.errObj {
				t.Errorf("got %s / %s", res, e)
			}
			if (res == nil) == (e == nil) {
				t.Error("want exactly one of result and error")
			}
			if res != nil && ValidateInputResponse(tt.method, res) != nil {
				t.Errorf("cancel result %s is not a valid response", res)
			}
			if e != nil {
				if _, err := jsonrpc.Peek([]byte(`{"jsonrpc":"2.0","id":0,"error":` + string(e) + `}`)); err != nil {
					t.Errorf("error object is not valid: %v", err)
				}
			}
		})
	}
}

func TestURLElicitationFromError(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []InputRequest
	}{
		{
			name: "spec example",
			in: `{"code":-32042,"message":"This request requires more information.","data":{"elicitations":[{"mode":"url",` +
				`"elicitationId":"550e8400-e29b-41d4-a716-446655440000","url":"https://mcp.example.com/connect?elicitationId=550e8400",` +
				`"message":"Authorization is required to access your Example Co files."}]}}`,
			want: []InputRequest{{Key: "url-elicitation-1", Method: MethodElicit,
				Params: []byte(`{"mode":"url","url":"https://mcp.example.com/connect?elicitationId=550e8400","message":"Authorization is required to access your Example Co files."}`)}},
		},
		{
			name: "two entries",
			in:   `{"code":-32042,"message":"m","data":{"elicitations":[{"mode":"url","elicitationId":"a","url":"https://a","message":"A"},{"mode":"url","url":"https://b","message":"B","task":{}}]}}`,
			want: []InputRequest{
				{Key: "url-elicitation-1", Method: MethodElicit, Params: []byte(`{"mode":"url","url":"https://a","message":"A"}`)},
				{Key: "url-elicitation-2", Method: MethodElicit, Params: []byte(`{"mode":"url","url":"https://b","message":"B"}`)},
			},
		},
		{name: "other code", in: `{"code":-32602,"message":"m","data":{"elicitations":[{"mode":"url","url":"https://a","message":"A"}]}}`},
		{name: "empty list", in: `{"code":-32042,"message":"m","data":{"elicitations":[]}}`},
		{name: "no data", in: `{"code":-32042,"message":"m"}`},
		{name: "form entry", in: `{"code":-32042,"message":"m","data":{"elicitations":[{"message":"A","requestedSchema":{}}]}}`},
		{name: "entry without url", in: `{"code":-32042,"message":"m","data":{"elicitations":[{"mode":"url","url":"https://a","message":"A"},{"mode":"url","message":"B"}]}}`},
		{name: "not json", in: `{"code":-32042`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := URLElicitationFromError([]byte(tt.in))
			if ok != (tt.want != nil) || len(got) != len(tt.want) {
				t.Fatalf("got %d requests ok=%v, want %d", len(got), ok, len(tt.want))
			}
			for i := range got {
				if got[i].Key != tt.want[i].Key || got[i].Method != tt.want[i].Method || string(got[i].Params) != string(tt.want[i].Params) {
					t.Errorf("request %d = %s %s %s\nwant %s %s %s", i, got[i].Key, got[i].Method, got[i].Params, tt.want[i].Key, tt.want[i].Method, tt.want[i].Params)
				}
				if !ClientSupports([]byte(`{"elicitation":{"url":{}}}`), got[i].Method, got[i].Params) || ClientSupports([]byte(`{"elicitation":{}}`), got[i].Method, got[i].Params) {
					t.Errorf("request %d is not URL mode", i)
				}
			}
		})
	}
}
