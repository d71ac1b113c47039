package forward

import (
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/legacy"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
)

// An upstream's 2025 task object is hostile: its id is bounded, its status
// must be known, ttl and pollInterval become integer milliseconds,
// statusMessage is clipped and bad timestamps are replaced.
func TestParseUpstreamTask(t *testing.T) {
	u, ok := parseUpstreamTask(gjson.Parse(`{"taskId":"abc","status":"working","ttl":30000.4,"pollInterval":100,` +
		`"createdAt":"2026-11-26T03:35:13.958Z","lastUpdatedAt":"2026-11-26T03:35:14Z","statusMessage":"busy"}`))
	if !ok || u.id != "abc" || u.status != "working" || u.ttlMs != 30000 || u.pollMs != 100 || u.note != "busy" ||
		isoTime(u.created) != "2026-11-26T03:35:13.958Z" || isoTime(u.updated) != "2026-11-26T03:35:14.000Z" {
		t.Fatalf("parseUpstreamTask = %+v, %v", u, ok)
	}
	for name, bad := range map[string]string{
		"no id":          `{"status":"working"}`,
		"empty id":       `{"taskId":"","status":"working"}`,
		"long id":        `{"taskId":"` + strings.Repeat("x", 256) + `","status":"working"}`,
		"numeric id":     `{"taskId":7,"status":"working"}`,
		"unknown status": `{"taskId":"a","status":"sleeping"}`,
		"not an object":  `["a"]`,
	} {
		if _, ok := parseUpstreamTask(gjson.Parse(bad)); ok {
			t.Errorf("%s: accepted %s", name, bad)
		}
	}
	before := time.Now()
	u, ok = parseUpstreamTask(gjson.Parse(`{"taskId":"a","status":"completed","ttl":null,"pollInterval":1e300,` +
		`"createdAt":"yesterday","lastUpdatedAt":7,"statusMessage":"` + strings.Repeat("m", 600) + `"}`))
	if !ok || u.ttlMs != 0 || u.pollMs != maxUpstreamPollMs || len(u.note) != maxUpstreamNote || u.created.Before(before) || u.updated.Before(before) {
		t.Fatalf("hostile members: %+v, %v", u, ok)
	}
	if u, _ = parseUpstreamTask(gjson.Parse(`{"taskId":"a","status":"working","ttl":-5,"pollInterval":0.2}`)); u.ttlMs != 0 || u.pollMs != 0 {
		t.Fatalf("negative ttl, sub-millisecond pollInterval: %+v", u)
	}
}

func TestWithoutRelatedTask(t *testing.T) {
	for in, want := range map[string]string{
		`{"content":[],"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"x"}}}`:        `{"content":[]}`,
		`{"_meta":{"a":1,"io.modelcontextprotocol/related-task":{"taskId":"x"}},"message":"m"}`: `{"_meta":{"a":1},"message":"m"}`,
		`{"_meta":{"a":1}}`: `{"_meta":{"a":1}}`,
		`{"content":[]}`:    `{"content":[]}`,
		`not json`:          `not json`,
	} {
		if got := string(withoutRelatedTask([]byte(in))); got != want {
			t.Errorf("withoutRelatedTask(%s) = %s, want %s", in, got, want)
		}
	}
}

// A call goes upstream task-augmented only when the request may become a
// task, the upstream declares 2025 tasks for tools/call and its tools/list
// gave the tool a taskSupport other than forbidden; a client's own
// params.task never goes.
func TestUpstreamTaskParams(t *testing.T) {
	b := New(nil, DefaultOptions())
	defer b.Close()
	const up = "http://up/mcp"
	b.support.learn(up, [16]byte{}, []byte(`{"tools":[{"name":"slow","execution":{"taskSupport":"optional"}},{"name":"plain"}]}`))
	withTasks := &legacy.Session{InitResult: []byte(`{"capabilities":{"tasks":{"requests":{"tools":{"call":{}}}}}}`), ID: "s1"}
	without := &legacy.Session{InitResult: []byte(`{"capabilities":{"tools":{}}}`), ID: "s1"}
	opts := DefaultOptions()
	opts.Tasks.TTL = 90 * time.Second
	req := func(tool string, hosting bool) *Request {
		r := &Request{Target: translate.Target{Upstream: up}, Options: opts.Ready(), ModernRequest: &translate.ModernRequest{Message: jsonrpc.Message{Method: "tools/call"}, Name: tool}}
		if hosting {
			r.hosting = &TaskRule{Mode: TaskOptional}
		}
		return r
	}
	params := []byte(`{"name":"slow","arguments":{"a":1},"task":{"ttl":5},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}`)
	got, ok := b.upstreamTaskParams(req("slow", true), withTasks, params)
	if !ok || string(got) != `{"name":"slow","arguments":{"a":1},"task":{"ttl":90000}}` {
		t.Fatalf("upstreamTaskParams = %s, %v", got, ok)
	}
	for name, c := range map[string]struct {
		r    *Request
		sess *legacy.Session
	}{
		"no extension (not hosting)": {req("slow", false), withTasks},
		"upstream without tasks":     {req("slow", true), without},
		"tool without taskSupport":   {req("plain", true), withTasks},
		"tool never listed":          {req("other", true), withTasks},
		"session id too long":        {req("slow", true), &legacy.Session{InitResult: withTasks.InitResult, ID: legacy.UpstreamSessionID(strings.Repeat("s", 256))}},
	} {
		if _, ok := b.upstreamTaskParams(c.r, c.sess, params); ok {
			t.Errorf("%s: the call would go task-augmented", name)
		}
	}
	if got := string(translate.UpstreamParams(params)); strings.Contains(got, `"task"`) {
		t.Fatalf("upstreamParams kept a client's params.task: %s", got)
	}
}
