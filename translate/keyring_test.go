package translate

import (
	"bytes"
	"testing"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/legacy/seal"
)

var testKey = bytes.Repeat([]byte{7}, seal.KeySize)

func testKeyring(t testing.TB, keys ...[]byte) *seal.Keyring {
	t.Helper()
	if len(keys) == 0 {
		keys = [][]byte{testKey}
	}
	kr, err := seal.NewKeyring(keys...)
	if err != nil {
		t.Fatal(err)
	}
	return kr
}
