package translate

import "testing"

// TestInputResponsesFirstWins: of a repeated input key the first answer
// counts, as gjson reads it.
func TestInputResponsesFirstWins(t *testing.T) {
	got := InputResponses([]byte(`{"inputResponses":{"k":{"a":1},"j":2,"k":{"a":3}}}`))
	if len(got) != 2 || string(got["k"]) != `{"a":1}` || string(got["j"]) != `2` {
		t.Errorf("InputResponses = %s", got)
	}
}

// TestLegacyCapabilities: sorted, canonical, roots emptied, the rest
// dropped; of repeated names the first.
func TestLegacyCapabilities(t *testing.T) {
	for in, want := range map[string]string{
		`{"sampling":{},"roots":{"listChanged":true},"elicitation":{"url":{},"form":{}},"tasks":{}}`: `{"elicitation":{"form":{},"url":{}},"roots":{},"sampling":{}}`,
		`{"elicitation":{"form":{}},"elicitation":{"url":{}}}`:                                       `{"elicitation":{"form":{}}}`,
		`{"experimental":{"x":{"b":"<",  "a":1}}}`:                                                   `{"experimental":{"x":{"a":1,"b":"\u003c"}}}`,
		`[1]`:  `{}`,
		`nope`: `{}`,
	} {
		if got := mapLegacyCapabilities([]byte(in)); got != want {
			t.Errorf("LegacyCapabilities(%s) = %s, want %s", in, got, want)
		}
	}
}

// TestListenCompletion: the result that ends a subscription names it in
// _meta by the listen request's id, as the specification's example does,
// with the server's serverInfo first when given.
func TestListenCompletion(t *testing.T) {
	for _, c := range []struct {
		id, serverInfo, want string
	}{
		{`1`, ``, `{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete","_meta":{"io.modelcontextprotocol/subscriptionId":1}}}`},
		{`"listen-1"`, `{"name":"s","version":"1"}`, `{"jsonrpc":"2.0","id":"listen-1","result":{"resultType":"complete","_meta":` +
			`{"io.modelcontextprotocol/serverInfo":{"name":"s","version":"1"},"io.modelcontextprotocol/subscriptionId":"listen-1"}}}`},
	} {
		var info []byte
		if c.serverInfo != "" {
			info = []byte(c.serverInfo)
		}
		if got := string(ListenCompletion([]byte(c.id), info)); got != c.want {
			t.Errorf("ListenCompletion(%s, %s) = %s, want %s", c.id, c.serverInfo, got, c.want)
		}
	}
}
