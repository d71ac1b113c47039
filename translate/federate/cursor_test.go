package federate

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/seal"
)

var (
	testNow       = time.Unix(1_800_000_000, 0)
	testPrincipal = [16]byte{1, 2, 3}
)

func testKeyring(t *testing.T, fill byte) *seal.Keyring {
	t.Helper()
	kr, err := seal.NewKeyring(bytes.Repeat([]byte{fill}, seal.KeySize))
	if err != nil {
		t.Fatal(err)
	}
	return kr
}

func TestCursorRoundTrip(t *testing.T) {
	kr, s := testKeyring(t, 1), testSet(t)
	if c, err := NextCursor(kr, Tools, testPrincipal, nil, testNow); c != "" || err != nil {
		t.Errorf("no next page: %q %v", c, err)
	}
	next := map[int]string{2: "files-p2", 0: "gh-p2"}
	c, err := NextCursor(kr, Tools, testPrincipal, next, testNow)
	if err != nil || c == "" {
		t.Fatalf("%q %v", c, err)
	}
	got, err := OpenCursor(kr, s, c, Tools, testPrincipal, testNow.Add(CursorLifetime-time.Second))
	if err != nil || !reflect.DeepEqual(got, next) {
		t.Errorf("opened %v, %v", got, err)
	}
	if _, err := NextCursor(kr, Tools, testPrincipal, map[int]string{0: strings.Repeat("c", seal.MaxUpstreamCursor+1)}, testNow); !errors.Is(err, seal.ErrCursorTooLarge) {
		t.Errorf("a cursor over 4 KiB: %v", err)
	}
	if _, err := NextCursor(kr, Tools, testPrincipal, map[int]string{256: "c"}, testNow); !errors.Is(err, seal.ErrCursorTooLarge) {
		t.Errorf("server 256: %v", err)
	}
}

// TestCursorAttacks: a cursor of another principal, of another list,
// expired, tampered, of another keyring, or naming a server the set does
// not have, is refused.
func TestCursorAttacks(t *testing.T) {
	kr, s := testKeyring(t, 1), testSet(t)
	c, err := NextCursor(kr, Tools, testPrincipal, map[int]string{1: "jira-p2"}, testNow)
	if err != nil {
		t.Fatal(err)
	}
	ghost, err := NextCursor(kr, Tools, testPrincipal, map[int]string{5: "p2"}, testNow)
	if err != nil {
		t.Fatal(err)
	}
	tampered := []byte(c)
	tampered[len(tampered)-3] = map[bool]byte{true: 'B', false: 'A'}[tampered[len(tampered)-3] == 'A']
	for _, tc := range []struct {
		name      string
		kr        *seal.Keyring
		token     string
		kind      ListKind
		principal [16]byte
		now       time.Time
	}{
		{"another principal", kr, c, Tools, [16]byte{9}, testNow},
		{"another list", kr, c, Prompts, testPrincipal, testNow},
		{"expired", kr, c, Tools, testPrincipal, testNow.Add(CursorLifetime)},
		{"tampered", kr, string(tampered), Tools, testPrincipal, testNow},
		{"another keyring", testKeyring(t, 2), c, Tools, testPrincipal, testNow},
		{"a server the set lacks", kr, ghost, Tools, testPrincipal, testNow},
		{"an upstream's own cursor", kr, "jira-p2", Tools, testPrincipal, testNow},
	} {
		if got, err := OpenCursor(tc.kr, s, tc.token, tc.kind, tc.principal, tc.now); !errors.Is(err, seal.ErrCursorInvalid) {
			t.Errorf("%s: %v, %v", tc.name, got, err)
		}
	}
}
