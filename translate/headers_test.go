package translate

import (
	"errors"
	"net/http"
	"testing"
)

// hdr builds a header from name/value pairs with Header.Add, so names are
// canonicalized the way net/http does for inbound requests.
func hdr(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

func TestDecodeHeaderValue(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    string
		wantErr bool
	}{
		{name: "base64 hello", in: "=?base64?SGVsbG8=?=", want: "Hello"},
		{name: "base64 non-ASCII", in: "=?base64?SGVsbG8sIOS4lueVjA==?=", want: "Hello, 世界"},
		{name: "base64 padded value", in: "=?base64?IHBhZGRlZCA=?=", want: " padded "},
		{name: "base64 newline value", in: "=?base64?bGluZTEKbGluZTI=?=", want: "line1\nline2"},
		{name: "base64 of a sentinel", in: "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?=", want: "=?base64?literal?="},
		{name: "base64 empty payload", in: "=?base64??=", want: ""},
		{name: "base64 with OWS", in: " \t=?base64?SGVsbG8=?= ", want: "Hello"},
		{name: "bad padding", in: "=?base64?SGVsbG8?=", wantErr: true},
		{name: "bad chars", in: "=?base64?SGVs!!!bG8=?=", wantErr: true},
		{name: "non-canonical trailing bits", in: "=?base64?SGVsbG9=?=", wantErr: true},
		{name: "url alphabet", in: "=?base64?_-8=?=", wantErr: true},
		{name: "embedded CRLF", in: "=?base64?SGVs\r\nbG8=?=", wantErr: true},
		{name: "embedded space", in: "=?base64?SGVs bG8=?=", wantErr: true},
		{name: "not UTF-8", in: "=?base64?/w==?=", wantErr: true},
		{name: "literal base64 text", in: "SGVsbG8=", want: "SGVsbG8="},
		{name: "missing suffix is literal", in: "=?base64?SGVsbG8=", want: "=?base64?SGVsbG8="},
		{name: "missing prefix is literal", in: "SGVsbG8=?=", want: "SGVsbG8=?="},
		{name: "uppercase markers are literal", in: "=?BASE64?SGVsbG8=?=", want: "=?BASE64?SGVsbG8=?="},
		{name: "overlapping markers are literal", in: "=?base64?=", want: "=?base64?="},
		{name: "literal with OWS", in: "  tool  ", want: "tool"},
		{name: "literal inner space", in: "a b\tc", want: "a b\tc"},
		{name: "literal URI", in: "file:///projects/myapp/config.json", want: "file:///projects/myapp/config.json"},
		{name: "empty", in: "", want: ""},
		{name: "literal non-ASCII", in: "caf\xc3\xa9", wantErr: true},
		{name: "literal control", in: "a\x01b", wantErr: true},
		{name: "literal DEL", in: "a\x7fb", wantErr: true},
		{name: "literal newline", in: "a\nb", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DecodeHeaderValue(tt.in)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("DecodeHeaderValue(%q) = %q, want error", tt.in, got)
				}
				if !errors.Is(err, ErrInvalidHeaderValue) {
					t.Errorf("error %v does not wrap ErrInvalidHeaderValue", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("DecodeHeaderValue(%q): %v", tt.in, err)
			}
			if got != tt.want {
				t.Errorf("DecodeHeaderValue(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestHeaderValuesAnyCase(t *testing.T) {
	tests := []struct {
		name string
		h    http.Header
		want int
	}{
		{name: "canonical", h: hdr("mcp-method", "a"), want: 1},
		{name: "lowercase key", h: http.Header{"mcp-method": {"a"}}, want: 1},
		{name: "uppercase key", h: http.Header{"MCP-METHOD": {"a"}}, want: 1},
		{name: "two spellings", h: http.Header{"Mcp-Method": {"a"}, "mcp-method": {"b"}}, want: 2},
		{name: "absent", h: hdr("Mcp-Name", "x"), want: 0},
		{name: "nil", want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := headerValues(tt.h, HeaderMethod); len(got) != tt.want {
				t.Errorf("headerValues = %q, want %d values", got, tt.want)
			}
		})
	}
}
