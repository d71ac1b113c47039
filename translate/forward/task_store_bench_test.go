package forward

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/caddyserver/certmagic"
	"github.com/tidwall/gjson"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/legacy"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/seal"
)

// The cost of task records, with Caddy's default storage
// (certmagic's file system, under a temporary directory):
//
//	go test ./translate/forward -run '^$' -bench 'TaskRecord|TaskGet' -benchtime 2000x
//
// BenchmarkTaskRecordWrite writes a task's record as a transition does (a
// task waiting for one question, its result 1 KiB), reporting the sealed
// record's size; BenchmarkTaskGet answers tasks/get from the owner's memory
// and, on another instance, from the record (the owner holding its lease).

// benchTask is a task of principal "alice" waiting for one question, as its
// owner (instance gw-0, options o) holds it.
func benchTask(b *Bridge, o *Options) *task {
	rec := &seal.TaskRecord{Handle: [16]byte{1, 2, 3}, Principal: translate.PrincipalHash("alice"), Tool: "ask", Upstream: "http://127.0.0.1:9/mcp",
		Status: translate.TaskInputRequired, Created: time.Now(), Updated: time.Now(), TTL: time.Hour, PollMs: 1000,
		Inputs: []seal.TaskInput{{ID: []byte(`3`), Key: "elicitation-1", Method: "elicitation/create",
			Params: []byte(`{"message":"Your name?","requestedSchema":{"type":"object","properties":{"name":{"type":"string"}}}}`)}},
		Result:  []byte(fmt.Sprintf(`{"content":[{"type":"text","text":%q}]}`, slices.Repeat([]byte("x"), 1024))),
		Session: "S3SS10N", Version: legacy.ProtocolVersion, CallID: []byte(`"gw-7"`), After: "stream_3", Seen: 1, ServerInfo: []byte(`{"name":"s","version":"1"}`)}
	t := b.recordView(rec, "", o)
	t.id = seal.SealTask(o.Keyring, seal.Task{Instance: o.Instance, Handle: t.handle, Principal: t.princ})
	t.place = b.forceTaskPlace(o, t.princ)
	t.timer = time.AfterFunc(time.Hour, func() {})
	return t
}

func benchFleet(tb testing.TB) ([]*Bridge, []*Options) {
	kr, _ := seal.NewKeyring(seal.NewRandomKey())
	store := &certmagic.FileStorage{Path: tb.TempDir()}
	var bs []*Bridge
	var os []*Options
	for i := range 2 {
		o := DefaultOptions()
		o.Keyring, o.Instance, o.Tasks.Store = kr, fmt.Sprintf("gw-%d", i), store
		p := legacy.NewPool(legacy.PoolOptions{MaxSessions: 10, IdleTimeout: time.Minute, Client: http.DefaultClient})
		b := New(p, o)
		tb.Cleanup(func() { b.Close(); p.Close() })
		bs, os = append(bs, b), append(os, o.Ready())
	}
	return bs, os
}

func BenchmarkTaskRecordWrite(b *testing.B) {
	bs, os := benchFleet(b)
	t := benchTask(bs[0], os[0])
	bs[0].claim(os[0])
	t.mu.Lock()
	sealed, err := seal.SealTaskRecord(os[0].Keyring, t.record(bs[0].leases.boot))
	t.mu.Unlock()
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		bs[0].persist(t)
	}
	b.ReportMetric(float64(len(sealed)), "record-bytes")
}

func BenchmarkTaskGet(b *testing.B) {
	bs, os := benchFleet(b)
	t := benchTask(bs[0], os[0])
	bs[0].tmu.Lock()
	bs[0].tasks[t.handle] = t
	bs[0].tmu.Unlock()
	bs[0].persist(t) // the record, and gw-0's lease
	get := func(o *Options, gone bool) Request {
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":%q,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",`+
			`"io.modelcontextprotocol/clientCapabilities":{"elicitation":{},"extensions":{"io.modelcontextprotocol/tasks":{}}}}}}`, t.id)
		h := http.Header{"Mcp-Protocol-Version": {translate.ModernVersion}, "Mcp-Method": {"tasks/get"}, "Mcp-Name": {t.id}}
		req, rerr := translate.ValidateModern(http.MethodPost, h, []byte(body), nil)
		if rerr != nil {
			b.Fatal(rerr)
		}
		return Request{Principal: t.princ, ModernRequest: req, Options: o, OwnerGone: gone}
	}
	for _, bc := range []struct {
		name string
		b    *Bridge
		r    Request
	}{{"owner", bs[0], get(os[0], false)}, {"record", bs[1], get(os[1], true)}} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				a := &recordedAnswer{}
				bc.b.Serve(context.Background(), bc.r, a)
				if gjson.GetBytes(a.final, "result.status").String() != translate.TaskInputRequired {
					b.Fatalf("tasks/get: %s", a.final)
				}
			}
		})
	}
}
