package reverse

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/internal/testkit"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/seal"
	"github.com/tidwall/gjson"
)

// TestReverseOptionsPerSession: a session keeps the options of the
// configuration that opened it (max_rounds), and a session id sealed with
// one configuration's key does not open with another's.
func TestReverseOptionsPerSession(t *testing.T) {
	up := modernUpstream(t)
	rv := newTestReverse(t)
	kB := testkit.Keyring(t, bytes.Repeat([]byte{5}, seal.KeySize))
	optA := reverseOptions(func(o *Options) {
		o.Keyring, o.Instance, o.MaxRounds, o.RoundTimeout = rv.defaults.Keyring, "0123456789abcdef", 1, 5*time.Second
	}).Ready()
	optB := reverseOptions(func(o *Options) {
		o.Keyring, o.Instance, o.MaxRounds, o.RoundTimeout = kB, "0123456789abcdef", 3, 5*time.Second
	}).Ready()

	open := func(o *Options) (*Session, string) {
		body := []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{}},"clientInfo":{"name":"t","version":"1"}}}`)
		_, sid, rerr := rv.Initialize(context.Background(), InitRequest{Target: translate.Target{Upstream: up}, Principal: translate.PrincipalHash("p"), ID: []byte("1"), Body: body, Options: o})
		if rerr != nil {
			t.Fatal(rerr)
		}
		s, err := rv.Open(o, string(sid), translate.PrincipalHash("p"), time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return s, string(sid)
	}
	run := func(s *Session, rounds int) (int, sinkResponse) {
		sink := newRecordingSink()
		go rv.Serve(t.Context(), s, callRequest(t, 1, rounds), sink)
		for asked := 0; ; asked++ {
			select {
			case f := <-sink.final:
				return asked, f
			case q := <-sink.notes:
				answer := fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"action":"accept","content":{"answer":"r"}}}`, gjson.GetBytes(q, "id").Raw)
				if rerr := rv.Answer(s, []byte(answer)); rerr != nil {
					t.Fatal(rerr)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("no answer within 5s")
			}
		}
	}

	sA, sidA := open(optA)
	if asked, f := run(sA, 3); asked != 1 || !gjson.GetBytes(f.msg, "result.isError").Bool() {
		t.Fatalf("A's session asked %d rounds, then %s; want 1 then max_rounds' isError result", asked, f.msg)
	}
	sB, _ := open(optB)
	if asked, f := run(sB, 3); asked != 3 || gjson.GetBytes(f.msg, "result.isError").Bool() {
		t.Fatalf("B's session asked %d rounds, then %s; want 3 then the result", asked, f.msg)
	}
	if _, err := rv.Open(optB, sidA, translate.PrincipalHash("p"), time.Now()); !errors.Is(err, ErrNoSession) {
		t.Fatalf("A's session id opened with B's key: %v", err)
	}
}

// reverseOptions is DefaultOptions changed by set.
func reverseOptions(set func(*Options)) Options {
	o := DefaultOptions()
	set(&o)
	return o
}
