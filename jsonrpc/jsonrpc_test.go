package jsonrpc

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// asRPCError fails the test unless err is a non-nil *RPCError.
func asRPCError(t *testing.T, err error) *RPCError {
	t.Helper()
	var re *RPCError
	if !errors.As(err, &re) || re == nil {
		t.Fatalf("error %v (%T) is not an *RPCError", err, err)
	}
	return re
}

func TestPeek(t *testing.T) {
	tests := []struct {
		name       string
		body       string
		wantKind   Kind
		wantID     string // raw JSON; "" means nil
		wantMethod string
		wantCode   int // 0 means success
	}{
		{name: "request string id", body: `{"jsonrpc":"2.0","id":"abc","method":"tools/list"}`, wantKind: KindRequest, wantID: `"abc"`, wantMethod: "tools/list"},
		{name: "request number id", body: `{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{}}`, wantKind: KindRequest, wantID: `7`, wantMethod: "tools/list"},
		{name: "request negative fractional id", body: `{"jsonrpc":"2.0","id":-1.5e3,"method":"x"}`, wantKind: KindRequest, wantID: `-1.5e3`, wantMethod: "x"},
		{name: "request escaped string id kept verbatim", body: `{"jsonrpc":"2.0","id":"a\u0062c","method":"x"}`, wantKind: KindRequest, wantID: `"a\u0062c"`, wantMethod: "x"},
		{name: "request whitespace around", body: " \n{ \"method\" : \"x\", \"id\" : 1 , \"jsonrpc\":\"2.0\" }\n", wantKind: KindRequest, wantID: `1`, wantMethod: "x"},
		{name: "request params array", body: `{"jsonrpc":"2.0","id":1,"method":"x","params":[1]}`, wantKind: KindRequest, wantID: `1`, wantMethod: "x"},
		{name: "notification", body: `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`, wantKind: KindNotification, wantMethod: "notifications/cancelled"},
		{name: "result response", body: `{"jsonrpc":"2.0","id":3,"result":{}}`, wantKind: KindResponse, wantID: `3`},
		{name: "error response", body: `{"jsonrpc":"2.0","id":"r","error":{"code":-32601,"message":"nope"}}`, wantKind: KindResponse, wantID: `"r"`},
		{name: "error response null id", body: `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"bad"}}`, wantKind: KindResponse, wantID: `null`},
		{name: "error response without id", body: `{"jsonrpc":"2.0","error":{"code":-32700,"message":"bad"}}`, wantKind: KindResponse},

		{name: "garbage", body: `not json`, wantCode: ParseError},
		{name: "empty", body: ``, wantCode: ParseError},
		{name: "truncated", body: `{"jsonrpc":"2.0","id":1,"method":"x"`, wantCode: ParseError},
		{name: "trailing garbage", body: `{"jsonrpc":"2.0","id":1,"method":"x"} x`, wantCode: ParseError},
		{name: "batch", body: `[{"jsonrpc":"2.0","id":1,"method":"x"}]`, wantCode: InvalidRequest},
		{name: "empty batch", body: `[]`, wantCode: InvalidRequest},
		{name: "scalar", body: `1`, wantCode: InvalidRequest},
		{name: "string", body: `"x"`, wantCode: InvalidRequest},
		{name: "null", body: `null`, wantCode: InvalidRequest},
		{name: "jsonrpc 1.0 keeps id", body: `{"jsonrpc":"1.0","id":5,"method":"x"}`, wantID: `5`, wantMethod: "x", wantCode: InvalidRequest},
		{name: "jsonrpc missing", body: `{"id":5,"method":"x"}`, wantID: `5`, wantMethod: "x", wantCode: InvalidRequest},
		{name: "jsonrpc number", body: `{"jsonrpc":2.0,"id":5,"method":"x"}`, wantID: `5`, wantMethod: "x", wantCode: InvalidRequest},
		{name: "method number", body: `{"jsonrpc":"2.0","id":5,"method":1}`, wantID: `5`, wantCode: InvalidRequest},
		{name: "method empty", body: `{"jsonrpc":"2.0","id":5,"method":""}`, wantID: `5`, wantCode: InvalidRequest},
		{name: "id null", body: `{"jsonrpc":"2.0","id":null,"method":"x"}`, wantMethod: "x", wantCode: InvalidRequest},
		{name: "id bool", body: `{"jsonrpc":"2.0","id":true,"method":"x"}`, wantMethod: "x", wantCode: InvalidRequest},
		{name: "id object", body: `{"jsonrpc":"2.0","id":{},"method":"x"}`, wantMethod: "x", wantCode: InvalidRequest},
		{name: "id array", body: `{"jsonrpc":"2.0","id":[1],"method":"x"}`, wantMethod: "x", wantCode: InvalidRequest},
		{name: "params string", body: `{"jsonrpc":"2.0","id":1,"method":"x","params":"p"}`, wantID: `1`, wantMethod: "x", wantCode: InvalidRequest},
		{name: "method with result", body: `{"jsonrpc":"2.0","id":1,"method":"x","result":{}}`, wantID: `1`, wantMethod: "x", wantCode: InvalidRequest},
		{name: "result and error", body: `{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":"m"}}`, wantID: `1`, wantCode: InvalidRequest},
		{name: "neither method nor result", body: `{"jsonrpc":"2.0","id":1}`, wantID: `1`, wantCode: InvalidRequest},
		{name: "result without id", body: `{"jsonrpc":"2.0","result":{}}`, wantCode: InvalidRequest},
		{name: "result with null id", body: `{"jsonrpc":"2.0","id":null,"result":{}}`, wantCode: InvalidRequest},
		{name: "error with bool id", body: `{"jsonrpc":"2.0","id":false,"error":{"code":1,"message":"m"}}`, wantCode: InvalidRequest},
		{name: "error not object", body: `{"jsonrpc":"2.0","id":1,"error":"boom"}`, wantID: `1`, wantCode: InvalidRequest},
		{name: "error without code", body: `{"jsonrpc":"2.0","id":1,"error":{"message":"m"}}`, wantID: `1`, wantCode: InvalidRequest},
		{name: "duplicate method", body: `{"jsonrpc":"2.0","id":1,"method":"tools/list","method":"tools/call"}`, wantID: `1`, wantMethod: "tools/list", wantCode: InvalidRequest},
		{name: "duplicate escaped key", body: `{"jsonrpc":"2.0","id":1,"method":"a","m\u0065thod":"b"}`, wantID: `1`, wantMethod: "a", wantCode: InvalidRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg, err := Peek([]byte(tt.body))
			if tt.wantCode == 0 {
				if err != nil {
					t.Fatalf("Peek: unexpected error %v", err)
				}
				if msg.Kind != tt.wantKind {
					t.Errorf("Kind = %v, want %v", msg.Kind, tt.wantKind)
				}
			} else {
				re := asRPCError(t, err)
				if re.Code != tt.wantCode || re.HTTPStatus != 400 {
					t.Errorf("error = %d/%d (%s), want %d/400", re.Code, re.HTTPStatus, re.Message, tt.wantCode)
				}
				if msg.Kind != KindInvalid {
					t.Errorf("Kind = %v on error, want invalid", msg.Kind)
				}
			}
			if string(msg.ID) != tt.wantID {
				t.Errorf("ID = %q, want %q", msg.ID, tt.wantID)
			}
			if msg.Method != tt.wantMethod {
				t.Errorf("Method = %q, want %q", msg.Method, tt.wantMethod)
			}
		})
	}
}

func TestPeekIDIsACopy(t *testing.T) {
	body := []byte(`{"jsonrpc":"2.0","id":"abc","method":"x"}`)
	msg, err := Peek(body)
	if err != nil {
		t.Fatal(err)
	}
	copy(body, strings.Repeat("z", len(body)))
	if string(msg.ID) != `"abc"` {
		t.Fatalf("ID aliases the body: %q", msg.ID)
	}
}

// decodedError is an error response as decoded by encoding/json.
type decodedError struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Error   struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
}

func TestErrorResponse(t *testing.T) {
	tests := []struct {
		name        string
		id          json.RawMessage
		err         *RPCError
		wantID      string
		wantCode    int
		wantMessage string
		wantData    string
	}{
		{name: "string id verbatim", id: json.RawMessage(`"a\u0062c"`), err: &RPCError{HTTPStatus: 400, Code: HeaderMismatch, Message: "m"}, wantID: `"a\u0062c"`, wantCode: HeaderMismatch, wantMessage: "m"},
		{name: "number id", id: json.RawMessage(`42`), err: &RPCError{HTTPStatus: 400, Code: InvalidParams, Message: "bad"}, wantID: `42`, wantCode: InvalidParams, wantMessage: "bad"},
		{name: "id with spaces trimmed", id: json.RawMessage(" 1 \n"), err: &RPCError{Code: InvalidParams, Message: "bad"}, wantID: `1`, wantCode: InvalidParams, wantMessage: "bad"},
		{name: "nil id", err: &RPCError{Code: ParseError, Message: "p"}, wantID: `null`, wantCode: ParseError, wantMessage: "p"},
		{name: "invalid id", id: json.RawMessage(`{"x":`), err: &RPCError{Code: ParseError, Message: "p"}, wantID: `null`, wantCode: ParseError, wantMessage: "p"},
		{name: "two values id", id: json.RawMessage(`1 2`), err: &RPCError{Code: ParseError, Message: "p"}, wantID: `null`, wantCode: ParseError, wantMessage: "p"},
		{
			name: "data", id: json.RawMessage(`301`),
			err:    &RPCError{HTTPStatus: 400, Code: UnsupportedProtocolVersion, Message: "Unsupported protocol version", Data: UnsupportedVersionData{Supported: []string{"2026-07-28"}, Requested: "v999.0.0"}},
			wantID: `301`, wantCode: UnsupportedProtocolVersion, wantMessage: "Unsupported protocol version",
			wantData: `{"supported":["2026-07-28"],"requested":"v999.0.0"}`,
		},
		{name: "unmarshalable data dropped", id: json.RawMessage(`1`), err: &RPCError{Code: InternalError, Message: "x", Data: make(chan int)}, wantID: `1`, wantCode: InternalError, wantMessage: "x"},
		{name: "default message", id: json.RawMessage(`1`), err: &RPCError{Code: HeaderMismatch}, wantID: `1`, wantCode: HeaderMismatch, wantMessage: "Header mismatch"},
		{name: "code 0 becomes internal", id: json.RawMessage(`1`), err: &RPCError{HTTPStatus: 405, Message: "no"}, wantID: `1`, wantCode: InternalError, wantMessage: "no"},
		{name: "nil error", id: json.RawMessage(`1`), wantID: `1`, wantCode: InternalError, wantMessage: "Internal error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := ErrorResponse(tt.id, tt.err)
			if !json.Valid(out) {
				t.Fatalf("invalid JSON: %s", out)
			}
			var got decodedError
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatal(err)
			}
			if got.JSONRPC != "2.0" {
				t.Errorf("jsonrpc = %q", got.JSONRPC)
			}
			if string(got.ID) != tt.wantID {
				t.Errorf("id = %s, want %s (body %s)", got.ID, tt.wantID, out)
			}
			if got.Error.Code != tt.wantCode || got.Error.Message != tt.wantMessage {
				t.Errorf("error = %d %q, want %d %q", got.Error.Code, got.Error.Message, tt.wantCode, tt.wantMessage)
			}
			if string(got.Error.Data) != tt.wantData {
				t.Errorf("data = %s, want %s", got.Error.Data, tt.wantData)
			}
			// The id must appear byte for byte, not re-encoded.
			if !strings.Contains(string(out), `"id":`+tt.wantID+`,`) {
				t.Errorf("id not echoed verbatim in %s", out)
			}
		})
	}
}

func TestErrorResponseEchoesPeekedID(t *testing.T) {
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":"req-1","method":"x","params":"bad"}`,
		`{"jsonrpc":"2.0","id":12345678901234567890,"method":"x"}`,
	} {
		msg, err := Peek([]byte(body))
		var re *RPCError
		if err != nil {
			re = asRPCError(t, err)
		} else {
			re = &RPCError{Code: InternalError}
		}
		var got decodedError
		if err := json.Unmarshal(ErrorResponse(msg.ID, re), &got); err != nil {
			t.Fatal(err)
		}
		if string(got.ID) != string(msg.ID) || len(msg.ID) == 0 {
			t.Errorf("%s: id %s not echoed (got %s)", body, msg.ID, got.ID)
		}
	}
}

func TestRPCErrorString(t *testing.T) {
	if got := (&RPCError{HTTPStatus: 400, Code: HeaderMismatch, Message: "m"}).Error(); got != "translate: m (JSON-RPC -32020, HTTP 400)" {
		t.Errorf("Error() = %q", got)
	}
	if got := (&RPCError{HTTPStatus: 405, Message: "m"}).Error(); got != "translate: m (HTTP 405)" {
		t.Errorf("Error() = %q", got)
	}
	e := NewMethodNotFound("ping")
	if e.HTTPStatus != 404 || e.Code != MethodNotFound || !strings.Contains(e.Message, "ping") {
		t.Errorf("NewMethodNotFound = %+v", e)
	}
	if long := NewMethodNotFound(strings.Repeat("m", 1000)); len(long.Message) > 200 {
		t.Errorf("method name not clipped: %d bytes", len(long.Message))
	}
}

// TestPeekNestingBomb: a body nested deeper than MaxJSONDepth is a
// parse error naming the limit, refused by a scan (a recursive validator
// would need about 1.6 GiB of stack for this one); a body at the limit is
// parsed.
func TestPeekNestingBomb(t *testing.T) {
	for _, body := range []string{
		strings.Repeat("[", 10<<20),
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{"a":` + strings.Repeat("[", 200) + strings.Repeat("]", 200) + `}}}`,
	} {
		_, err := Peek([]byte(body))
		re := asRPCError(t, err)
		if re.Code != ParseError || re.HTTPStatus != 400 || !strings.Contains(re.Message, "nested deeper than 128 levels") {
			t.Errorf("%.30s…: %v, want -32700/400 naming the limit", body, re)
		}
	}
	within := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{"a":` + strings.Repeat("[", 124) + strings.Repeat("]", 124) + `}}}`
	if _, err := Peek([]byte(within)); err != nil {
		t.Errorf("128 levels: %v", err)
	}
}
