package forward

import "testing"

// TestStateIDSpelling: another base64 spelling of a token (the unused low
// bits of its last character changed) is the same state, so a used state
// cannot be replayed by respelling it; another token is another state.
func TestStateIDSpelling(t *testing.T) {
	token := "AAAB" + "AQ" // 4+2 chars: the last one has 4 unused bits
	if stateID(token) != stateID("AAAB"+"AR") {
		t.Fatal("two spellings of one token have two ids")
	}
	if stateID(token) == stateID("AAAB"+"BQ") {
		t.Fatal("two tokens have one id")
	}
}
