package seal

import (
	"bytes"
	"encoding/base64"
	"errors"
	"testing"
	"time"
)

func TestSealOpenRoundTrip(t *testing.T) {
	kr := testKeyring(t, NewRandomKey())
	for _, pt := range [][]byte{nil, []byte("x"), bytes.Repeat([]byte("abc"), 1000)} {
		tok := kr.Seal("p", pt)
		got, err := kr.Open("p", tok)
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		if !bytes.Equal(got, pt) {
			t.Fatalf("got %q, want %q", got, pt)
		}
		for _, c := range tok {
			if c < 0x21 || c > 0x7e {
				t.Fatalf("token has non-visible character %q", c)
			}
		}
	}
}

func TestSealIsRandomized(t *testing.T) {
	kr := testKeyring(t, NewRandomKey())
	if kr.Seal("p", []byte("same")) == kr.Seal("p", []byte("same")) {
		t.Fatal("two seals of the same plaintext are equal: nonce reused")
	}
}

func TestOpenRejects(t *testing.T) {
	k1, k2 := NewRandomKey(), NewRandomKey()
	kr := testKeyring(t, k1)
	tok := kr.Seal("p", []byte("payload"))
	raw, _ := base64.RawURLEncoding.DecodeString(tok)
	flip := func(i int) string {
		b := bytes.Clone(raw)
		b[i] ^= 1
		return base64.RawURLEncoding.EncodeToString(b)
	}
	cases := map[string]struct {
		kr      *Keyring
		purpose Purpose
		token   string
	}{
		"other purpose":     {kr, "q", tok},
		"other key":         {testKeyring(t, k2), "p", tok},
		"flipped version":   {kr, "p", flip(0)},
		"flipped key id":    {kr, "p", flip(2)},
		"flipped nonce":     {kr, "p", flip(8)},
		"flipped body":      {kr, "p", flip(len(raw) - 20)},
		"flipped tag":       {kr, "p", flip(len(raw) - 1)},
		"truncated":         {kr, "p", tok[:len(tok)-4]},
		"header only":       {kr, "p", tok[:20]},
		"empty":             {kr, "p", ""},
		"not base64":        {kr, "p", "!!!" + tok},
		"appended":          {kr, "p", tok + "AAAA"},
		"padded base64 std": {kr, "p", base64.StdEncoding.EncodeToString(raw)},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := c.kr.Open(c.purpose, c.token)
			if !errors.Is(err, ErrUnsealable) {
				t.Fatalf("err = %v, want ErrUnsealable", err)
			}
			// Only a well-formed token under a key the keyring lacks is
			// ErrUnknownKey (the gateway tells operators of those).
			if unknown := name == "other key" || name == "flipped key id"; errors.Is(err, ErrUnknownKey) != unknown {
				t.Fatalf("err = %v: ErrUnknownKey %v, want %v", err, errors.Is(err, ErrUnknownKey), unknown)
			}
		})
	}
}

func TestKeyRotation(t *testing.T) {
	old, next := NewRandomKey(), NewRandomKey()
	tok := testKeyring(t, old).Seal("p", []byte("v"))
	rotated := testKeyring(t, next, old)
	if _, err := rotated.Open("p", tok); err != nil {
		t.Fatalf("a token of the older key must still open: %v", err)
	}
	fresh := rotated.Seal("p", []byte("v"))
	if _, err := testKeyring(t, old).Open("p", fresh); err == nil {
		t.Fatal("a token of the new key opened with the old key only")
	}
}

func TestNewKeyringErrors(t *testing.T) {
	k := NewRandomKey()
	for name, keys := range map[string][][]byte{
		"none":      nil,
		"short":     {k[:31]},
		"duplicate": {k, bytes.Clone(k)},
	} {
		if _, err := NewKeyring(keys...); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestParseKey(t *testing.T) {
	k := NewRandomKey()
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		got, err := ParseKey(enc.EncodeToString(k))
		if err != nil || !bytes.Equal(got, k) {
			t.Fatalf("ParseKey(%v) = %x, %v", enc, got, err)
		}
	}
	if _, err := ParseKey(base64.StdEncoding.EncodeToString(k[:16])); err == nil {
		t.Fatal("a 16-byte key was accepted")
	}
	if _, err := ParseKey("not base64 at all!"); err == nil {
		t.Fatal("garbage was accepted")
	}
}

func TestPinRoundTrip(t *testing.T) {
	kr := testKeyring(t, NewRandomKey())
	for _, p := range []Pin{
		{Upstream: "http://127.0.0.1:9101/mcp", Session: "abc-123", Principal: [16]byte{1, 2, 3}, Issued: time.Unix(1795000000, 0)},
		{Upstream: "https://mcp.example.com/v1/mcp", Session: "", Issued: time.Unix(0, 0)},
	} {
		got, err := OpenPin(kr, SealPin(kr, p))
		if err != nil {
			t.Fatal(err)
		}
		if got.Upstream != p.Upstream || got.Session != p.Session || got.Principal != p.Principal || !got.Issued.Equal(p.Issued) {
			t.Fatalf("got %+v, want %+v", got, p)
		}
	}
}

func TestPinIsNotAnotherToken(t *testing.T) {
	kr := testKeyring(t, NewRandomKey())
	other := kr.Seal("mcp-gateway/other/v1", []byte("\x00\x00\x00\x00\x00\x00\x00\x00\x01u"))
	if _, err := OpenPin(kr, GatewaySessionID(other)); !errors.Is(err, ErrUnsealable) {
		t.Fatalf("a token sealed for another purpose opened as a pin: %v", err)
	}
}

func FuzzOpenPin(f *testing.F) {
	kr, err := NewKeyring(bytes.Repeat([]byte{7}, KeySize))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(string(SealPin(kr, Pin{Upstream: "http://a/mcp", Session: "s"})))
	f.Add("")
	f.Add("AQAAAAAAAAAAAAAAAAAAAAAA")
	f.Fuzz(func(t *testing.T, tok string) {
		p, err := OpenPin(kr, GatewaySessionID(tok))
		if err != nil {
			if !errors.Is(err, ErrUnsealable) {
				t.Fatalf("error does not wrap ErrUnsealable: %v", err)
			}
			return
		}
		// Anything that opens must re-seal to something that opens the same.
		q, err := OpenPin(kr, SealPin(kr, p))
		if err != nil || q.Upstream != p.Upstream || q.Session != p.Session || q.Principal != p.Principal {
			t.Fatalf("re-seal mismatch: %+v vs %+v (%v)", p, q, err)
		}
	})
}

func TestMACKeys(t *testing.T) {
	k1, k2 := NewRandomKey(), NewRandomKey()
	kr := testKeyring(t, k1, k2)
	a, b := kr.MACKeys("purpose-a"), kr.MACKeys("purpose-b")
	if len(a) != 2 || a[0].ID != KeyID(k1) || a[1].ID != KeyID(k2) {
		t.Fatalf("MACKeys = %+v: want one per key, in keyring order, with their key ids", a)
	}
	for i := range a {
		if len(a[i].Key) != KeySize {
			t.Fatalf("key %d: %d bytes", i, len(a[i].Key))
		}
		if bytes.Equal(a[i].Key, b[i].Key) || bytes.Equal(a[i].Key, [][]byte{k1, k2}[i]) {
			t.Fatalf("key %d: not separated from the other purpose or from the keyring key", i)
		}
	}
	if bytes.Equal(a[0].Key, a[1].Key) {
		t.Fatal("two keyring keys derive the same MAC key")
	}
	again := testKeyring(t, k2, k1).MACKeys("purpose-a")
	if !bytes.Equal(again[1].Key, a[0].Key) {
		t.Fatal("the derivation depends on something else than the key and the purpose")
	}
}

// tamper returns tok with one character that carries only payload bits
// (the third from the end of unpadded base64) changed, so that it always
// decodes to other bytes.
func tamper(tok string) string {
	i := len(tok) - 3
	c := byte('A')
	if tok[i] == c {
		c = 'B'
	}
	return tok[:i] + string(c) + tok[i+1:]
}
