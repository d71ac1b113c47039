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
