package translate

import (
	"encoding/base64"
	"strings"
	"testing"
)

func TestPrincipalHash(t *testing.T) {
	a, b := PrincipalHash("alice"), PrincipalHash("bob")
	if a == b || a != PrincipalHash("alice") || a == PrincipalHash("") {
		t.Errorf("PrincipalHash not a function of its input: %x %x", a, b)
	}
	// First 16 bytes of SHA-256("alice"), from `printf alice | sha256sum`.
	if got := base64.StdEncoding.EncodeToString(a[:]); got != "K9gGyX8OAK8aH8Myj6djqQ==" {
		t.Errorf("PrincipalHash(alice) = %s", got)
	}
}

func TestRequestDigest(t *testing.T) {
	base := RequestDigest("tools/call", []byte(`{"name":"t","arguments":{"a":1,"b":{"y":[1,"x",true,null],"x":"s"}},"_meta":{"progressToken":1}}`))
	same := []struct{ name, method, params string }{
		{"reordered and spaced", "tools/call", "{ \"arguments\" : { \"b\" : { \"x\" : \"s\" , \"y\" : [ 1 , \"x\" , true , null ] } , \"a\" : 1 } , \"name\" : \"t\" }"},
		{"escapes", "tools/call", `{"name":"\u0074","arguments":{"\u0061":1,"b":{"y":[1,"\u0078",true,null],"x":"s"}}}`},
		{"retry params ignored", "tools/call", `{"name":"t","arguments":{"a":1,"b":{"y":[1,"x",true,null],"x":"s"}},"_meta":{"x":2},"inputResponses":{"k":{"action":"accept"}},"requestState":"abc"}`},
	}
	for _, tt := range same {
		t.Run("same/"+tt.name, func(t *testing.T) {
			if got := RequestDigest(tt.method, []byte(tt.params)); got != base {
				t.Errorf("digest differs for %s", tt.params)
			}
		})
	}
	differ := []struct{ name, method, params string }{
		{"other arg value", "tools/call", `{"name":"t","arguments":{"a":2,"b":{"y":[1,"x",true,null],"x":"s"}}}`},
		{"number spelling", "tools/call", `{"name":"t","arguments":{"a":1.0,"b":{"y":[1,"x",true,null],"x":"s"}}}`},
		{"array order", "tools/call", `{"name":"t","arguments":{"a":1,"b":{"y":["x",1,true,null],"x":"s"}}}`},
		{"string vs number", "tools/call", `{"name":"t","arguments":{"a":"1","b":{"y":[1,"x",true,null],"x":"s"}}}`},
		{"extra arg", "tools/call", `{"name":"t","arguments":{"a":1,"c":0,"b":{"y":[1,"x",true,null],"x":"s"}}}`},
		{"other name", "tools/call", `{"name":"u","arguments":{"a":1,"b":{"y":[1,"x",true,null],"x":"s"}}}`},
		{"other method", "prompts/get", `{"name":"t","arguments":{"a":1,"b":{"y":[1,"x",true,null],"x":"s"}}}`},
	}
	for _, tt := range differ {
		t.Run("differ/"+tt.name, func(t *testing.T) {
			if got := RequestDigest(tt.method, []byte(tt.params)); got == base {
				t.Errorf("digest equal for %s", tt.params)
			}
		})
	}

	pairs := []struct {
		name       string
		m1, p1     string
		m2, p2     string
		wantEqual  bool
		wantReason string
	}{
		{"read uri", "resources/read", `{"uri":"file:///a","_meta":{}}`, "resources/read", `{ "uri" : "file:///a" }`, true, ""},
		{"read other uri", "resources/read", `{"uri":"file:///a"}`, "resources/read", `{"uri":"file:///b"}`, false, ""},
		{"read ignores other params", "resources/read", `{"uri":"file:///a","x":1}`, "resources/read", `{"uri":"file:///a"}`, true, ""},
		{"absent args equal empty", "tools/call", `{"name":"t"}`, "tools/call", `{"name":"t","arguments":{}}`, true, ""},
		{"null args equal empty", "tools/call", `{"name":"t","arguments":null}`, "tools/call", `{"name":"t","arguments":{}}`, true, ""},
		{"absent name vs empty", "tools/call", `{"arguments":{}}`, "tools/call", `{"name":"","arguments":{}}`, false, ""},
		{"name vs args boundary", "tools/call", `{"name":"ab","arguments":{}}`, "tools/call", `{"name":"a","arguments":{"b":{}}}`, false, ""},
		{"method vs name boundary", "tools/call", `{"name":"x"}`, "tools/cal", `{"name":"lx"}`, false, ""},
		{"other method params", "completion/complete", `{"ref":{"type":"ref/prompt","name":"p"},"argument":{"name":"a","value":"v"},"_meta":{"k":1}}`,
			"completion/complete", `{"argument":{"value":"v","name":"a"},"ref":{"name":"p","type":"ref/prompt"}}`, true, ""},
		{"invalid json as absent", "tools/call", `{"name":`, "tools/call", ``, true, ""},
		{"unicode keys sorted by bytes", "tools/call", `{"name":"t","arguments":{"é":1,"z":2}}`, "tools/call", `{"name":"t","arguments":{"z":2,"\u00e9":1}}`, true, ""},
	}
	for _, tt := range pairs {
		t.Run("pair/"+tt.name, func(t *testing.T) {
			d1, d2 := RequestDigest(tt.m1, []byte(tt.p1)), RequestDigest(tt.m2, []byte(tt.p2))
			if (d1 == d2) != tt.wantEqual {
				t.Errorf("equal = %v, want %v", d1 == d2, tt.wantEqual)
			}
		})
	}

	// Very deep arguments do not blow the stack.
	deep := `{"name":"t","arguments":{"a":` + strings.Repeat("[", 100000) + strings.Repeat("]", 100000) + `}}`
	_ = RequestDigest("tools/call", []byte(deep))
}

func BenchmarkRequestDigest(b *testing.B) {
	p := []byte(`{"name":"search","arguments":{"query":"mcp gateway","limit":10,"filters":{"lang":["go","ts"],"since":"2026-01-01"}},"_meta":{"progressToken":1}}`)
	b.ReportAllocs()
	for b.Loop() {
		_ = RequestDigest("tools/call", p)
	}
}
