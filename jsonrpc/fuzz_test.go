package jsonrpc

import (
	"encoding/json"
	"net/http"
	"testing"
)

// peekSeeds are bodies of every shape Peek distinguishes.
var peekSeeds = []string{
	`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`,
	`{"jsonrpc":"2.0","id":"a\u0062","method":"tools/call","params":{"name":"t","arguments":{}}}`,
	`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`,
	`{"jsonrpc":"2.0","id":1,"result":{}}`,
	`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}}`,
	`[{"jsonrpc":"2.0","id":1,"method":"x"}]`,
	`{"jsonrpc":"2.0","id":1,"method":"x","method":"y"}`,
	`{"jsonrpc":"2.0","id":true,"method":"x"}`,
	`{"jsonrpc":"2.0","id":1e400,"method":"x"}`,
	`{"jsonrpc":"2.0","id":"\ud800","method":"\u0000"}`,
	`{"a":`,
	`"\`,
	``,
	`null`,
}

func FuzzPeek(f *testing.F) {
	for _, s := range peekSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		msg, err := Peek(body)
		if err != nil {
			re := asRPCError(t, err)
			if re.HTTPStatus != http.StatusBadRequest || (re.Code != ParseError && re.Code != InvalidRequest) {
				t.Fatalf("unexpected error %d/%d", re.HTTPStatus, re.Code)
			}
			if msg.Kind != KindInvalid {
				t.Fatalf("Kind %v with error", msg.Kind)
			}
		} else if msg.Kind == KindInvalid {
			t.Fatal("KindInvalid without error")
		}
		if msg.ID != nil && !json.Valid(msg.ID) {
			t.Fatalf("ID %q is not valid JSON", msg.ID)
		}
		if (msg.Kind == KindRequest || msg.Kind == KindNotification) && msg.Method == "" {
			t.Fatal("request without method")
		}
		if msg.Kind == KindRequest && msg.ID == nil {
			t.Fatal("request without id")
		}
		out := ErrorResponse(msg.ID, &RPCError{Code: InvalidRequest, Message: msg.Method})
		if !json.Valid(out) {
			t.Fatalf("ErrorResponse is not valid JSON: %q", out)
		}
	})
}
