package jsonrpc

import "testing"

// FuzzParseMessage: whatever an upstream sends, classifying it does not
// panic, and what is classified is consistent (a response has an id, a
// request a method and an id, a notification a method and no id).
func FuzzParseMessage(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"result":{}}`, `{"jsonrpc":"2.0","id":"a","method":"elicitation/create","params":{}}`,
		`{"jsonrpc":"2.0","method":"notifications/progress"}`, `{"id":null,"error":{"code":1}}`, `[]`, `{"method":7}`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		m := ParseMessage(raw)
		switch m.Kind {
		case KindRequest:
			if m.Method == "" || m.ID == nil {
				t.Fatalf("request without method and id: %s", raw)
			}
		case KindNotification:
			if m.ID != nil {
				t.Fatalf("notification with id: %s", raw)
			}
		case KindResponse:
			if m.ID == nil {
				t.Fatalf("response without id: %s", raw)
			}
		}
		_ = m.Params()
	})
}

func TestKindString(t *testing.T) {
	for k, want := range map[Kind]string{KindInvalid: "invalid", KindRequest: "request", KindNotification: "notification", KindResponse: "response", Kind(99): "invalid"} {
		if got := k.String(); got != want {
			t.Errorf("Kind(%d).String() = %q, want %q", int(k), got, want)
		}
	}
}
