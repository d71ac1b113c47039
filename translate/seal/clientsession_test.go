package seal

import (
	"bytes"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
)

func sampleClientSession() ClientSession {
	return ClientSession{
		ID:              [16]byte{1, 2, 3},
		Upstream:        "http://127.0.0.1:9/mcp",
		Principal:       [16]byte{9, 9},
		ProtocolVersion: "2025-11-25",
		Capabilities:    []byte(`{"elicitation":{},"sampling":{}}`),
		ClientInfo:      []byte(`{"name":"c","version":"1"}`),
		Issued:          time.Unix(1_800_000_000, 0),
	}
}

func TestClientSessionRoundTrip(t *testing.T) {
	kr := testKeyring(t, NewRandomKey())
	for _, s := range []ClientSession{sampleClientSession(), {Upstream: "u", Issued: time.Unix(0, 0)}} {
		id, err := SealClientSession(kr, s)
		if err != nil {
			t.Fatal(err)
		}
		got, err := OpenClientSession(kr, id)
		if err != nil {
			t.Fatal(err)
		}
		if got.ID != s.ID || got.Upstream != s.Upstream || got.Principal != s.Principal ||
			got.ProtocolVersion != s.ProtocolVersion || !bytes.Equal(got.Capabilities, s.Capabilities) ||
			!bytes.Equal(got.ClientInfo, s.ClientInfo) || !got.Issued.Equal(s.Issued) {
			t.Fatalf("got %+v, want %+v", got, s)
		}
	}
}

func TestClientSessionRejects(t *testing.T) {
	kr := testKeyring(t, NewRandomKey())
	id, err := SealClientSession(kr, sampleClientSession())
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := base64.RawURLEncoding.DecodeString(string(id))
	raw[len(raw)/2] ^= 1
	tampered := GatewaySessionID(base64.RawURLEncoding.EncodeToString(raw))
	pin := SealPin(kr, Pin{Upstream: "http://127.0.0.1:9/mcp", Issued: time.Now()})
	other, _ := SealClientSession(testKeyring(t, NewRandomKey()), sampleClientSession())
	for name, tok := range map[string]GatewaySessionID{
		"tampered":      tampered,
		"a pin":         pin,
		"other key":     other,
		"garbage":       "not-a-token",
		"too long":      GatewaySessionID(strings.Repeat("A", maxClientSessionToken+1)),
		"empty":         "",
		"sealed binary": GatewaySessionID(kr.Seal(purposeClientSession, []byte{clientSessionVersion, 1, 2})),
	} {
		if _, err := OpenClientSession(kr, tok); !errors.Is(err, ErrUnsealable) {
			t.Errorf("%s: error %v, want ErrUnsealable", name, err)
		}
	}
	// Its JSON fields are walked once opened: a session sealing JSON that
	// is not valid, or nested too deeply, does not open either.
	for name, caps := range map[string]string{"deep capabilities": strings.Repeat("[", jsonrpc.MaxJSONDepth+1), "broken capabilities": `{"a":`} {
		s := sampleClientSession()
		s.Capabilities = []byte(caps)
		tok, err := SealClientSession(kr, s)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := OpenClientSession(kr, tok); !errors.Is(err, ErrUnsealable) {
			t.Errorf("%s: error %v, want ErrUnsealable", name, err)
		}
	}
	// A session id never opens as a pin either.
	if _, err := OpenPin(kr, id); !errors.Is(err, ErrUnsealable) {
		t.Errorf("a client session opened as a pin: %v", err)
	}
}

func TestClientSessionLimits(t *testing.T) {
	kr := testKeyring(t, NewRandomKey())
	s := sampleClientSession()
	s.Upstream = strings.Repeat("u", MaxClientSessionUpstream)
	s.ProtocolVersion = strings.Repeat("v", MaxClientSessionVersion)
	s.Capabilities = []byte(`"` + strings.Repeat("c", MaxClientSessionCapabilities-2) + `"`)
	s.ClientInfo = []byte(`"` + strings.Repeat("i", MaxClientSessionInfo-2) + `"`)
	id, err := SealClientSession(kr, s)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := OpenClientSession(kr, id); err != nil {
		t.Fatalf("the largest session does not open: %v (token %d bytes, limit %d)", err, len(id), maxClientSessionToken)
	}
	s.Capabilities = append(s.Capabilities, 'c')
	if _, err := SealClientSession(kr, s); !errors.Is(err, ErrClientSessionTooLarge) {
		t.Fatalf("error %v, want ErrClientSessionTooLarge", err)
	}
}

func FuzzOpenClientSession(f *testing.F) {
	kr, _ := NewKeyring(bytes.Repeat([]byte{7}, KeySize))
	id, _ := SealClientSession(kr, sampleClientSession())
	f.Add(string(id))
	f.Add("")
	f.Fuzz(func(t *testing.T, tok string) {
		if len(tok) > 2*maxClientSessionToken {
			return
		}
		s, err := OpenClientSession(kr, GatewaySessionID(tok))
		if err != nil {
			return
		}
		// Whatever opens must seal again to something that opens the same.
		again, err := SealClientSession(kr, s)
		if err != nil {
			t.Fatal(err)
		}
		if s2, err := OpenClientSession(kr, again); err != nil || s2.Upstream != s.Upstream {
			t.Fatalf("reopen: %v", err)
		}
	})
}
